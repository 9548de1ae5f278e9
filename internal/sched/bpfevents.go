// bpfevents.go: process events from BPF programs on the scheduler's
// tracepoints (internal/bpf/procevents), the engine's source where the
// proc connector delivers none (a daemon outside the initial network
// namespace, a kernel without CONFIG_PROC_EVENTS): the same events, read
// the same way, instead of a 1 s /proc poll; and the choice between the
// two (openEventSource, ProbeEventSource for lanes doctor).
package sched

import (
	"errors"
	"fmt"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/procevents"
	"github.com/lanes-net/lanes/internal/monoclock"
)

// eventSource is where the engine's process events come from: the proc
// connector or the BPF programs.
type eventSource interface {
	Read(evs []Event) ([]Event, error) // errTimeout, ErrOverrun
	SetReadTimeout(d time.Duration) error
	Close() error
}

// bpfSource reads the BPF programs' ring buffer.
type bpfSource struct {
	s       *procevents.Source
	timeout time.Duration
	lost    uint64
	// renames the programs held back (one per process per 100 ms), looked
	// up every pendingEvery as comm events
	pending     []int
	pendingNext time.Time
}

// pendingEvery is how often the renames held back are looked up.
const pendingEvery = time.Second

// openBPFSource opens the programs for the network namespace with inode
// netnsIno (0: every process).
func openBPFSource(netnsIno uint32) (*bpfSource, error) {
	s, err := procevents.Open(netnsIno)
	if err != nil {
		return nil, err
	}
	return &bpfSource{s: s, timeout: time.Second}, nil
}

func (b *bpfSource) SetReadTimeout(d time.Duration) error { b.timeout = d; return nil }

func (b *bpfSource) Close() error { return b.s.Close() }

// Read appends the next event; ErrOverrun once events were lost (a full
// ring), so that the engine rescans /proc.
func (b *bpfSource) Read(evs []Event) ([]Event, error) {
	if now := time.Now(); now.After(b.pendingNext) {
		b.pendingNext = now.Add(pendingEvery)
		b.pending = append(b.pending, b.s.PendingRenames()...)
	}
	if n := len(b.pending); n > 0 {
		pid := b.pending[n-1]
		b.pending = b.pending[:n-1]
		return append(evs, Event{What: procEventComm, TimeNS: uint64(monoclock.Now()), PID: pid, TGID: pid}), nil
	}
	e, err := b.s.Read(b.timeout)
	if errors.Is(err, procevents.ErrTimeout) {
		return evs, errTimeout
	}
	if err != nil {
		return evs, err
	}
	if n := b.s.Lost(); n != b.lost {
		b.lost = n
		return evs, ErrOverrun
	}
	return append(evs, Event{What: e.What, TimeNS: e.TimeNs, PID: int(e.Pid), TGID: int(e.Tgid),
		ParentPID: int(e.ParentPid), ParentTG: int(e.ParentTgid), Comm: procevents.Comm(e)}), nil
}

// openEventSource opens the proc connector (unless bpfOnly, or the
// kernel's config says it sends nothing), else the BPF tracepoint
// programs for the network namespace with inode netnsIno (0: all): the
// source, its name, and why the connector is not it.
func openEventSource(bpfOnly bool, netnsIno uint32) (src eventSource, mode string, connErr, err error) {
	var conn *Connector
	cerr := errors.New("not used (BPFEvents)")
	if !bpfOnly {
		if cerr = procEventsBuiltOut(kernelConfig(kernelRelease())); cerr == nil {
			conn, cerr = OpenConnector()
		}
	}
	if cerr == nil {
		return conn, "netlink", nil, nil
	}
	bsrc, berr := openBPFSource(netnsIno)
	if berr == nil {
		return bsrc, "bpf tracepoints", cerr, nil
	}
	return nil, "", cerr, fmt.Errorf("%w; BPF tracepoints: %w", cerr, berr)
}

// ProbeEventSource names the source a task engine started here takes
// ("netlink", "bpf tracepoints", or "poll 1s" with the error), and why
// the proc connector is not it (nil when it is). For lanes doctor: it
// opens the source and closes it.
func ProbeEventSource() (mode string, connErr, err error) {
	src, mode, connErr, err := openEventSource(false, 0)
	if err != nil {
		return "poll 1s", connErr, err
	}
	src.Close()
	return mode, connErr, nil
}
