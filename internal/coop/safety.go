// safety.go: the fallback to plain TCP (open problem 4 of docs/papers.md §001). When
// traffic from hosts without lanes dominates the medium, capping our own
// connections only hands the air to them; then capping stops for a hold time
// and the status says why.
//
// "The group's windows" are this host's flows' and those of its peers'
// flows that the caps hold: a peer's flow whose window is more than
// uncappedRatio x the target this host computes for it (plus min_segments)
// is not held by caps (its daemon fell back, or its caps are not
// enforced) and is plain TCP for this test, like a host without lanes.
// Counted as ours, one peer's fallback kept every other from it: in the
// lab's coop-mixed with an estimated rate (the drain had lowered the caps
// to 11 segments), the first daemon to fall back opened its window to
// 54-149 segments, and the other three stayed capped for the rest of the
// run at a third of their plain-TCP goodput.
//
// Two signals; capping stops when either held in Trigger of the last 20
// intervals (not necessarily in a row):
//   - RTT inflation without our own backlog: the group's flows' median
//     srtt/min_rtt exceeds RTTInflation (and by at least minQueueDelay) while
//     the group's summed window in flight fits within the shared BDP — our
//     caps keep our own queue near empty, so the queue is someone else's;
//   - starved at the cap (configured AP rate only): this host's flows sit at
//     their caps, yet its goodput stays below GoodputFraction of what its
//     share of the rate promises, and the group's summed goodput (own and
//     counted peers' announced) stays below GoodputFraction of the rate —
//     the caps bind, and others take the air. The group condition keeps a
//     medium that merely carries less than its configured rate (802.11
//     contention: every capped host alike below its share, the group near
//     the medium's real capacity) from reading as foreign traffic, as it
//     did at N = 16 on the lab's DCF medium (docs/lab.md); a host below its
//     share while its group is not is an unfair share, which the caps
//     handle, not foreign traffic.
//
// Counted over a window, not in a row: a foreign CUBIC
// flow's saw-tooth holds the group's median srtt near the RTT line for
// seconds (plateaus at 1.29-1.32x in the lab's coop-mixed), and each
// interval that dipped below it restarted a count in a row, so the
// fallback took 10-23 s; the window still needs Trigger intervals' worth
// of inflation (5 s at the defaults), which a stall of a couple of seconds
// does not give.
//
// A third signal where the AP rate is estimated (drain_intervals): the
// estimator's drain (estimate.go) is an experiment. It lowers the caps to
// what the group delivers while the queue stands; a queue of the caps'
// own (a slower medium) then empties within an interval or two, someone
// else's stays, and their flows grow into the room the lowered caps
// leave, so the group delivers less and less (drainFall). A queue that
// stands DrainIntervals in a row after the drain, with the group's
// windows within the estimate and its goodput below drainFall of what it
// delivered while the queue stood, stops capping at once, without
// waiting for the window's count: in the lab's coop-mixed
// the RTT signal fired 6-16 s after the drain (the plain hosts' windows
// had to grow first to lift the median RTT above 1.3x), while the
// queue had stood above the drain's 1.15x since the drain.
//
// After Hold, capping is tried again (the count starts afresh); a repeat
// trigger doubles the hold (up to 8x); a quiet hold period resets it.
package coop

