// controller.go: the cooperative controller that runs inside the daemon.
//
// Every interval it samples this host's uplink flows (FlowSource), broadcasts
// an announcement (Transport), and recomputes the caps of its own flows from
// its peers' announcements; caps reach sockets through the setters the
// daemon passes in (the datapath's sock_ops map, applied with
// TCP_BPF_SNDCWND_CLAMP). The two directions, uploads and downloads, are
// one type built twice (direction.go). A receive
// loop authenticates and replay-checks incoming announcements; a peer joining,
// leaving or starting/stopping to send triggers an immediate recomputation,
// so caps follow within one interval of the event (a silent crash is noticed
// after SilenceIntervals). Local flows are also sampled five times per
// interval: a flow that starts sending is announced at once, so the group
// caps a newcomer before its slow start overshoots.
//
// Caps of a flow = min(cooperative cap, matching rule caps). The cooperative
// cap is off while the rate is unknown or the safety fallback holds; rule
// caps (per application / lane policy, docs/papers.md §002) always apply.
//
// Note: only active flows (data waiting or acknowledged since the last
// sample) count as senders and get a new cooperative cap; an idle flow keeps
// the cap it had, so a flow pausing for a moment does not flap.
//
// This file holds the Controller, its construction and its loops (receive,
// tick); the rest by concept: options.go (its inputs), flows.go (this
// host's flows sampled), group.go (this host's announcement and the
// group's goodput), round.go (one recomputation of the caps), rulecaps.go
// (the policy's cap rules), status.go (Status), spacing.go (the interval
// announced: the spacing kept). Its owners, each a field wired by New:
// peergroup.go (the peers), announcer.go (announcements out), apply.go
// (caps to sockets), persist.go's replayKeeper (the replay state file).
package coop

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// Controller is the cooperative controller. Create with New, then Run.
type Controller struct {
	cfg     config.Coop
	key     []byte
	hostID  uint64
	flowsrc FlowSource
	iface   IfaceCounter
	log     *slog.Logger
	now     func() time.Time
	changed chan struct{}

	mu         sync.Mutex
	ann        announcer // announcements out (announcer.go)
	cnt        Counters
	flows      map[uint64]*flowState
	lastSample time.Time    // last tick's sample
	up         direction    // the uploads: cwnd caps
	down       direction    // the downloads: receive-window caps (downlink.go)
	lanes      laneDefaults // the lanes' caps for new connections
	peers      peerGroup    // the peers, who counts in N (peergroup.go)
	replay     replayKeeper // the replay state file (persist.go)
	ack        ackState     // the downloads' ACK class (ackclass.go)
	st         Status
	applier    capApplier // caps to sockets (apply.go)
}

