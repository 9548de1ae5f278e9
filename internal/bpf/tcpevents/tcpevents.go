// Package tcpevents loads the BPF program of lanes' TCP event mode: per-ACK
// congestion state (tcp:tcp_probe) and flow start/end (sock:inet_sock_set_state)
// delivered through a ring buffer. internal/tcpmon decodes the events.
package tcpevents

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
)

// Event kinds (enum event_kind in tcpevents.c).
const (
	KindProbe = 1
	KindStart = 2
	KindEnd   = 3
)

// MaxPorts is how many ports a port filter may list.
const MaxPorts = 8

// Event is one record from the ring buffer (struct event).
type Event = tcpeventsEvent

// Config selects what the program reports.
type Config struct {
	Probe bool     // per-ACK events from tcp:tcp_probe
	State bool     // start/end events from sock:inet_sock_set_state
	Ports []uint16 // only sockets with one of these ports on either side; empty = all
	// ProbeGap is the least time between two probe events of one socket
	// (0 = every ACK).
	ProbeGap time.Duration
	// AllSegments reports probe events for every received segment, not
	// only pure ACKs (data segments update the receiver's side).
	AllSegments bool
	// WakeupBytes batches wake-ups: the reader is woken only when this many
	// bytes of events are pending (it must poll for the rest, see
	// ringbuf.Reader.SetDeadline). 0 wakes it for every event.
	WakeupBytes int
	RingSize    int // ring buffer bytes, a power of two multiple of the page size; 0 = 1 MiB
}

// Tracer is the loaded and attached program.
type Tracer struct {
	objs   tcpeventsObjects
	links  []link.Link
	Reader *ringbuf.Reader
}

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type event tcpevents tcpevents.c -- -nostdinc -I../include -O2 -g -Wall -Werror

// Open loads the program with cfg and attaches it to the tracepoints.
func Open(cfg Config) (*Tracer, error) {
	if !cfg.Probe && !cfg.State {
		return nil, errors.New("tcpevents: nothing to trace (neither probe nor state events)")
	}
	if len(cfg.Ports) > MaxPorts {
		return nil, fmt.Errorf("tcpevents: at most %d ports, got %d", MaxPorts, len(cfg.Ports))
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("tcpevents: memlock: %w", err)
	}
	if err := ensureTracefs(); err != nil {
		return nil, err
	}
	spec, err := loadTcpevents()
	if err != nil {
		return nil, fmt.Errorf("tcpevents: load spec: %w", err)
	}
	c := tcpeventsConfig{Nports: uint8(len(cfg.Ports)), ProbeGapNs: uint64(cfg.ProbeGap), WakeupBytes: uint64(cfg.WakeupBytes)}
	if cfg.Probe {
		c.WantProbe = 1
	}
	if cfg.State {
		c.WantState = 1
	}
	if cfg.AllSegments {
		c.AllSegments = 1
	}
	copy(c.Ports[:], cfg.Ports)
	if err := spec.Variables["CFG"].Set(c); err != nil {
		return nil, fmt.Errorf("tcpevents: set config: %w", err)
	}
	if cfg.RingSize > 0 {
		spec.Maps["events"].MaxEntries = uint32(cfg.RingSize)
	}
	t := &Tracer{}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("tcpevents: load program: %w", err)
	}
	attach := func(group, name string, p *ebpf.Program) error {
		l, err := link.Tracepoint(group, name, p, nil)
		if err != nil {
			return fmt.Errorf("tcpevents: attach %s:%s: %w", group, name, err)
		}
		t.links = append(t.links, l)
		return nil
	}
	if cfg.Probe {
		if err := attach("tcp", "tcp_probe", t.objs.OnTcpProbe); err != nil {
			t.Close()
			return nil, err
		}
	}
	if cfg.State {
		if err := attach("sock", "inet_sock_set_state", t.objs.OnSetState); err != nil {
			t.Close()
			return nil, err
		}
	}
	t.Reader, err = ringbuf.NewReader(t.objs.Events)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("tcpevents: ring buffer reader: %w", err)
	}
	return t, nil
}

// Dropped is the number of events lost because the ring buffer was full.
func (t *Tracer) Dropped() (uint64, error) {
	var per []uint64
	if err := t.objs.Dropped.Lookup(uint32(0), &per); err != nil {
		return 0, err
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// Programs returns the attached programs (for run-time statistics).
func (t *Tracer) Programs() []*ebpf.Program {
	return []*ebpf.Program{t.objs.OnTcpProbe, t.objs.OnSetState}
}

// Close detaches and unloads everything.
func (t *Tracer) Close() error {
	var errs []error
	if t.Reader != nil {
		errs = append(errs, t.Reader.Close())
	}
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

// ensureTracefs mounts tracefs at /sys/kernel/tracing if neither it nor
// debugfs's tracing directory is there: attaching to a tracepoint needs its
// id from tracefs, and minimal systems do not mount it.
func ensureTracefs() error {
	for _, d := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
		if _, err := os.Stat(d); err == nil {
			return nil
		}
	}
	if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
		return fmt.Errorf("tcpevents: tracefs is not mounted and mounting it at /sys/kernel/tracing failed: %w", err)
	}
	return nil
}

// LoadSpec returns the object's collection spec, unloaded (for checks of
// its CO-RE relocations against other kernels, internal/bpf/coretest).
func LoadSpec() (*ebpf.CollectionSpec, error) { return loadTcpevents() }

// Probe loads both programs as Open does, without attaching them, and
// unloads them (lanes doctor).
func Probe() error {
	if err := rlimit.RemoveMemlock(); err != nil {
		return err
	}
	var objs tcpeventsObjects
	if err := loadTcpeventsObjects(&objs, nil); err != nil {
		return err
	}
	return objs.Close()
}
