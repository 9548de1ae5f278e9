// emulator.go: the user-space router that joins hosts' TUN devices through
// emulated links.
//
//	host A --TUN--> [A.Up link] --route by dst IP--> [B.Down link] --TUN--> host B
//
// Every host has an uplink (host -> router) and a downlink (router -> host).
// Several hosts may share one Link object: that is the shared medium (N hosts
// behind one access point, one rate and one queue per direction). A host
// whose links are unlimited with no delay is a wired server.
//
// The reader of each host's TUN either takes packets as they come (the
// device queue drops at its limit) or, with BackPressure, takes the next
// packet only while the uplink's device queue has room, so packets wait in
// the TUN's ring (whose size is the device's txqueuelen). On Linux 6.18 the
// TUN driver drops when that ring is full instead of stopping the qdisc
// (see docs/lab.md), which is why the lab puts a gate in the host as well.
//
// IPv4 limited broadcast (255.255.255.255) and IPv6 link-local multicast
// (ff02::/16) cross a shared medium as an access point relays them: once
// up the sender's uplink, then once down each downlink of the hosts that
// share that uplink, whose every host but the sender gets a copy
// (broadcast.go). They go no further (the AP does not route them to the
// distant server).
//
// A Prioritiser may sit between a host's TUN and its uplink: a user-space
// task that serves two FIFO queues strictly by priority into the device
// queue (the LW-LBE paper's task-based baseline).
package emu

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netns"
)

// HostSpec describes one host attached to the emulator.
type HostSpec struct {
	Name         string
	NS           netns.NsHandle // namespace that gets the TUN
	TUN          string         // device name inside the namespace
	Addrs        []netip.Addr   // addresses routed to this host (IPv4)
	Up, Down     *Link          // from NewUplink / NewDownlink; may be shared
	BackPressure bool           // read the TUN only while Up has room
	Prio         *Prioritiser   // optional user-space priority task before Up
}

// Host is an attached host.
type Host struct {
	HostSpec
	tun     *TUN
	readErr atomic.Value
}

// Emulator routes packets between hosts through their links.
type Emulator struct {
	mu     sync.RWMutex
	hosts  []*Host
	byAddr map[netip.Addr]*Host
	links  []*Link

	// OnUp, if set, sees every packet leaving an uplink (after its delay),
	// from the link's goroutine. Used to measure per-flow throughput.
	OnUp func(data []byte)
	// OnDown, if set, sees every packet leaving a downlink, likewise.
	OnDown func(data []byte)

	// RealTime, if > 0, is the SCHED_FIFO priority of the link and TUN
	// reader threads (realtime.go); RealTimeErr holds the first failure to
	// set it (the emulator then runs at normal priority).
	RealTime    int
	realTimeErr atomic.Value

	NoRoute   atomic.Uint64 // packets to an address no host has
	Broadcast atomic.Uint64 // broadcasts relayed from an uplink to a downlink
	wg        sync.WaitGroup
}

// New returns an empty emulator.
func New() *Emulator { return &Emulator{byAddr: map[netip.Addr]*Host{}} }

// NewUplink makes a link whose output is routed to the destination host's
// downlink.
func (e *Emulator) NewUplink(cfg LinkConfig) *Link {
	var l *Link
	l = NewLink(cfg, func(b []byte, meta any) {
		if e.OnUp != nil {
			e.OnUp(b)
		}
		if isLinkBroadcast(b) {
			e.relayBroadcast(l, b, meta)
			return
		}
		if h := e.lookup(b); h != nil {
			h.Down.Enqueue(b, nil)
		} else {
			e.NoRoute.Add(1)
		}
	})
	e.links = append(e.links, l)
	return l
}

// NewDownlink makes a link whose output is written to the destination
// host's TUN.
func (e *Emulator) NewDownlink(cfg LinkConfig) *Link {
	var l *Link
	l = NewLink(cfg, func(b []byte, meta any) {
		if e.OnDown != nil {
			e.OnDown(b)
		}
		if isLinkBroadcast(b) {
			e.deliverBroadcast(l, b, meta)
			return
		}
		if h := e.lookup(b); h != nil {
			_, _ = h.tun.Write(b)
		} else {
			e.NoRoute.Add(1)
		}
	})
	e.links = append(e.links, l)
	return l
}

