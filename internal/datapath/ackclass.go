// ackclass.go: the ACK class (1:14) of every egress tree, for the pure ACKs
// of the host's downloads that have a downlink cap (the cooperative
// controller's receive-window caps, SetSocketRwndCap). The classifier sends
// an interactive socket's pure ACK there while the class is on
// (lanes_ack_on; classifier.c); the controller sets its rate just above the
// ACK rate of the capped downloads' fair rates (coop/ackclass.go), so a
// burst of data arriving at the host leaves as ACKs spaced at that rate,
// and the sender's next window leaves spread over the round instead of in
// the burst's place (docs/results/coop-downlink.md).
//
// The class is built with every tree, unrestricted (rate r, ceil R, like a
// lane) until a rate is set; a tree where it cannot be made keeps working
// without it, and SetAckClass then reports why (the feature is off).
package datapath

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/lane"
)

const (
	// ackBurst is the ACK class's bucket, bytes: two ACKs with
	// timestamps (52 bytes each without a link-layer header, 66 with
	// Ethernet's).
	ackBurst = 120
	// ackQueueBytes is the ACK class's bfifo limit: about 1,000 ACKs.
	ackQueueBytes = 64 << 10
	// ackLeafHandle is the ACK class's leaf qdisc, 14:.
	ackLeafHandle = (lane.AckClassID & 0xffff) << 16
)

// replaceAckClass creates (or changes) the ACK class of the tree on link
// ifindex and its bfifo: rate = ceil = p.ackBytes with a burst of two ACKs,
// or, with no rate, a lane-like class (rate r, ceil R).
func replaceAckClass(ifindex int, p treeParams) error {
	c := htbClass(ifindex, lane.AckClassID, rootClass, tokenRate, p.rootBytes, lane.Interactive.HTBPrio())
	if p.ackBytes > 0 {
		r := min(p.ackBytes, p.rootBytes)
		c.Rate, c.Ceil = r, r
		c.Buffer = netlink.Xmittime(r, ackBurst)
		c.Cbuffer = c.Buffer
	}
	if err := netlink.ClassReplace(c); err != nil {
		return fmt.Errorf("htb class %s: %w", netlink.HandleStr(lane.AckClassID), err)
	}
	if err := replaceBfifo(ifindex, ackLeafHandle, lane.AckClassID, ackQueueBytes); err != nil {
		return fmt.Errorf("leaf qdisc of %s: %w", netlink.HandleStr(lane.AckClassID), err)
	}
	return nil
}

// buildAck (re)builds the tree's ACK class at the host's rate; a failure
// is recorded (ackErr), not returned: the tree works without the class.
// Called with the tree built, from OpenEgress and Update.
func (e *Egress) buildAck(bytes uint64) {
	e.ackBytes = bytes
	p := paramsFor(e.cfg)
	p.ackBytes = bytes
	e.ackErr = e.ns.do(func() error { return replaceAckClass(e.link.Attrs().Index, p) })
	if e.ackErr != nil {
		slog.Warn("datapath: no ACK class on this interface (downloads' ACKs stay in their lane)",
			"interface", e.cfg.Interface, "err", e.ackErr)
	}
}

// setAckRate changes the ACK class's rate (bytes/s, 0: unrestricted).
func (e *Egress) setAckRate(bytes uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	if e.ackErr != nil {
		return fmt.Errorf("%s: %w", e.cfg.Interface, e.ackErr)
	}
	if bytes == e.ackBytes {
		return nil
	}
	p := paramsFor(e.cfg)
	p.ackBytes = bytes
	if err := e.ns.do(func() error { return replaceAckClass(e.link.Attrs().Index, p) }); err != nil {
		return fmt.Errorf("%s: %w", e.cfg.Interface, err)
	}
	e.ackBytes = bytes
	return nil
}