// New builds a controller; it opens the UDP transport unless one is given.
func New(o Options) (*Controller, error) {
	if err := o.Config.Validate(); err != nil {
		return nil, fmt.Errorf("coop config: %w", err)
	}
	if o.Flows == nil {
		return nil, errors.New("coop: no flow source")
	}
	key, err := o.Config.LoadKey()
	if err != nil {
		return nil, err
	}
	c := &Controller{cfg: o.Config, key: key, hostID: o.HostID, flowsrc: o.Flows, iface: o.Iface,
		log: o.Logger, now: o.Now, changed: make(chan struct{}, 1),
		flows: map[uint64]*flowState{}, lanes: laneDefaults{set: o.Up, applied: map[lane.Lane]uint32{}},
		ack: ackState{set: o.Ack}}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.hostID == 0 {
		c.hostID = DeriveHostID(o.Config.Interface)
	}
	c.ann = announcer{tr: o.Transport, key: key, hostID: c.hostID, base: o.Config.Interval.D(),
		seq: uint64(c.now().UnixNano())}
	if c.ann.tr == nil {
		t, err := openUDP(o.Config, c.log)
		if err != nil {
			return nil, err
		}
		c.ann.tr, c.ann.reopen = t, t
	}
	c.peers = newPeerGroup(o.Config, key == nil)
	rs, err := loadReplay(o.Config.StateFile, c.now(), o.Config.MaxClockSkew.D())
	if err != nil {
		c.log.Warn("coop: replay state unreadable, starting as after a crash", "err", err)
	}
	c.peers.table.restored = rs
	c.replay.file = o.Config.StateFile
	if err := c.replay.save(c.peers.table, c.now(), false); err != nil { // a crash from here on is unclean
		c.log.Warn("coop: cannot write replay state", "file", o.Config.StateFile, "err", err)
	}
	c.up, c.down = newDirections(o)
	c.applier = capApplier{mu: &c.mu, up: &c.up, down: &c.down, lanes: &c.lanes, flows: c.flows, cnt: &c.cnt, st: &c.st}
	// the downlink's callback on before the daemon answers its API: a
	// download that connects before it is on never asks for the callback
	// (sockets ask at establishment, and a pure receiver gets no later RTT
	// callback to ask at), so its cap would never act
	// (TestCoopThreeDaemonsDownlink failed so once in 50 runs, the
	// component's first tick late on a loaded machine)
	if err := c.down.switchEarly(o.Config.Cooperative); err != nil {
		c.log.Warn("coop: downlink caps cannot be applied", "err", err)
	}
	c.st = Status{Enabled: true, HostID: fmt.Sprintf("%016x", c.hostID), Authenticated: key != nil, Trust: "authenticated"}
	if key == nil {
		c.st.Trust = "unauthenticated"
		c.st.Warning = fmt.Sprintf("no group key configured: peer announcements are UNAUTHENTICATED; "+
			"limited mode: one host id per address, at most %d peers count in N, admitted one per %v",
			o.Config.KeylessMaxPeers, o.Config.KeylessGrowth)
		c.log.Warn("coop: " + c.st.Warning)
	}
	return c, nil
}

// HostID is this host's id in announcements.
func (c *Controller) HostID() uint64 { return c.hostID }

// Run announces, listens and caps until ctx ends; then it says goodbye and
// removes every cap it set.
func (c *Controller) Run(ctx context.Context) error {
	rxDone := make(chan struct{})
	go func() { defer close(rxDone); c.recvLoop(ctx) }()
	iv := c.cfg.Interval.D()
	tick := time.NewTicker(iv)
	defer tick.Stop()
	exp := time.NewTicker(iv / 5)
	defer exp.Stop()
	c.tick(ctx)
	for {
		select {
		case <-ctx.Done():
			err := c.shutdown()
			<-rxDone
			return err
		case <-tick.C:
			c.tick(ctx)
			c.stepAck()
		case <-exp.C:
			// between announcements: expire silent peers, and announce at
			// once when a local flow starts sending (a join is not left
			// waiting for the next interval)
			joined := c.sampleFlows(ctx)
			if joined {
				c.announce()
			}
			c.mu.Lock()
			gone := c.peers.expire(c.now())
			raising := capsRaising(c.flows)
			c.mu.Unlock()
			if len(gone) > 0 {
				c.log.Info("coop: peers silent, removed", "n", len(gone))
			}
			if joined || len(gone) > 0 || raising {
				c.recomputeAndApply()
			}
			c.stepAck()
		case <-c.changed:
			c.recomputeAndApply()
		}
	}
}

// Close releases the transport (Run calls it on exit).
func (c *Controller) Close() error {
	return c.ann.close()
}

func (c *Controller) shutdown() error {
	c.mu.Lock()
	a := c.ann.goodbye(c.now())
	c.mu.Unlock()
	_ = c.ann.send(&a)
	var errs []error
	c.mu.Lock()
	errs = append(errs, c.up.shutdown()...)
	errs = append(errs, c.lanes.shutdown()...)
	errs = append(errs, c.ack.shutdown())
	errs = append(errs, c.down.shutdown()...)
	errs = append(errs, c.replay.save(c.peers.table, c.now(), true))
	c.mu.Unlock()
	errs = append(errs, c.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("coop shutdown: %w", err)
	}
	return nil
}

