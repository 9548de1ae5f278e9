// bgshape.go: the background non-TCP class's shaper (1:15) of every egress
// tree. Where the controller (internal/bgudp) shapes the class's egress,
// the classifier sends its packets there instead of the background lane's
// class (lanes_bg_ctl's shaped, bgclass.h) and the class's ceil is the
// controller's rate: what the sender offers above it waits in the class's
// bfifo (100 ms of the rate, BgShapeQueueLimit; a socket whose send
// buffer is smaller blocks first), so a loss-based sender (quic-go's CUBIC) meets no drop at each
// lowering of the rate, only at that queue's limit, and keeps the
// bottleneck busy through its own window cuts from that local queue, not
// from the bottleneck's (docs/background.md, "Background QUIC and UDP").
//
// The class borrows as the background lane does (rate r, prio 7, ceil
// the controller's rate or R), so it never goes before a foreground lane.
// A tree where it cannot be made keeps working; SetBgShape then says why
// and the controller polices the class instead.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lane"
)

const (
	// bgShapeQueueTime is the shaper's queue limit as time at its rate:
	// a CUBIC window cut by 0.3 at the limit still covers the path's
	// bandwidth-delay product while the queue it cut from is at least
	// 0.43 of it (17 ms of the rate at a 40 ms round trip; 100 ms
	// covers round trips up to 230 ms). In time, not bytes: 64 KiB at
	// the floor's 200 kbit/s held a sender's packets 2.6 s, and its
	// round trip with them.
	bgShapeQueueTime = 100 // ms
	// bgShapeQueueMin and bgShapeQueueMax bound that limit, bytes: at
	// least 16 full frames (a paced QUIC sender's burst, one GSO batch
	// of them), at most 64 KiB.
	bgShapeQueueMin = 16 * wireMTU
	bgShapeQueueMax = 64 << 10
	// bgShapeLeafHandle is the shaper's leaf qdisc, 15:.
	bgShapeLeafHandle = (lane.BgShapeClassID & 0xffff) << 16
)

// BgShapeQueueLimit is the shaper's bfifo limit at rate (bytes/s; 0: not
// shaped, the largest).
func BgShapeQueueLimit(rate uint64) uint32 {
	if rate == 0 {
		return bgShapeQueueMax
	}
	return clampU32(rate*bgShapeQueueTime/1000, bgShapeQueueMin, bgShapeQueueMax)
}

// replaceBgShapeClass creates (or changes) the shaper of the tree on link
// ifindex and its bfifo: rate r, ceil bytes (0: R), prio of the
// background lane.
func replaceBgShapeClass(ifindex int, p treeParams, bytes uint64) error {
	ceil := p.rootBytes
	if bytes > 0 {
		ceil = min(bytes, p.rootBytes)
	}
	c := htbClass(ifindex, lane.BgShapeClassID, rootClass, tokenRate, ceil, lane.Background.HTBPrio())
	if err := netlink.ClassReplace(c); err != nil {
		return fmt.Errorf("htb class %s: %w", netlink.HandleStr(lane.BgShapeClassID), err)
	}
	return nil
}

// buildBgShape (re)builds the tree's shaper, unrestricted; a failure is
// recorded (bgShapeErr), not returned. Called with the tree built.
func (e *Egress) buildBgShape() {
	e.bgShapeBytes = 0
	idx := e.link.Attrs().Index
	e.bgShapeErr = e.ns.do(func() error {
		if err := replaceBgShapeClass(idx, paramsFor(e.cfg), 0); err != nil {
			return err
		}
		return replaceBfifo(idx, bgShapeLeafHandle, lane.BgShapeClassID, BgShapeQueueLimit(0))
	})
	if e.bgShapeErr != nil {
		slog.Warn("datapath: no background non-TCP shaper on this interface (the class is policed)",
			"interface", e.cfg.Interface, "err", e.bgShapeErr)
	}
}

// setBgShapeRate changes the shaper's ceil (bytes/s, 0: R).
func (e *Egress) setBgShapeRate(bytes uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	if e.bgShapeErr != nil {
		return fmt.Errorf("%s: %w", e.cfg.Interface, e.bgShapeErr)
	}
	if bytes == e.bgShapeBytes {
		return nil
	}
	idx := e.link.Attrs().Index
	err := e.ns.do(func() error {
		if err := replaceBgShapeClass(idx, paramsFor(e.cfg), bytes); err != nil {
			return err
		}
		if BgShapeQueueLimit(bytes) == BgShapeQueueLimit(e.bgShapeBytes) {
			return nil
		}
		return replaceBfifo(idx, bgShapeLeafHandle, lane.BgShapeClassID, BgShapeQueueLimit(bytes))
	})
	if err != nil {
		return fmt.Errorf("%s: %w", e.cfg.Interface, err)
	}
	e.bgShapeBytes = bytes
	return nil
}

