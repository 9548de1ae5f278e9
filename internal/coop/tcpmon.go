// tcpmon.go: the real FlowSource — this host's uplink TCP connections as
// sampled by the TCP monitor (internal/tcpmon, sock_diag).
package coop

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/tcpmon"
)

// Sampler is the part of *tcpmon.Sampler the flow source uses.
type Sampler interface {
	Sample() ([]tcpmon.Flow, error)
}

// MonitorSource turns TCP monitor samples into uplink flows: established
// connections from a local address of the managed interface (when Local is
// set). Whether a flow is sending is decided by the controller (data waiting
// or acknowledged), so downloads count as idle. App is the owning process
// name unless AppOf says otherwise.
type MonitorSource struct {
	S Sampler
	// Local, when valid, keeps only connections whose local address is in
	// it (the managed interface's subnet: traffic that crosses the AP).
	Local netip.Prefix
	// AppOf, when set, names a flow's application (e.g. the policy rule that
	// classified it); default the process name.
	AppOf func(f *tcpmon.Flow) string
	mu    sync.Mutex
}

// UplinkFlows implements FlowSource.
func (m *MonitorSource) UplinkFlows(_ context.Context) ([]Flow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fl, err := m.S.Sample()
	if err != nil {
		return nil, fmt.Errorf("tcp monitor sample: %w", err)
	}
	out := make([]Flow, 0, len(fl))
	for i := range fl {
		f := &fl[i]
		if f.State != "ESTAB" && f.State != "CLOSE-WAIT" {
			continue
		}
		if m.Local.IsValid() {
			src, err := netip.ParseAddrPort(f.Src)
			if err != nil || !m.Local.Contains(src.Addr().Unmap()) {
				continue
			}
		}
		out = append(out, FromMonitor(f, m.AppOf))
	}
	return out, nil
}

// FromMonitor converts one monitor sample.
func FromMonitor(f *tcpmon.Flow, appOf func(*tcpmon.Flow) string) Flow {
	inflight := uint64(0)
	if f.SendQ > f.Notsent {
		inflight = uint64(f.SendQ - f.Notsent)
	} else {
		inflight = uint64(f.Unacked) * uint64(f.MSS)
	}
	app := f.Comm
	if appOf != nil {
		app = appOf(f)
	}
	return Flow{
		Cookie: f.Cookie, Lane: f.Lane, App: app, MSS: f.MSS, Cwnd: f.Cwnd, CAState: caState(f.CAState),
		SRTT: time.Duration(f.SRTT) * time.Microsecond, MinRTT: time.Duration(f.MinRTT) * time.Microsecond,
		RcvRTT:  time.Duration(f.RcvRTT) * time.Microsecond,
		NotSent: uint64(f.Notsent), InFlight: inflight, BytesAcked: f.BytesAcked, BytesRecv: f.BytesRecv, Retrans: f.TotalRetrans,
	}
}

// caState maps the monitor's CA state name to the kernel's number.
func caState(s string) uint8 {
	c, _ := tcpmon.ParseCAState(s)
	return uint8(c)
}