import (
	"fmt"
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

// triggerWindow is how many of the latest intervals Trigger counts over
// (10 s at 0.5 s), or Trigger if that is more. Counted in a row instead,
// a foreign CUBIC flow's saw-tooth restarted the count at every dip below
// the RTT line (the lab's coop-mixed: fallback at 20.8-29 s, against
// 11 s over the window; TestSafetyTriggerOverSawTooth).
const triggerWindow = 20

// safetyWindow is how many of the latest intervals Trigger counts over.
func safetyWindow(s config.CoopSafety) int { return max(triggerWindow, s.Trigger) }

// uncappedRatio: a peer's flow above this x its target (plus min_segments)
// is not held by caps. A held flow sits at or below its cap, which is at
// most its target plus the hysteresis band (5 %) or, for an interval after
// the group changed, the target of the group before (at most 2x when a
// host joins a group of one).
const uncappedRatio = 2

// uncapped reports whether a flow's window of cwnd segments is beyond what
// a cap from target allows.
func uncapped(cwnd, target float64, minSegments uint32) bool {
	return cwnd > uncappedRatio*target+float64(minSegments)
}

// minQueueDelay: RTT inflation below this is never blamed on others (jitter
// on short paths).
const minQueueDelay = 10 * time.Millisecond

// drainFall: the drain signal counts an interval only while the group
// delivers below this share of what it delivered while the drained queue
// stood. Capped at that rate on a medium that merely delays (802.11
// contention: the ACKs' access delay held 16 downloads' RTT at 1.17-1.24x
// the base with caps at the medium's rate, and the signal stopped every
// host's caps at 6-9 s), the group keeps delivering it (0.93-1.0 of it in
// the lab); someone else's flows, growing into the room the lowered caps
// leave, take goodput from it interval by interval (coop-mixed: 0.69-0.85
// of it up, 0.90-0.75 down, within 1.5 s).
const drainFall = 0.9

// backInflation: the RTT line of the drain signal for a queue that comes
// back within drainMemory intervals of the drain, after it had emptied:
// the drained queue's own line. A lower one (1.10, the trim's line:
// the downloads in coop-mixed had such a queue at 1.10-1.17x,
// and its replay there fired 2 s sooner in 2 of 5) fired no sooner in
// any of 10 mixed repetitions, and on the 802.11
// medium without foreign traffic (16 downloads, an early drain at 4.2 s)
// the ACKs' access delay held the RTT at 1.11-1.13x with the group at
// 0.89-0.91 of the drained best: two intervals in a row counted, one
// short of a false fallback.
const backInflation = drainInflation

// upBackInflation: the uplink's line for the queue that comes back, the
// trim's. In the lab's coop-mixed uploading the drain
// often leaves the plain uploads' queue at 1.12-1.18x (a plain CUBIC flow
// near its last maximum grows slowly), the lanes group held at 0.74-0.86
// of its drained best by caps that fit what it delivers; each interval at
// or below 1.15x restarted the count, and in the worst of 10
// repetitions capping stopped only at 15.2 s (the lanes hosts at 0.45 of
// their plain-TCP goodput), where 1.10x reads the queue from 8.8 s. The
// uplink's RTT on the 802.11 medium without foreign traffic stays within
// 1.04-1.10x (4 and 16 uploads, no drain); the downlink keeps 1.15x, its
// ACKs' access delay held 16 downloads at 1.11-1.13x after a drain.
const upBackInflation = trimAbove

// observation is what the controller measures each interval.
type observation struct {
	inflation   float64       // median srtt/min_rtt over the group's flows
	queueDelay  time.Duration // median srtt - min_rtt
	inflightLow bool          // group's window in flight <= shared BDP
	atCap       bool          // some own active flow's cwnd is at its cap
	drained     bool          // the queue a drain answered still stands, an interval or more after it (estimated rate)
	drainShare  float64       // then: the group's goodput over what it delivered while that queue stood
	drainBack   bool          // the drained queue had emptied: a queue now is its return (drainState)
	goodput     float64       // this host's goodput, bit/s
	promised    float64       // this host's share x configured AP rate (0: estimated)
	group       float64       // the group's goodput (own + counted peers' announced), bit/s
	rate        float64       // the configured AP rate, bit/s (0: estimated)
	flows       int
}

type safety struct {
	cfg      config.CoopSafety
	recent   []bool // the latest intervals, oldest first: was it bad
	bad      int    // how many of recent were
	offUntil time.Time
	mult     int
	reason   string
	lastOff  time.Time
	stood    int // intervals in a row a queue stood after a drain (drainStood)
	// returningQueueLine: the drain signal's RTT line for a queue that
	// comes back (upBackInflation for the uplink; 0: backInflation)
	returningQueueLine float64
}

// update feeds one interval's observation; it returns whether capping is
// allowed and, if not, why.
func (s *safety) update(now time.Time, o observation) (bool, string) {
	if !s.cfg.Enabled {
		return true, ""
	}
	if now.Before(s.offUntil) {
		s.stood = 0
		return false, s.reason
	}
	if why := s.drainStood(o); why != "" {
		return false, s.stop(now, why)
	}
	why := ""
	switch {
	case o.flows == 0:
	case o.inflation > s.cfg.RTTInflation && o.queueDelay >= minQueueDelay && o.inflightLow:
		why = fmt.Sprintf("foreign traffic: RTT inflated %.2fx (queue %v) while our hosts' windows fit the shared BDP",
			o.inflation, o.queueDelay.Round(time.Millisecond)) + rateTooHigh(o)
	case o.promised > 0 && o.atCap && o.goodput < s.cfg.GoodputFraction*o.promised && o.group < s.cfg.GoodputFraction*o.rate:
		why = fmt.Sprintf("foreign traffic: goodput %.2f Mbit/s at the cap, < %.0f%% of this host's share %.2f Mbit/s (the group's %.2f of %.2f)",
			o.goodput/1e6, 100*s.cfg.GoodputFraction, o.promised/1e6, o.group/1e6, o.rate/1e6)
	}
	s.remember(why != "")
	if why == "" {
		if !s.lastOff.IsZero() && now.Sub(s.lastOff) > 4*s.hold() {
			s.mult = 0
		}
		return true, ""
	}
	if s.bad < s.cfg.Trigger {
		return true, ""
	}
	return false, s.stop(now, fmt.Sprintf("%s (%d of the last %d intervals)", why, s.bad, len(s.recent)))
}

// rateTooHigh names the other reading of a queue under windows that fit
// the BDP of a configured AP rate: the rate is above what the medium
// carries (802.11 contention leaves less than one station's rate: the
// lab's DCF medium at 20 Mbit/s carries ~15.5 with two uploaders, and
// every daemon fell back). Only where the group gets clearly less than
// the rate; "" otherwise, and where the rate is estimated.
func rateTooHigh(o observation) string {
	if o.rate <= 0 || o.group >= rateShortfall*o.rate {
		return ""
	}
	return fmt.Sprintf(", or ap_rate %.2f Mbit/s is above what the AP carries (our group gets %.2f; ap_rate 0 estimates it)",
		o.rate/1e6, o.group/1e6)
}

// rateShortfall: a group getting less than this of the configured rate
// may be facing a rate set too high.
const rateShortfall = 0.9

// drainStood counts the intervals in a row a queue stood after the
// estimator's drain (see the file comment); the reason once they reach
// DrainIntervals.
func (s *safety) drainStood(o observation) string {
	line := drainInflation
	if o.drainBack {
		line = s.backLine()
	}
	if s.cfg.DrainIntervals <= 0 || !o.drained || o.drainShare >= drainFall || o.flows == 0 ||
		o.inflation <= line || o.queueDelay < minQueueDelay || !o.inflightLow {
		s.stood = 0
		return ""
	}
	s.stood++
	if s.stood < s.cfg.DrainIntervals {
		return ""
	}
	return fmt.Sprintf("foreign traffic: a queue stood %d intervals after the caps were lowered to what our hosts deliver, and they deliver %.0f%% of that (RTT %.2fx, queue %v)",
		s.stood, 100*o.drainShare, o.inflation, o.queueDelay.Round(time.Millisecond))
}

// backLine is the drain signal's RTT line for a queue that comes back.
func (s *safety) backLine() float64 {
	if s.returningQueueLine > 0 {
		return s.returningQueueLine
	}
	return backInflation
}

// stop turns capping off for the hold (doubled on a repeat) and returns why.
func (s *safety) stop(now time.Time, why string) string {
	s.recent, s.bad, s.stood = s.recent[:0], 0, 0
	if s.mult == 0 {
		s.mult = 1
	} else if s.mult < 8 {
		s.mult *= 2
	}
	s.reason = why
	s.lastOff = now
	s.offUntil = now.Add(s.hold())
	return why
}

// remember records one interval's outcome in the window of the latest
// max(triggerWindow, Trigger) intervals.
func (s *safety) remember(bad bool) {
	if len(s.recent) > 0 && len(s.recent) >= safetyWindow(s.cfg) {
		if s.recent[0] {
			s.bad--
		}
		s.recent = append(s.recent[:0], s.recent[1:]...)
	}
	s.recent = append(s.recent, bad)
	if bad {
		s.bad++
	}
}

func (s *safety) hold() time.Duration { return time.Duration(max(s.mult, 1)) * s.cfg.Hold.D() }

// stopped reports whether the fallback holds on this host's own evidence
// (announced as UpStopped / DownStopped for its peers to follow).
func (s *safety) stopped(now time.Time) bool {
	return s.cfg.Enabled && now.Before(s.offUntil)
}

// Following a peer's fallback: the medium is shared, so foreign traffic one
// host sees is there for all. A host whose own signals stay quiet (in the
// lab's coop-mixed, one lanes host stayed capped 6-9 s after its peers had
// fallen back, in 3 of 6 upload runs: their growing goodput kept its drain
// signal from firing) stops capping while a counted peer announces that it
// stopped on its own evidence, and starts again when that peer does. A
// follower does not announce it, so two hosts never hold each other off
// (peerGroup.stoppedPeer).