func (c *Controller) recvLoop(ctx context.Context) {
	buf := make([]byte, 2*MaxSize)
	for {
		n, from, err := c.ann.tr.Recv(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			c.log.Debug("coop: receive", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c.Handle(buf[:n], from)
	}
}

// Handle processes one received datagram (exported for tests and tools).
// It returns nil when the announcement was accepted.
func (c *Controller) Handle(b []byte, from netip.Addr) error {
	a, err := Decode(b, c.key)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cnt.Received++
	if err == nil && a.HostID == c.hostID {
		c.cnt.Own++
		return ErrOwn
	}
	var ch Change
	if err == nil {
		ch, err = c.peers.table.Accept(a, from, c.now())
	}
	c.cnt.count(err)
	if err != nil {
		return err
	}
	c.replay.dirty = true
	if ch == Joined { // a new peer's sequence is on disk before it matters
		c.replay.saveNoting(c.peers.table, c.now(), true, &c.st)
	}
	if ch != Updated {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	return nil
}

// count counts one received announcement's outcome (nil: accepted).
func (n *Counters) count(err error) {
	switch {
	case err == nil:
		n.Accepted++
	case errors.Is(err, ErrOversized):
		n.Oversized++
	case errors.Is(err, ErrVersion):
		n.BadVersion++
	case errors.Is(err, ErrUnauthenticated):
		n.Unauthenticated++
	case errors.Is(err, ErrForged):
		n.Forged++
	case errors.Is(err, ErrReplayed):
		n.Replayed++
	case errors.Is(err, ErrStale):
		n.Stale++
	case errors.Is(err, ErrTableFull):
		n.TableFull++
	case errors.Is(err, ErrPeerRate):
		n.PeerRate++
	case errors.Is(err, ErrAddrConflict):
		n.AddrConflict++
	case errors.Is(err, ErrDuplicate):
		n.Duplicates++
	case errors.Is(err, ErrNotPeer):
		n.NotPeer++
	case errors.Is(err, ErrLate):
		n.Late++
	case errors.Is(err, ErrSeqJump):
		n.SeqJumps++
	default:
		n.Malformed++
	}
}

// tick closes an interval: it samples local flows and the interface,
// announces them, judges the interval and recomputes caps.
func (c *Controller) tick(ctx context.Context) {
	c.sampleInterval(ctx)
	c.announce()
	c.judgeAndApply()
	c.mu.Lock()
	c.replay.saveNoting(c.peers.table, c.now(), false, &c.st)
	c.mu.Unlock()
}

// openUDP opens the UDP transport on the configured interface, with its
// unicast peers.
func openUDP(cfg config.Coop, log *slog.Logger) (*UDPTransport, error) {
	if cfg.Interface == "" {
		return nil, errors.New("coop: no interface to announce on")
	}
	t, err := ListenUDPOn(cfg.Interface, cfg.Port, cfg.Transport)
	if err != nil {
		return nil, err
	}
	if t.Warning != "" {
		log.Warn("coop: one transport could not be opened, using the other", "err", t.Warning)
	}
	var uni []netip.Addr
	for _, a := range cfg.UnicastPeers {
		uni = append(uni, netip.MustParseAddr(a)) // validated
	}
	t.SetUnicast(uni)
	return t, nil
}

// DeriveHostID derives a stable host id from the machine id, the hostname
// and the interface's name, hardware address and IP addresses (distinct per
// namespace interface in the lab), or a random one if none is readable.
// Call it in the interface's network namespace.
func DeriveHostID(ifname string) uint64 {
	h := sha256.New()
	n := 0
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		h.Write(b)
		n++
	}
	if hn, err := os.Hostname(); err == nil {
		h.Write([]byte(hn))
	}
	h.Write([]byte(ifname))
	if ifi, err := net.InterfaceByName(ifname); err == nil {
		if len(ifi.HardwareAddr) > 0 {
			h.Write(ifi.HardwareAddr)
			n++
		}
		if addrs, err := ifi.Addrs(); err == nil { // TUN devices have no MAC
			for _, a := range addrs {
				h.Write([]byte(a.String()))
				n++
			}
		}
	}
	if n == 0 {
		var r [8]byte
		_, _ = rand.Read(r[:])
		h.Write(r[:])
	}
	id := binary.BigEndian.Uint64(h.Sum(nil))
	if id == 0 {
		id = 1
	}
	return id
}
