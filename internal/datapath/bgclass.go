// bgclass.go: the background lane's non-TCP traffic as a class per
// interface and direction (classifier bgclass.h). Every egress tree gets
// the class's two control entries in lanes_bg_ctl (no rate; the yield's
// rate where the yield is on) and the ingress policer (lanes_bg_ingress on
// a clsact ingress filter); the controller (internal/bgudp) sets the
// rates. The daemon writes only lanes_bg_ctl; the bucket and the counters
// (lanes_bg_state) are the classifier's alone, so a rate change never
// puts back what the classifier spent or counted meanwhile.
// A tree whose ingress filter cannot be attached keeps working: its
// downloads are not policed, and BgClass says why.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/yield"
)

// BackgroundClass is the host's background non-TCP class: its control
// values, policer rates, shapers (bgshape.go, bgifb.go) and flow table
// (bgflows.go), set by the controller (internal/bgudp).
type BackgroundClass struct {
	guard      *guard
	cls        *classifier.ClassifierObjects
	ops        *sockops.Objects // nil without lanes' own sock_ops (MarkBgActive)
	trees      egressFinder     // the interface's tree for its shapers (Trees)
	yield      yieldHolder      // the yield's hold (FgYield)
	on         bool             // HostConfig.Yield
	untoldHeld bool             // HostConfig.Experiments.UntoldHeld
	joined     bool             // HostConfig.Experiments.DirectionsJoined
	ctlMu      sync.Mutex       // lanes_bg_ctl's read-modify-writes
	events     *bgEvents        // the classifier's event reader (bgevents.go); nil: eventsErr
	eventsErr  error
}

// egressFinder finds the host's tree on an interface (Trees).
type egressFinder interface {
	of(ifindex int) (*Egress, error)
}

// yieldHolder says whether the yield holds an interface's background now
// (FgYield; the guard held, maps open).
type yieldHolder interface {
	fgYield(idx uint32, now uint64) bool
	fgYieldDir(idx uint32, now uint64, dir int) bool
}

// BgYieldBytes is the class's rate while the interface yields (bytes/s,
// 200 kbit/s): a QUIC connection stays alive, its bulk backs off; an
// unresponsive sender is held to it. For FgOpenHold after a foreground
// connection opens, the class's egress passes nothing (bgclass.h).
const BgYieldBytes = 25_000

// Direction of a background class.
type Direction uint32

const (
	Upload   Direction = 0 // leaving the device (egress)
	Download Direction = 1 // arriving (ingress)
)

func (d Direction) String() string {
	if d == Download {
		return "ingress"
	}
	return "egress"
}

// BgClass is one direction of an interface's background non-TCP class:
// the daemon's control value and the classifier's state (zero before the
// class's first packet).
type BgClass struct {
	classifier.ClassifierBgCtl
	classifier.ClassifierBgState
}

// BgEvent is the classifier's note that such traffic began (after 1 s
// without any) on an interface, in a direction, with a peer (struct
// bg_event of bgclass.h; IPv4 v4-mapped).
type BgEvent struct {
	Ifindex uint32
	Dir     Direction
	Peer    [16]byte
}

func bgKey(ifindex int, d Direction) uint32 { return uint32(ifindex)*2 + uint32(d) }

// openBgClass puts the tree's class control entries (dropping any state a
// former interface of the same index left) and attaches the ingress
// policer; a failure to attach is recorded in e.bgErr, not returned.
func (e *Egress) openBgClass() error {
	idx := e.link.Attrs().Index
	yr := uint64(0)
	if e.host.cfg.Yield {
		yr = BgYieldBytes
	}
	for _, d := range []Direction{Upload, Download} {
		ctl := classifier.ClassifierBgCtl{YieldRate: yr}
		err := e.host.guard.use(func() error {
			if err := e.host.cls.LanesBgCtl.Put(bgKey(idx, d), ctl); err != nil {
				return err
			}
			return ignoreNotExist(e.host.cls.LanesBgState.Delete(bgKey(idx, d)), "background class state")
		})
		if err != nil {
			return fmt.Errorf("background class of %s: %w", e.cfg.Interface, err)
		}
	}
	if err := dropHeldAckState(e.host, idx); err != nil {
		return fmt.Errorf("held-ACK event state of %s: %w", e.cfg.Interface, err)
	}
	e.bgErr = e.ns.do(func() error { return attachIngress(e.link, e.host.cls.LanesBgIngress.FD(), e.instance) })
	if e.bgErr != nil {
		slog.Warn("datapath: background downloads not policed on this interface", "interface", e.cfg.Interface, "err", e.bgErr)
	}
	return nil
}

