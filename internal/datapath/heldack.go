// heldack.go: the held-ACK class (1:16) of every egress tree. While the
// yield holds a background download, or beside a foreground its window is
// at its floor (lanes_rl_floor), the classifier sends its pure ACKs
// there instead of the background lane's class (classifier.c's held_ack),
// so its remote sender gets no more data than the class lets ACKs leave:
// a held receive window cannot go below about two packets a round trip
// (the kernel clamps it at half SOCK_MIN_RCVBUF), which is most of a slow
// link. At HeldAckBytes of the download estimate the sender gets about
// 1/16 of it (docs/background.md, "Floors on a slow link").
//
// The class is built with every tree, unrestricted (rate r, ceil R, the
// background lane's prio) until a rate is set; a tree where it cannot be
// made keeps working without it (the classifier's class then is no class,
// and HTB puts those ACKs in its default class).
package datapath

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/lane"
)

const (
	// heldAckDiv: a held download gets 1/heldAckDiv of the download
	// estimate (cwndcap.h's HOLD_RATE_DIV for a held upload's pace).
	heldAckDiv = 16
	// ackWire is one pure ACK as HTB counts it (skb->len): 52 bytes of
	// IPv4 and TCP with timestamps, 14 of Ethernet.
	ackWire = 66
	// dataPerAck is the data one ACK releases at a held window of two
	// segments, acknowledged together (delayed ACKs).
	dataPerAck = 2 * 1448
	// heldAckLeafHandle is the held-ACK class's leaf qdisc, 16:.
	heldAckLeafHandle = (lane.HeldAckClassID & 0xffff) << 16
	// heldAckTick: the pacer reads the interface's arrivals this often.
	heldAckTick = 500 * time.Millisecond
	// heldAckQuiet: the pacer ends, the class unrestricted again, this
	// long after the classifier's last event (one a second while held
	// ACKs come; at 0.2 Mbit/s one leaves each 1.9 s).
	heldAckQuiet = 5 * time.Second
)

// HeldAckEvent is the classifier's event kind (its dir field) for a held
// download's pure ACKs (bgclass.h's BG_EVENT_HELD_ACKS).
const HeldAckEvent = 2

// heldAckStateKey is lanes_bg_state's key of an interface's held-ACK
// event rate limit (bgclass.h's BG_HELD_ACK_KEY | ifindex).
const heldAckStateKey = 0x80000000

// dropHeldAckState deletes the classifier's held-ACK event state of
// ifindex (a former interface of the same index, a closed tree).
func dropHeldAckState(h *Host, ifindex int) error {
	return h.guard.use(func() error {
		return ignoreNotExist(h.cls.LanesBgState.Delete(uint32(heldAckStateKey|ifindex)), "held-ACK event state")
	})
}

// HeldAckBytes is the held-ACK class's rate, bytes/s, for a download
// estimate of downBps (bit/s): the ACKs of 1/heldAckDiv of it; at least 1.
func HeldAckBytes(downBps uint64) uint64 {
	return max(downBps/8/heldAckDiv*ackWire/dataPerAck, 1)
}

// replaceHeldAckClass creates (or changes) the held-ACK class of the tree
// on link ifindex and its bfifo: rate = ceil = bytes with a burst of two
// ACKs, or, with bytes 0, a class like the background lane's.
func replaceHeldAckClass(ifindex int, p treeParams, bytes uint64) error {
	c := htbClass(ifindex, lane.HeldAckClassID, rootClass, tokenRate, p.rootBytes, lane.Background.HTBPrio())
	if bytes > 0 {
		r := min(bytes, p.rootBytes)
		c.Rate, c.Ceil = r, r
		c.Buffer = netlink.Xmittime(r, ackBurst)
		c.Cbuffer = c.Buffer
	}
	if err := netlink.ClassReplace(c); err != nil {
		return fmt.Errorf("htb class %s: %w", netlink.HandleStr(lane.HeldAckClassID), err)
	}
	if err := replaceBfifo(ifindex, heldAckLeafHandle, lane.HeldAckClassID, ackQueueBytes); err != nil {
		return fmt.Errorf("leaf qdisc of %s: %w", netlink.HandleStr(lane.HeldAckClassID), err)
	}
	return nil
}

