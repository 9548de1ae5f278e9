// lberemote_meter.go: what crossed the emulated link, per server and
// direction, in bins (remoteMeter, fed by the link's packet hook), the
// link's capacity over a window, and a run's timeline from both.
package lbe

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

// timelineBin is the resolution of RemoteRun.Timeline.
const timelineBin = 500 * time.Millisecond

// remoteMeter counts the bytes each server address exchanged with the phone
// per 100 ms bin, on the uplink (to it) and the downlink (from it).
type remoteMeter struct {
	mu   sync.Mutex
	t0   time.Time
	bins map[string]map[netip.Addr][]uint64 // "upload"/"download" -> server -> bins
}

func newRemoteMeter() *remoteMeter {
	return &remoteMeter{bins: map[string]map[netip.Addr][]uint64{"upload": {}, "download": {}}}
}

func (m *remoteMeter) see(dir string, b []byte) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return
	}
	off := 16 // uplink: destination
	if dir == "download" {
		off = 12
	}
	a := netip.AddrFrom4([4]byte(b[off : off+4]))
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.t0.IsZero() || now.Before(m.t0) {
		return
	}
	i := int(now.Sub(m.t0) / meterBin)
	s := m.bins[dir][a]
	for len(s) <= i {
		s = append(s, 0)
	}
	s[i] += uint64(binary.BigEndian.Uint16(b[2:]))
	m.bins[dir][a] = s
}

// bytes returns what server a sent in dir over [from, to) from t0.
func (m *remoteMeter) bytes(dir string, a netip.Addr, from, to time.Duration) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum uint64
	s := m.bins[dir][a]
	for i := int(from / meterBin); i < int(to/meterBin) && i < len(s); i++ {
		sum += s[i]
	}
	return sum
}

// capacity is what link l could carry over [from, to) from its start, bytes.
func capacity(l *emu.Link, from, to time.Duration) float64 {
	cfg := l.Config()
	if cfg.Trace != nil {
		return float64(cfg.Trace.Count(from, to) * emu.OpportunityBytes)
	}
	return cfg.Rate / 8 * (to - from).Seconds()
}

// timeline is RemoteRun.Timeline over [0, end).
func (rb *remoteBed) timeline(dir string, end time.Duration) map[string][]float64 {
	l := rb.up
	if dir == "download" {
		l = rb.down
	}
	tl := map[string][]float64{}
	mbps := func(bytes float64) float64 { return bytes * 8 / timelineBin.Seconds() / 1e6 }
	for t := time.Duration(0); t+timelineBin <= end; t += timelineBin {
		tl["capacity"] = append(tl["capacity"], mbps(capacity(l, t, t+timelineBin)))
		for name, n := range map[string]*topo.Node{"bg": rb.bg, "bg2": rb.bg2, "fg": rb.fg} {
			tl[name] = append(tl[name], mbps(float64(rb.meter.bytes(dir, n.Addr, t, t+timelineBin))))
		}
	}
	return tl
}