// closeBgClass removes the ingress filter (and the clsact qdisc when it
// holds nothing else) and the class's entries (control first: the
// classifier creates state only for a class with control).
func (e *Egress) closeBgClass() error {
	if e.link == nil || e.host == nil {
		return nil
	}
	idx := e.link.Attrs().Index
	var errs []error
	for _, d := range []Direction{Upload, Download} {
		err := e.host.guard.use(func() error {
			return errors.Join(ignoreNotExist(e.host.cls.LanesBgCtl.Delete(bgKey(idx, d)), "background class"),
				ignoreNotExist(e.host.cls.LanesBgState.Delete(bgKey(idx, d)), "background class state"))
		})
		if !errors.Is(err, errClosed) {
			errs = append(errs, err)
		}
	}
	if err := dropHeldAckState(e.host, idx); !errors.Is(err, errClosed) {
		errs = append(errs, err)
	}
	errs = append(errs, e.ns.do(func() error { return ignoreGone(detachIngress(e.link, e.instance)) }))
	return errors.Join(errs...)
}

func clsact(idx int) *netlink.GenericQdisc {
	return &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx,
		Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
}

func ingressFilter(idx, fd int, instance string) *netlink.BpfFilter {
	return &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.HANDLE_MIN_INGRESS,
			Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL},
		Fd: fd, Name: filterName(instance), DirectAction: true,
	}
}