// heldAckClass is one tree's held-ACK class and its pacer; it takes its
// tree's lock (e.mu) and stops with it (e.closed).
type heldAckClass struct {
	e     *Egress
	bytes uint64 // its rate, bytes/s (0: unrestricted)
	err   error  // why the tree has none (nil: it has)
	// its pacer (BackgroundClass.heldAcks): running, and the classifier's
	// last event
	pacing bool
	seen   time.Time
}

// build (re)builds the class at its rate; a failure is recorded (err),
// not returned. Called with the tree built.
func (h *heldAckClass) build() {
	e := h.e
	idx := e.link.Attrs().Index
	h.err = e.ns.do(func() error { return replaceHeldAckClass(idx, paramsFor(e.cfg), h.bytes) })
	if h.err != nil {
		slog.Warn("datapath: no held-ACK class on this interface (held downloads' ACKs are not paced)",
			"interface", e.cfg.Interface, "err", h.err)
	}
}

// SetRate sets the class's rate (bytes/s, HeldAckBytes; 0: unrestricted).
// It fails where the tree has no such class.
func (h *heldAckClass) SetRate(bytes uint64) error {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errClosed
	}
	if h.err != nil {
		return fmt.Errorf("%s: %w", e.cfg.Interface, h.err)
	}
	if bytes == h.bytes {
		return nil
	}
	idx := e.link.Attrs().Index
	if err := e.ns.do(func() error { return replaceHeldAckClass(idx, paramsFor(e.cfg), bytes) }); err != nil {
		return fmt.Errorf("%s: %w", e.cfg.Interface, err)
	}
	h.bytes = bytes
	return nil
}

// packets is the packets the class has sent.
func (h *heldAckClass) packets() (uint64, error) {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, errClosed
	}
	var n uint64
	return n, e.ns.do(func() error {
		c, err := classStatsOf(e.link, lane.HeldAckClassID)
		if c != nil && c.Basic != nil {
			n = uint64(c.Basic.Packets)
		}
		return err
	})
}

// heldAcks paces the held-ACK class of the tree on ifindex while the
// classifier says held ACKs leave there (its event, at most one a
// second, read by bgevents.go): a pacer started at the first reads the
// interface's arrivals each heldAckTick and sets the class's rate from
// their estimate; it ends, the class unrestricted, heldAckQuiet after the
// last event.
func (b *BackgroundClass) heldAcks(ifindex int) {
	e, err := b.trees.of(ifindex)
	if err != nil {
		return
	}
	h := &e.heldAck
	e.mu.Lock()
	defer e.mu.Unlock()
	h.seen = time.Now()
	if h.pacing || e.closed || h.err != nil {
		return
	}
	h.pacing = true
	go h.pace()
}

// pace is the pacer's loop (heldAcks).
func (h *heldAckClass) pace() {
	e := h.e
	var est DownEstimate
	for {
		time.Sleep(heldAckTick)
		e.mu.Lock()
		quiet, closed := time.Since(h.seen) > heldAckQuiet, e.closed
		if quiet || closed {
			h.pacing = false
		}
		e.mu.Unlock()
		if closed {
			return
		}
		if quiet {
			if err := h.SetRate(0); err != nil {
				slog.Warn("datapath: held-ACK class not released", "interface", e.cfg.Interface, "err", err)
			}
			return
		}
		rx, err := rxBytes(e.ns, e.link.Attrs().Index)
		if err != nil {
			continue
		}
		if bps := est.Add(time.Now(), rx); bps > 0 {
			if err := h.SetRate(HeldAckBytes(bps)); err != nil {
				slog.Warn("datapath: held-ACK class not paced", "interface", e.cfg.Interface, "err", err)
			}
		}
	}
}

// rxBytes is the bytes received by link ifindex of ns.
func rxBytes(ns *nsRef, idx int) (uint64, error) {
	var rx uint64
	err := ns.do(func() error {
		l, err := netlink.LinkByIndex(idx)
		if err != nil {
			return err
		}
		if s := l.Attrs().Statistics; s != nil {
			rx = s.RxBytes
		}
		return nil
	})
	return rx, err
}