// bgShapeStats reads the shaper's counters.
func (e *Egress) bgShapeStats() (LaneStats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return LaneStats{}, errClosed
	}
	if e.bgShapeErr != nil {
		return LaneStats{}, e.bgShapeErr
	}
	ls := LaneStats{Lane: lane.Background, ClassID: netlink.HandleStr(lane.BgShapeClassID)}
	return ls, e.ns.do(func() error {
		c, err := classStatsOf(e.link, lane.BgShapeClassID)
		ls.add(c)
		return err
	})
}

// classStatsOf is the counters of class handle on link (nil: no such class).
func classStatsOf(link netlink.Link, handle uint32) (*netlink.ClassStatistics, error) {
	hs, err := classStats(link)
	if err != nil {
		return nil, err
	}
	return hs[handle], nil
}

// SetBgShape shapes the background non-TCP class on an interface in one
// direction at bytes/s, or stops shaping it (0). Upload: the shaper's
// ceil, the classifier's shaped on (0: the class leaves by the background
// lane's class again, the shaper unrestricted). Download: the IFB's class
// (bgifb.go), the arrivals redirected to it (0: they pass where they
// came). It fails where the interface has no tree, or its tree no shaper
// (no IFB for downloads); the class's policer (SetBgRate) is left as it is.
func (b *BackgroundClass) SetBgShape(ifindex int, d Direction, bytes uint64) error {
	e, err := b.trees.of(ifindex)
	if err != nil {
		return err
	}
	if d == Download {
		return b.setBgArrivalShape(e, ifindex, bytes)
	}
	if bytes == 0 { // off first: no packet enters a class being opened
		return errors.Join(b.putBgShaped(ifindex, false), e.setBgShapeRate(0))
	}
	if err := e.setBgShapeRate(bytes); err != nil {
		return err
	}
	return b.putBgShaped(ifindex, true)
}

// BgShapeStats reads the counters of an interface's shaper in one
// direction (Bytes: what it sent; downloads: the IFB's class).
func (b *BackgroundClass) BgShapeStats(ifindex int, d Direction) (LaneStats, error) {
	e, err := b.trees.of(ifindex)
	if err != nil {
		return LaneStats{}, err
	}
	if d == Download {
		return e.bgIfbStats()
	}
	return e.bgShapeStats()
}

// LinkBytes is the bytes an interface has sent and received, every
// lane's (its kernel counters, tx_bytes and rx_bytes): what left the
// device toward the bottleneck the background's upload shares, and what
// came from the one its download shares.
func (b *BackgroundClass) LinkBytes(ifindex int) (sent, received uint64, err error) {
	l, err := netlink.LinkByIndex(ifindex)
	if err != nil {
		return 0, 0, err
	}
	if st := l.Attrs().Statistics; st != nil {
		return st.TxBytes, st.RxBytes, nil
	}
	return 0, 0, fmt.Errorf("interface %d: no counters", ifindex)
}

// RaiseUploadRate takes the QUIC/UDP class's measured upload link (bytes/s)
// into the account's upload capacity of the interface (sock_ops'
// lanes_link_rate), as a TCP socket's delivery rate is taken: it raises
// the estimate when at or above its decayed value. Beside QUIC background
// alone no TCP socket measures the link, and the account had none. A
// no-op without lanes' own sock_ops.
func (b *BackgroundClass) RaiseUploadRate(ifindex int, bytes uint64) error {
	if b.ops == nil || bytes == 0 {
		return nil
	}
	return b.guard.use(func() error {
		k, now := uint32(ifindex), monotonicNS()
		var lr sockops.SockopsLinkRate
		if err := b.ops.LanesLinkRate.Lookup(k, &lr); err == nil && bytes < linkRateAt(lr, now) {
			return nil
		}
		return b.ops.LanesLinkRate.Put(k, sockops.SockopsLinkRate{Bps: bytes, At: now})
	})
}

// putBgShaped sets the egress control value's shaped flag.
func (b *BackgroundClass) putBgShaped(ifindex int, on bool) error {
	return b.setCtl(ifindex, Upload, func(c *classifier.ClassifierBgCtl) *uint64 { return &c.Shaped }, ctlBool(on))
}