// attachIngress adds clsact where the device has none and the policer's
// filter on its ingress hook (replacing this instance's own, if any).
func attachIngress(link netlink.Link, fd int, instance string) error {
	idx := link.Attrs().Index
	if err := netlink.QdiscAdd(clsact(idx)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("clsact on %s: %w", link.Attrs().Name, err)
	}
	if err := netlink.FilterReplace(ingressFilter(idx, fd, instance)); err != nil {
		return fmt.Errorf("ingress filter on %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// detachIngress removes this instance's ingress filter, and clsact when no
// filter is left on it.
func detachIngress(link netlink.Link, instance string) error {
	idx := link.Attrs().Index
	fs, err := netlink.FilterList(link, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		return err
	}
	left := 0
	for _, f := range fs {
		if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == filterName(instance) {
			if err := netlink.FilterDel(f); err != nil && !isNotFound(err) {
				return err
			}
			continue
		}
		left++
	}
	if eg, err := netlink.FilterList(link, netlink.HANDLE_MIN_EGRESS); err == nil {
		left += len(eg)
	}
	if left == 0 {
		if err := netlink.QdiscDel(clsact(idx)); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
			return err
		}
	}
	return nil
}

// SetBgRate sets the background non-TCP class's rate on an interface in
// one direction (bytes/s; 0: not policed, the yield still applies). With
// empty the bucket's tokens go too: the class passes no more than the new
// rate from its next packet on. A bucket left full (25 ms of the old
// rate, bgclass.h) passes a sender a little above a lowered rate for its
// depth ÷ the excess: 200 ms after a cut of an eighth. Only the control
// value is written (emptying is a bump of its empty_gen, which the
// classifier acts on once); the daemon is its only writer, and ctlMu
// keeps its read-modify-writes whole.
func (b *BackgroundClass) SetBgRate(ifindex int, d Direction, bytes uint64, empty bool) error {
	return b.updateCtl(ifindex, d, func(ctl *classifier.ClassifierBgCtl) bool {
		ctl.Rate = bytes
		if empty && bytes != 0 {
			ctl.EmptyGen++
		}
		return true
	})
}

// SetBgYieldRate sets the rate the yield holds the class at in one
// direction (bytes/s, at least 1; BgYieldBytes by default), so that the
// hold takes no more than a small share of a slow link; where the yield
// is off (a zero yield rate) it is left off.
func (b *BackgroundClass) SetBgYieldRate(ifindex int, d Direction, bytes uint64) error {
	return b.updateCtl(ifindex, d, func(ctl *classifier.ClassifierBgCtl) bool {
		if ctl.YieldRate == 0 || ctl.YieldRate == max(bytes, 1) {
			return false
		}
		ctl.YieldRate = max(bytes, 1)
		return true
	})
}

// SetBgAcks says whether direction d of the class carries only the
// acknowledgments of its data in the other direction: the yield then does
// not hold it (bgclass.h), as a background TCP download's ACKs are not held
// for the upload's harm.
func (b *BackgroundClass) SetBgAcks(ifindex int, d Direction, acks bool) error {
	return b.setCtl(ifindex, d, func(c *classifier.ClassifierBgCtl) *uint64 { return &c.Acks }, ctlBool(acks))
}

// setCtl sets one field of the class's control value in direction d to v,
// written only on a change.
func (b *BackgroundClass) setCtl(ifindex int, d Direction, field func(*classifier.ClassifierBgCtl) *uint64, v uint64) error {
	return b.updateCtl(ifindex, d, func(ctl *classifier.ClassifierBgCtl) bool {
		if f := field(ctl); *f != v {
			*f = v
			return true
		}
		return false
	})
}

// ctlBool is a control value's boolean field: 1 or 0.
func ctlBool(on bool) uint64 {
	if on {
		return 1
	}
	return 0
}

// updateCtl reads the class's control value in direction d, lets change
// modify it and writes it back where change says so; ctlMu keeps the
// read-modify-write whole.
func (b *BackgroundClass) updateCtl(ifindex int, d Direction, change func(*classifier.ClassifierBgCtl) bool) error {
	b.ctlMu.Lock()
	defer b.ctlMu.Unlock()
	return b.guard.use(func() error {
		var ctl classifier.ClassifierBgCtl
		if err := b.cls.LanesBgCtl.Lookup(bgKey(ifindex, d), &ctl); err != nil {
			return fmt.Errorf("background class of ifindex %d: %w", ifindex, err)
		}
		if !change(&ctl) {
			return nil
		}
		return b.cls.LanesBgCtl.Put(bgKey(ifindex, d), ctl)
	})
}

// BgClass reads an interface's class in one direction: its control value
// and the classifier's state (zero before the class's first packet).
func (b *BackgroundClass) BgClass(ifindex int, d Direction) (BgClass, error) {
	var c BgClass
	err := b.guard.use(func() error {
		if err := b.cls.LanesBgCtl.Lookup(bgKey(ifindex, d), &c.ClassifierBgCtl); err != nil {
			return err
		}
		if err := b.cls.LanesBgState.Lookup(bgKey(ifindex, d), &c.ClassifierBgState); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		return nil
	})
	return c, err
}

// BgIngressError says why the interface's downloads are not policed (nil:
// they are).
func (e *Egress) BgIngressError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bgErr
}

// Ifindex is the interface's index.
func (e *Egress) Ifindex() int { return e.link.Attrs().Index }

// Foreground says whether the interface's foreground is present (the
// classifier's stamp, lanes_fg_active, younger than its hold: the
// background keeps yield.ShareTarget of queue there) and whether it is
// quiet to the class's direction d (yield.Window.Quiet: between its
// bursts).
func (b *BackgroundClass) Foreground(ifindex int, d Direction) (present, quiet bool) {
	if !b.on {
		return false, false
	}
	_ = b.guard.use(func() error {
		var w yield.Window
		if b.cls.LanesFgActive.Lookup(uint32(ifindex), &w) == nil {
			now := monotonicNS()
			present, quiet = w.Held(now, yield.KernelRule), w.Quiet(now, yieldDir(d))
		}
		return nil
	})
	return present, quiet
}

// BgClassHeld says whether the yield holds the interface's background
// non-TCP class in direction d now (the classifier's rule: fg_yield_dir
// of lanes_maps.h, the sockets' rule; both ways with the lab's
// DirectionsJoined).
func (b *BackgroundClass) BgClassHeld(ifindex int, d Direction) bool {
	if !b.on {
		return false
	}
	var on bool
	_ = b.guard.use(func() error {
		if b.joined {
			on = b.yield.fgYield(uint32(ifindex), monotonicNS())
		} else {
			on = b.yield.fgYieldDir(uint32(ifindex), monotonicNS(), yieldDir(d))
		}
		return nil
	})
	return on
}

// yieldDir is a class direction's yield.Up or yield.Down.
func yieldDir(d Direction) int {
	if d == Download {
		return yield.Down
	}
	return yield.Up
}

// DirectionQueue is direction d's queue on ifindex as the last foreground
// TCP socket with timestamps read it within fresh (lanes_fg_harm's
// dir_qd_*, sock_ops' fg_dir_queue); false: none read then, or the lab's
// DirectionsJoined (no direction is read apart).
func (b *BackgroundClass) DirectionQueue(ifindex int, d Direction, fresh time.Duration) (time.Duration, bool) {
	if !b.on || b.joined {
		return 0, false
	}
	var q time.Duration
	var ok bool
	_ = b.guard.use(func() error {
		var hm yield.Harm
		if b.cls.LanesFgHarm.Lookup(uint32(ifindex), &hm) == nil {
			q, ok = hm.DirQueue(monotonicNS(), yieldDir(d), fresh)
		}
		return nil
	})
	return q, ok
}

// MarkOwnHarm stamps the interface's foreground harmed (lanes_fg_harm, kind
// yield.HarmOwn; that interface's key only, not key 0: one class's delay
// may be its own path's, and holds no other interface) at its own queuing
// delay queue; the classifier holds the class, background TCP sockets skip
// it (yield.h's class_own: each reads its own delay, bg_own_delay). Only
// beside a foreground no TCP sample speaks for (present, untold) and
// above yield.HarmQueue; the classifier then holds the class at the
// yield's rate for yield.HarmHold. The read and write race sock_ops'
// stamps of the same entry: one of two stamps in the same instant is lost.
func (b *BackgroundClass) MarkOwnHarm(ifindex int, queue time.Duration) {
	if !b.on || b.untoldHeld || queue <= yield.HarmQueue {
		return
	}
	_ = b.guard.use(func() error {
		now, idx := monotonicNS(), uint32(ifindex)
		var st yield.State
		_ = b.cls.LanesFgActive.Lookup(idx, &st.Window)
		_ = b.cls.LanesFgHarm.Lookup(idx, &st.Harm)
		if !st.Untold(now) {
			return nil
		}
		hm := st.Harm
		if !hm.Harmed(now) {
			hm.Since, hm.Kind = now, yield.HarmOwn
		} // a foreground socket's harm stays its kind: it holds background sockets too
		hm.At, hm.Samples, hm.QueueUS = now, hm.Samples+1, uint32(queue/time.Microsecond)
		hm.DirUntil = [2]uint64{now + uint64(yield.HarmHold), now + uint64(yield.HarmHold)} // both ways
		return b.cls.LanesFgHarm.Put(idx, hm)
	})
}

// MarkBgActive stamps the host's background transfer active (sock_ops'
// lanes_rl_active, which rLEDBAT stamps at a TCP background download's
// timed data) for the background non-TCP class's packets: foreground TCP
// sockets then read their receive side (fgrcv.h), so a foreground
// download's harm is told (the class's arrivals may share beside an
// unharmed one instead of being held as untold) and its direction's
// queue read (DirectionQueue: the class's upload takes it off its probes').
func (b *BackgroundClass) MarkBgActive() {
	_ = b.guard.use(func() error {
		if b.ops == nil {
			return errNoSockops
		}
		return b.ops.LanesRlActive.Put(uint32(0), monotonicNS())
	})
}