// AddHost opens the host's TUN in its namespace and registers its addresses.
func (e *Emulator) AddHost(spec HostSpec) (*Host, error) {
	if spec.Up == nil || spec.Down == nil {
		return nil, errors.New("host needs an uplink and a downlink")
	}
	t, err := OpenTUN(spec.NS, spec.TUN)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", spec.Name, err)
	}
	h := &Host{HostSpec: spec, tun: t}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range spec.Addrs {
		e.byAddr[a] = h
	}
	e.hosts = append(e.hosts, h)
	if spec.Prio != nil {
		spec.Prio.link = spec.Up
	}
	return h, nil
}

// AddAddr routes one more address to h.
func (e *Emulator) AddAddr(h *Host, a netip.Addr) error {
	if !a.Is4() {
		return fmt.Errorf("only IPv4 addresses are routed, not %s", a)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if o, ok := e.byAddr[a]; ok && o != h {
		return fmt.Errorf("address %s already belongs to %s", a, o.Name)
	}
	e.byAddr[a] = h
	h.Addrs = append(h.Addrs, a)
	return nil
}

func (e *Emulator) lookup(b []byte) *Host {
	if len(b) < 20 || b[0]>>4 != 4 {
		return nil
	}
	dst := netip.AddrFrom4([4]byte{b[16], b[17], b[18], b[19]})
	e.mu.RLock()
	h := e.byAddr[dst]
	e.mu.RUnlock()
	return h
}

// Run starts every link, prioritiser and TUN reader; it returns at once.
// Everything stops when ctx ends; Wait waits for that.
func (e *Emulator) Run(ctx context.Context) {
	seen := map[*Link]bool{}
	for _, l := range e.links {
		if !seen[l] {
			seen[l] = true
			e.wg.Add(1)
			go func(l *Link) { defer e.wg.Done(); e.realTime(); l.Run(ctx) }(l)
		}
	}
	for _, h := range e.hosts {
		if h.Prio != nil {
			e.wg.Add(1)
			go func(p *Prioritiser) { defer e.wg.Done(); p.run(ctx) }(h.Prio)
		}
		e.wg.Add(1)
		go func(h *Host) { defer e.wg.Done(); e.realTime(); h.read(ctx) }(h)
	}
	go func() {
		<-ctx.Done()
		for _, h := range e.hosts {
			h.tun.Close() // unblocks the readers
		}
	}()
}

// realTime gives the calling goroutine's thread real-time scheduling when
// RealTime is set.
func (e *Emulator) realTime() {
	if e.RealTime <= 0 {
		return
	}
	if err := realTimeThread(e.RealTime); err != nil {
		e.realTimeErr.CompareAndSwap(nil, err)
	}
}

// RealTimeErr is why real-time scheduling could not be set (nil: it was,
// or it was not asked for).
func (e *Emulator) RealTimeErr() error {
	if err, ok := e.realTimeErr.Load().(error); ok {
		return err
	}
	return nil
}

// Wait waits until everything started by Run has stopped.
func (e *Emulator) Wait() { e.wg.Wait() }

func (h *Host) read(ctx context.Context) {
	buf := make([]byte, 65536)
	for ctx.Err() == nil {
		if h.BackPressure && h.Prio == nil {
			if h.Up.WaitRoom(ctx) != nil {
				return
			}
		}
		n, err := h.tun.Read(buf)
		if err != nil {
			if ctx.Err() == nil {
				h.readErr.Store(err)
			}
			return
		}
		p := make([]byte, n)
		copy(p, buf[:n])
		switch {
		case h.Prio != nil:
			h.Prio.enqueue(p)
		case h.BackPressure:
			h.Up.EnqueueAdmitted(p, h)
		default:
			h.Up.Enqueue(p, h) // the sender, for a broadcast (broadcast.go)
		}
	}
}
