// arrivals.go: the goodput the safety fallback judges by, bounded by what
// arrived on (downloads) or left (uploads) the managed interface in the
// same interval.
//
// A host reads its goodput from bytes counted in order: a download's
// tcpi_bytes_received (rcv_nxt's advance), an upload's tcpi_bytes_acked
// (snd_una's). After a loss the segments behind the hole wait out of
// order; the retransmission that fills it moves the counter past all of
// them at once, so one interval reads little and the next a burst of what
// arrived earlier: in the lab's 8 downloads on the 20 Mbit/s AP the
// hosts' in-order bytes per 200 ms summed to 0, 29.7, 0, 31.9 and 41.9
// Mbit/s while the medium delivered 19.3 in every step, and each host's
// group goodput read 22-26 Mbit/s for 1.4 s.
//
// The estimate keeps those readings (estimate.go's own catch-up rules;
// bounding them there cost the downloads' Jain per 200 ms at 16), but for one use: the downlink's catch-up rule, which bounds an
// interval over a queue at the best, takes what arrived where that is
// more (estimate.go, arrivedBound: the interval's share of the medium,
// which a best from a loss's recovery lagged). What is bounded is the
// goodput the drain signal judges by
// (safety.go, drainStood): the group's delivery while the drained queue
// stood is its reference, and a reference a catch-up had raised above the
// medium read the queue that stayed after the drain (the caps, set from
// the same high best, still above the medium) as foreign: the group
// "delivered" 0.74-0.87 of it, and every host stopped capping.
//
// What the interface counted in an interval bounds what can have arrived
// (or left) of the flows' data in it: the frames carry the payload plus
// headers, and everything else the host receives or sends only adds. So a
// catch-up is judged as what arrived (within the headers' ~4 %), and an
// interval without one is never lowered. Each host announces how much of
// its goodput the bound took off (Announcement.GoodputOver,
// DownGoodputOver, in 256ths), so that every host judges the group's.
package coop

import "math"

// IfaceCounter reads the managed interface's cumulative byte counters
// (the kernel's rx_bytes and tx_bytes). The daemon backs it with netlink.
type IfaceCounter interface {
	InterfaceBytes() (rx, tx uint64, err error)
}

// arrivals tracks one interface counter from tick to tick.
type arrivals struct {
	last  uint64
	have  bool    // last is a reading
	delta float64 // bytes counted over the last tick's interval
	ok    bool    // delta is a difference of two readings
}

// observe takes the reading at a tick. A failed read, or a counter that
// went back (the interface was replaced), leaves the next interval
// unbounded.
func (a *arrivals) observe(v uint64, err error) {
	if err != nil {
		a.have, a.ok = false, false
		return
	}
	a.ok = a.have && v >= a.last
	if a.ok {
		a.delta = float64(v - a.last)
	}
	a.last, a.have = v, true
}

// bound returns the interval's bytes, at most what the interface counted.
func (a *arrivals) bound(bytes float64) float64 {
	if !a.ok {
		return bytes
	}
	return math.Min(bytes, a.delta)
}

// overOf is the share of goodput beyond judged, in 256ths (0..255), as
// announced; judgedOf inverts it.
func overOf(goodput, judged float64) uint8 {
	if goodput <= 0 || judged >= goodput {
		return 0
	}
	return uint8(min(255, math.Round(256*(1-judged/goodput))))
}

func judgedOf(goodput float64, over uint8) float64 {
	return goodput * float64(256-int(over)) / 256
}