// AckStats reads the ACK class's counters (its rate in Rate, bits/s; 0:
// unrestricted).
func (e *Egress) AckStats() (LaneStats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return LaneStats{}, errClosed
	}
	var hs map[uint32]*netlink.ClassStatistics
	if err := e.ns.do(func() (err error) { hs, err = classStats(e.link); return }); err != nil {
		return LaneStats{}, err
	}
	ls := LaneStats{ClassID: netlink.HandleStr(lane.AckClassID)}
	if st := hs[lane.AckClassID]; st != nil {
		if st.Basic != nil {
			ls.Packets, ls.Bytes = uint64(st.Basic.Packets), st.Basic.Bytes
		}
		if st.Queue != nil {
			ls.Drops, ls.Overlimits = uint64(st.Queue.Drops), uint64(st.Queue.Overlimits)
			ls.BacklogBytes, ls.BacklogPackets = uint64(st.Queue.Backlog), uint64(st.Queue.Qlen)
		}
	}
	return ls, nil
}

// SetAckClass sets the ACK class's rate on every tree of the host (bits/s)
// and turns the classifier's ACK test on; 0 turns it off and leaves the
// class unrestricted. It fails, with the class off, where a tree has no
// ACK class or the rate cannot be set.
func (t *Trees) SetAckClass(bits uint64) error { return t.setAckClass(bits, 1) }

// SetAckClassEvery is SetAckClass for the pure ACKs of every interactive
// socket, capped or not (the downloads' ACKs from their first round).
func (t *Trees) SetAckClassEvery(bits uint64) error { return t.setAckClass(bits, 2) }

// setAckClass sets the class's rate and the classifier's mode (lanes_ack_on:
// 1 capped sockets, 2 every interactive socket).
func (t *Trees) setAckClass(bits uint64, mode uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	bytes := bits / 8
	if bits > 0 {
		bytes = max(bytes, 1)
	}
	on := uint32(0)
	if bytes > 0 {
		on = mode
	}
	var errs []error
	if on == 0 { // off first: no ACK waits in a class being opened
		errs = append(errs, t.putAckOn(0))
	}
	for e := range t.egresses {
		if err := e.setAckRate(bytes); err != nil {
			errs = append(errs, err)
		}
	}
	t.ackBytes = bytes
	if err := errors.Join(errs...); err != nil {
		t.ackBytes = 0
		return errors.Join(fmt.Errorf("ACK class: %w", err), t.putAckOn(0))
	}
	if on != 0 {
		if err := t.putAckOn(on); err != nil {
			return fmt.Errorf("ACK class: %w", err)
		}
	}
	return nil
}

func (t *Trees) putAckOn(v uint32) error {
	return t.guard.use(func() error { return t.cls.LanesAckOn.Put(uint32(0), v) })
}

// AckClassBytes is the bytes of the pure ACKs the classifier has sent to
// the ACK class so far (skb->len, the length HTB counts).
func (t *Trees) AckClassBytes() (uint64, error) {
	var n uint64
	err := t.guard.use(func() error {
		var per []abi.Counter
		if err := t.cls.LanesAckStats.Lookup(uint32(0), &per); err != nil {
			return err
		}
		n = classifier.SumCounters(per).Bytes
		return nil
	})
	return n, err
}

// AckClassSent is the bytes the ACK classes of the host's trees have sent
// (HTB counts a packet as it leaves the class), summed.
func (t *Trees) AckClassSent() (uint64, error) {
	t.mu.Lock()
	es := make([]*Egress, 0, len(t.egresses))
	for e := range t.egresses {
		es = append(es, e)
	}
	t.mu.Unlock()
	var n uint64
	for _, e := range es {
		st, err := e.AckStats()
		if errors.Is(err, errClosed) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n += st.Bytes
	}
	return n, nil
}

// AckClassStats is the ACK class of every tree of the host, by interface.
func (t *Trees) AckClassStats() map[string]LaneStats {
	t.mu.Lock()
	es := make([]*Egress, 0, len(t.egresses))
	for e := range t.egresses {
		es = append(es, e)
	}
	t.mu.Unlock()
	out := map[string]LaneStats{}
	for _, e := range es {
		if st, err := e.AckStats(); err == nil {
			out[e.Interface()] = st
		}
	}
	return out
}
