// events.go: event mode. Wraps internal/bpf/tcpevents: per-ACK congestion
// state of chosen flows (tcp:tcp_probe) and flow start and end with the
// flow's lifetime (sock:inet_sock_set_state), like tcplife.
//
// The BPF side filters by port so a busy machine pays only for the flows
// asked for; ProbeGap bounds the events per flow further. Kernel timestamps
// (CLOCK_MONOTONIC) are turned into wall-clock time with one offset taken at
// start.
package tcpmon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/tcpevents"
)

// Event is one traced TCP event.
type Event struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"` // "probe", "start" or "end"
	Cookie uint64    `json:"cookie,omitempty"`
	Sock   uint64    `json:"sock,string"` // kernel struct sock address, the flow's key for start/end (a string: above 2^53)
	Src    string    `json:"src"`
	Dst    string    `json:"dst"`
	// probe
	Cwnd     uint32 `json:"cwnd,omitempty"`
	SSThresh uint32 `json:"ssthresh,omitempty"`
	SRTT     uint32 `json:"srtt_us,omitempty"`
	SndWnd   uint32 `json:"snd_wnd_bytes,omitempty"`
	RcvWnd   uint32 `json:"rcv_wnd_bytes,omitempty"`
	SndUna   uint32 `json:"snd_una,omitempty"`
	SndNxt   uint32 `json:"snd_nxt,omitempty"`
	DataLen  uint32 `json:"data_len,omitempty"`
	// start / end
	OldState string        `json:"old_state,omitempty"`
	NewState string        `json:"new_state,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"` // start: handshake; end: lifetime
	PID      uint32        `json:"pid,omitempty"`         // active opens only
	Comm     string        `json:"comm,omitempty"`
}

// EventConfig selects what event mode traces.
type EventConfig struct {
	Probe    bool     // per-ACK cwnd/ssthresh/srtt/snd_wnd
	State    bool     // flow start / end
	Ports    []uint16 // either side; empty = all (costly on a busy host)
	ProbeGap time.Duration
	// AllSegments: probe events for data segments too, not only pure ACKs.
	AllSegments bool
	// MaxDelay batches events: the kernel wakes the reader only when 64 KiB
	// of events are pending, and the reader polls every MaxDelay, so a busy
	// trace costs one wake-up per ~500 events. 0 wakes it for each event.
	MaxDelay time.Duration
	RingSize int
}

// EventStats are event mode's counters.
type EventStats struct {
	Events  uint64
	Dropped uint64 // lost because the ring buffer was full
}

// Tracer reads TCP events.
type Tracer struct {
	t      *tcpevents.Tracer
	offset time.Duration // wall - monotonic
	n      uint64
	poll   time.Duration // reader deadline between two checks of ctx
	rec    ringbuf.Record
	addrs  map[addrKey][2]string // formatted addresses, to spare allocations
}

type addrKey struct {
	sock, cookie uint64
	sport, dport uint16
}

// OpenTracer loads and attaches the event program (needs root / CAP_BPF +
// CAP_PERFMON).
func OpenTracer(cfg EventConfig) (*Tracer, error) {
	tc := tcpevents.Config{Probe: cfg.Probe, State: cfg.State, Ports: cfg.Ports,
		ProbeGap: cfg.ProbeGap, AllSegments: cfg.AllSegments, RingSize: cfg.RingSize}
	poll := 200 * time.Millisecond
	if cfg.MaxDelay > 0 {
		tc.WakeupBytes = 64 << 10
		if cfg.RingSize > 0 && cfg.RingSize/4 < tc.WakeupBytes {
			tc.WakeupBytes = cfg.RingSize / 4
		}
		poll = cfg.MaxDelay
	}
	t, err := tcpevents.Open(tc)
	if err != nil {
		return nil, err
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Close()
		return nil, fmt.Errorf("clock_gettime: %w", err)
	}
	off := time.Duration(time.Now().UnixNano() - ts.Nano())
	return &Tracer{t: t, offset: off, poll: poll, addrs: map[addrKey][2]string{}}, nil
}

// Next blocks for the next event, until ctx ends (then it returns ctx's error).
func (tr *Tracer) Next(ctx context.Context) (Event, error) {
	for {
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) > tr.poll {
			dl = time.Now().Add(tr.poll)
		}
		tr.t.Reader.SetDeadline(dl)
		err := tr.t.Reader.ReadInto(&tr.rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if ctx.Err() != nil {
				return Event{}, ctx.Err()
			}
			continue
		}
		if err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return Event{}, err
			}
			return Event{}, fmt.Errorf("read ring buffer: %w", err)
		}
		if len(tr.rec.RawSample) < int(sizeofEvent) {
			continue
		}
		raw := decodeRawEvent(tr.rec.RawSample)
		tr.n++
		return tr.decode(&raw), nil
	}
}

// Stats returns the counters so far.
func (tr *Tracer) Stats() EventStats {
	d, _ := tr.t.Dropped()
	return EventStats{Events: tr.n, Dropped: d}
}

// RunTime is the total time the kernel spent in the event programs and how
// often they ran, if BPF statistics are enabled (kernel.bpf_stats_enabled).
func (tr *Tracer) RunTime() (time.Duration, uint64) {
	var d time.Duration
	var n uint64
	for _, p := range tr.t.Programs() {
		if p == nil {
			continue
		}
		if st, err := p.Stats(); err == nil {
			d += st.Runtime
			n += st.RunCount
		}
	}
	return d, n
}

// Close detaches the programs.
func (tr *Tracer) Close() error { return tr.t.Close() }

func (tr *Tracer) decode(r *tcpevents.Event) Event {
	e := Event{Time: time.Unix(0, int64(r.TsNs)+int64(tr.offset)), Cookie: r.Cookie, Sock: r.Skaddr}
	k := addrKey{r.Skaddr, r.Cookie, r.Sport, r.Dport}
	a, ok := tr.addrs[k]
	if !ok {
		var sa, da netip.Addr
		if r.Family == unix.AF_INET6 {
			sa, da = netip.AddrFrom16(r.Saddr).Unmap(), netip.AddrFrom16(r.Daddr).Unmap()
		} else {
			sa, da = netip.AddrFrom4([4]byte(r.Saddr[:4])), netip.AddrFrom4([4]byte(r.Daddr[:4]))
		}
		a = [2]string{netip.AddrPortFrom(sa, r.Sport).String(), netip.AddrPortFrom(da, r.Dport).String()}
		if len(tr.addrs) > 4096 {
			clear(tr.addrs)
		}
		tr.addrs[k] = a
	}
	e.Src, e.Dst = a[0], a[1]
	switch r.Kind {
	case tcpevents.KindProbe:
		e.Kind = "probe"
		e.Cwnd, e.SSThresh, e.SRTT, e.SndWnd, e.RcvWnd = r.SndCwnd, r.Ssthresh, r.SrttUs, r.SndWnd, r.RcvWnd
		e.SndUna, e.SndNxt, e.DataLen = r.SndUna, r.SndNxt, r.DataLen
	case tcpevents.KindStart, tcpevents.KindEnd:
		e.Kind = "start"
		if r.Kind == tcpevents.KindEnd {
			e.Kind = "end"
		}
		e.OldState, e.NewState = StateName(r.Oldstate), StateName(r.Newstate)
		e.Duration = time.Duration(r.DurationNs)
		e.PID = r.Pid
		b := make([]byte, 0, 16)
		for _, c := range r.Comm {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		e.Comm = string(b)
	default:
		e.Kind = fmt.Sprintf("kind-%d", r.Kind)
	}
	return e
}
