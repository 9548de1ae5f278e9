// estimate.go: the AP rate measured from the group's goodput when it is not
// configured: a group version of BBR's bottleneck-bandwidth estimate.
//
// Once per announcement interval the controller feeds the group's goodput
// (own and counted peers' announced) and the median srtt/min_rtt and
// min_rtt of the group's flows (own and peers' announced): every host sees
// nearly the same, so every host's estimate, and so its caps, agree. The
// phases (docs/coop-protocol.md, "Caps", has the why of each rule and the
// lab figures that decided it):
//   - pre-start: no estimate, so no caps, while the group's goodput still
//     grows by preStartGrowth an interval within startupExit of the base:
//     the flows' own slow start finds the medium faster than caps would.
//     The first interval with a queue, or that grows less, starts startup
//     from its goodput.
//   - startup: while the RTT stays within startupExit of the base, the
//     estimate is twice what the group delivers (plus the headroom), so
//     the caps double every interval the group fills them. The first
//     interval above startupLimit (startupRise above the lowest RTT
//     startup has seen, at most startupExit) ends it, at the best goodput;
//     the queue of the flows' own slow start counts only once an interval
//     has settled within startupExit, or after maxSettleIntervals. The
//     downlink's estimator drains at once a queue above drainInflation
//     that stands drainIntervals after settleIntervals
//     (drainUnsettledStartup).
//   - every interval: one that delivers more than the best over a standing
//     queue, and more than the group's windows carry at their RTT, adds
//     only the best to the window (the catch-up of cumulative ACKs after a
//     loss, not a faster medium); within the windows it is what the medium
//     carried, and counts. The downlink's adds what its interfaces
//     received instead, where that is more (catchUpToArrivals:
//     arrivedBound).
//   - cruise: the best goodput of the last rateWindow plus the headroom, so
//     the caps' window is the BDP of what the medium delivered plus the
//     queue allowance. For probeLength of every probeEvery (wall clock, so
//     the hosts probe together) the estimate is probeGain x the best; a
//     probe that delivers more than regrowth x the best returns to startup
//     at regrowGain. A probe that finds nothing doubles the wait for the
//     next, up to probeBackoffMax periods; a period that starts over a
//     standing queue (above probeSkipAbove) does not probe.
//   - trim: while the RTT stays above trimAbove for trimIntervals (outside
//     probes) the cruise estimate is trimmed by trimStep, down to
//     trimFloor x the best (the best of noisy, unaligned intervals sits
//     above what the medium carries); below trimBelow half a step is given
//     back. Startup resets it.
//   - drain (once per queue: see drained): the RTT above drainInflation
//     for drainIntervals means the caps exceed what the medium carries (a
//     slower medium, or someone else's traffic): the estimate falls to what
//     the group now delivers and the window restarts there. A queue of our
//     own then drains; one that stays is someone else's, and the safety
//     fallback's RTT signal fires (safety.go): lowering the group's windows
//     and watching the queue is what tells the two apart, which a host
//     cannot from its own flows' RTT alone.
package coop

import (
	"math"
	"time"
)

// The estimator's constants. drainInflation sits below the safety
// fallback's default rtt_inflation (1.3), so a queue of our own caps is
// drained before the fallback would read it as foreign.
const (
	rateWindow  = 30 * time.Second // how far back the best goodput is taken
	startupGain = 2.0
	// regrowGain: the startup a probe's regrowth returns to grows by this
	// per interval, not startupGain: the probe found the medium only a
	// little faster than the best (or the best low after a lossy drain),
	// and doubling from there overshot by up to the whole BDP (a second
	// 230 KB queue at 16 uploads in the lab). 1.25 per interval still
	// reaches twice the rate in 3 intervals.
	regrowGain = 1.25
	// startupExit: srtt/min_rtt that ends startup in the first interval it
	// is seen (startup doubles the caps every interval, so each interval
	// it waited for a second one added up to a BDP of queue: at 16 uploads
	// the second filled the AP's 0.5-BDP buffer and lost ~90 segments) ...
	startupExit = 1.10
	// startupRise: ... or this much above the lowest srtt/min_rtt startup
	// has seen since it settled, if lower: with the caps far below the BDP
	// the RTT reads 1.01-1.03x base at 16 uploads, and a queue shows as a
	// rise to 1.07 an interval before 1.10; with a few segments per flow,
	// delayed ACKs alone read 1.05 (8 uploads at cwnd 5), so a fixed
	// threshold that low ended startup at a tenth of the medium.
	startupRise    = 0.05
	drainInflation = 1.15 // srtt/min_rtt that drains ...
	drainIntervals = 2    // ... when it holds this many intervals
	probeGain      = 1.2
	probeEvery     = 5 * time.Second
	// probeBackoffMax: after failed probes in a row, only every 2^n-th
	// probe period probes, n at most 3 (every 40 s).
	probeBackoffMax = 3
	regrowth        = 1.05
	// trimAbove, trimBelow: the cruise RTT band (srtt/min_rtt) the trim
	// holds: above the allowance's own queue (1.05) plus the path's jitter
	// without a queue (1.03 in the lab), below the RTT goal (1.1x base).
	trimAbove     = 1.10
	trimBelow     = 1.06
	trimIntervals = 2
	trimStep      = 0.02
	trimFloor     = 0.85
	// probeSkipAbove: srtt/min_rtt that shows a standing queue (above the
	// path's own jitter, 1.03 in the lab): no probe then.
	probeSkipAbove = 1.04
	// settleIntervals: the queue of the flows' own slow start before the
	// first caps (every flow uncapped while the rate is unknown) is not
	// the caps' and does not end startup.
	settleIntervals = 3
	// maxSettleIntervals: a queue that stands longer is the caps' own (a
	// startup that overshot within settleIntervals), which startup's exit
	// must see
	maxSettleIntervals = 8
	// exitWindow: startup's last intervals cruise starts from (exitStartup)
	exitWindow  = 2
	minRateBits = 64_000 // below: "unknown"
	// drainMemory: a queue that comes back within this many intervals of
	// a drain is read by the safety fallback's drain signal as the
	// drained queue (drainState), and a drain in that time keeps the
	// first's reference (the higher best)
	drainMemory = 20
	// preStartGrowth: the group's goodput growing this much an interval
	// is the flows' own slow start (x2 per RTT; at most a few per cent
	// from one interval to the next of a steady group).
	preStartGrowth = 1.25
)

type estPhase int

const (
	phaseStartup estPhase = iota
	phaseCruise
)

// groupSample is one interval's input to the estimator.
type groupSample struct {
	goodput   float64       // the group's goodput, bit/s
	inflation float64       // median srtt/min_rtt of the group's flows (0: none)
	minRTT    time.Duration // median min_rtt of the group's flows (0: none)
	// windows: what the group's windows carry at their srtt, bit/s (0:
	// unknown, as on the downlink): an interval over a queue that
	// delivers within it is the medium's rate, not a catch-up (recorded)
	windows float64
	// judged: the group's goodput with each host's bounded by what its
	// interface counted (arrivals.go), what the safety fallback's drain
	// signal judges by (drainState); 0: goodput
	judged float64
}

// judgedOrGoodput is the interval's judged goodput, at most its goodput.
func (s groupSample) judgedOrGoodput() float64 {
	if s.judged <= 0 {
		return s.goodput
	}
	return math.Min(s.judged, s.goodput)
}

// rateEstimator is one direction's estimate (uplink or downlink).
type rateEstimator struct {
	headroomBits float64
	limit        float64 // max_ap_rate, bit/s
	probeLength  time.Duration

	window   []rateSample
	phase    estPhase
	est      float64 // bit/s; 0 = unknown
	capped   int     // intervals with an estimate (so with caps)
	inflated int     // consecutive intervals above drainInflation
	// settled: an interval after settleIntervals had the RTT within
	// startupExit, so the queue of the flows' own slow start is gone and
	// startup's exit may count (that queue took 3-4 intervals to drain at
	// 16 uploads; read as the caps' own, it ended startup at a third of
	// the medium)
	settled  bool
	floor    float64 // lowest srtt/min_rtt of startup since it settled (0: none)
	probeEst float64 // the estimate inside a probe (cruise)
	probing  bool    // the last update was inside a probe
	preProbe float64 // best before the current probe
	failed   int     // probes in a row that found nothing (backoff)
	cutShort int64   // the probe period whose probe a drain ended
	queued   bool    // the last interval outside a probe had a standing queue
	gain     float64 // startup's gain per interval (0: startupGain)
	trim     float64 // cruise multiplier of the best, trimFloor..1 (0: 1)
	high     int     // consecutive cruise intervals above trimAbove
	low      int     // consecutive cruise intervals below trimBelow
	last     float64 // the group's goodput of the last interval (pre-start)
	// afterQueue: the last interval's RTT was above drainInflation, so
	// this one may bring its loss's catch-up (recorded)
	afterQueue bool
	lastBest   float64 // the best the trim was last applied to (keepTrimmed)
	// drained: a drain lowered the estimate and the RTT has not come back
	// within drainInflation since. A queue that outlives the drain is not
	// the caps' (they now fit what the group delivers): draining again
	// would follow the group's goodput down as someone else's flows take
	// the medium (coop-mixed with the rate estimated: caps of 62 segments
	// drained to 4 in steps of a second, and the lanes hosts got 0.1-0.3 of
	// their plain-TCP goodput), where the safety fallback must judge it.
	drained bool
	// sinceDrain: intervals since the last drain (the safety fallback
	// reads a queue that outlives it: drainState)
	sinceDrain int
	drainBest  float64 // the best the last drain restarted from (drainState)
	// drainRef: the same intervals' best judged goodput (arrivals.go), the
	// drain signal's reference (drainState)
	drainRef float64
	rules    estimatorRules
	input    groupSample // the last interval's (status)
	// probeQueue: the last interval was in a probe or followed one, so a
	// queue in it is the probe's own (drainState)
	probeQueue bool
}

// estimatorRules are the estimator's variants: the rules in which the
// uplink's and the downlink's estimators differ (uplinkRules,
// downlinkRules).
type estimatorRules struct {
	// drainUnsettledStartup: a startup whose queue does not settle drains
	// at its drainIntervals-th interval above drainInflation after
	// settleIntervals, instead of going to cruise at maxSettleIntervals
	// and draining from there (see the file comment). The downloads'
	// senders start together, and the stop time decides their goodput;
	// on the uplink a plain flow's winning slow start made the drain set
	// the caps to what the lanes group delivered under it (coop-mixed
	// uploads 0.84 of plain TCP against 0.96 without the rule, 10
	// repetitions).
	drainUnsettledStartup bool
	// catchUpToArrivals: the catch-up rule bounds an interval at its
	// judged goodput where that is above the best (arrivedBound).
	catchUpToArrivals bool
	// bestWithinArrivals: every interval is recorded at most at its
	// judged goodput (update), so the best, which startup's exit, cruise
	// and the drain take, cannot come from a loss's catch-up: a host
	// whose best was recorded from one (its own interval holding the
	// released in-order bytes) settled its caps 1.05-1.26x above its
	// peers' at 16 downloads. The estimate's other inputs (pre-start,
	// startup's growth test, the probe's regrowth) read the goodput.
	bestWithinArrivals bool
}

// The two directions' rules: the uploads' goodput is what the hosts'
// windows send, judged by the group's windows (withinWindows); the
// downloads' senders are not the hosts', and what arrived is the
// measure.
var (
	uplinkRules   = estimatorRules{}
	downlinkRules = estimatorRules{drainUnsettledStartup: true, catchUpToArrivals: true, bestWithinArrivals: true}
)

func newRateEstimator(headroomBits, limitBits float64, interval time.Duration, rules estimatorRules) rateEstimator {
	return rateEstimator{headroomBits: headroomBits, limit: limitBits, probeLength: 3 * interval, rules: rules}
}

// rate is the estimate in bit/s and its source ("estimated", or "unknown"
// before any goodput).
// The probe is applied here, at every recompute, rather than at the hosts'
// unaligned ticks, so that all hosts' caps rise and fall within a
// recompute of each other.
func (e *rateEstimator) rate(now time.Time) (uint64, string) {
	if e.est < minRateBits {
		return 0, "unknown"
	}
	if e.phase == phaseCruise && e.probeEst > 0 && e.inProbe(now) {
		return uint64(e.probeEst), "estimated"
	}
	return uint64(e.est), "estimated"
}

// update feeds one interval.
func (e *rateEstimator) update(now time.Time, s groupSample) {
	if e.est >= minRateBits { // pre-start's uncapped losses are not the caps'
		rec := e.recorded(s)
		if e.rules.bestWithinArrivals {
			rec = math.Min(rec, s.judgedOrGoodput())
		}
		e.window = append(e.window, rateSample{t: now, bits: rec, judged: math.Min(rec, s.judgedOrGoodput())})
	}
	e.input = s // after recorded, which reads the interval before's windows
	e.afterQueue = s.inflation > drainInflation
	for len(e.window) > 0 && now.Sub(e.window[0].t) > rateWindow {
		e.window = e.window[1:]
	}
	e.settle(s)
	limit, need := drainInflation, drainIntervals
	exit := e.phase == phaseStartup && (e.settled || !e.rules.drainUnsettledStartup)
	if exit {
		limit, need = e.startupLimit(), 1
	}
	e.countInflated(s, limit)
	if s.inflation > 0 && s.inflation <= drainInflation {
		e.drained = false
	}
	e.sinceDrain++
	wasProbing := e.probing
	switch {
	case e.est < minRateBits: // unknown until the group's slow start ends
		e.preStart(s)
	case e.inflated >= need && exit:
		e.exitStartup(s)
	case e.inflated >= drainIntervals && !e.drained: // also an unsettled startup's (drainUnsettledStartup)
		e.drain(now, s)
	case e.phase == phaseStartup:
		e.startup(s)
	default:
		e.cruise(now, s)
	}
	e.probeQueue = wasProbing || e.probing
	if e.phase == phaseStartup && e.settled && s.inflation > 0 {
		e.floor = math.Min(s.inflation, e.startupFloor())
	}
	e.est = math.Min(e.est, e.limit)
}

// settle counts the capped intervals and marks startup settled (see
// settled).
func (e *rateEstimator) settle(s groupSample) {
	if e.est > 0 {
		e.capped++
	}
	if e.capped > settleIntervals && s.inflation > 0 && s.inflation <= startupExit || e.capped > maxSettleIntervals {
		e.settled = true
	}
}

// countInflated counts the consecutive intervals above limit, once the
// caps have had settleIntervals and, in startup, the slow start's own queue
// has settled; with drainUnsettledStartup, in a startup that has not settled too,
// where limit is drainInflation and the count leads to a drain.
func (e *rateEstimator) countInflated(s groupSample, limit float64) {
	if s.inflation > limit && e.capped > settleIntervals && (e.settled || e.phase != phaseStartup || e.rules.drainUnsettledStartup) {
		e.inflated++
	} else {
		e.inflated = 0
	}
}

// startupLimit is the srtt/min_rtt that ends startup: startupExit, or
// startupRise above startup's floor if that is lower.
func (e *rateEstimator) startupLimit() float64 {
	return math.Min(startupExit, e.startupFloor()+startupRise)
}

func (e *rateEstimator) startupFloor() float64 {
	if e.floor == 0 {
		return math.Inf(1)
	}
	return e.floor
}

// recorded is the goodput an interval adds to the window. Over a standing
// queue (the RTT above drainInflation) the medium was full: a goodput above
// the best there is no faster medium but the catch-up of cumulative ACKs
// after a loss, when a retransmission fills the hole and a whole window is
// acknowledged at once (measured: 24.5 Mbit/s on the lab's 20 Mbit/s AP at
// 1.3x the base RTT, 16 uploads). Let into the best, it set the caps 25 %
// above the medium for rateWindow, until the queue it built was drained.
// The catch-up often shows in the interval after the queue's, once the
// loss has emptied the queue (measured: 23.9 Mbit/s at 1.07x after 14.0 at
// 1.48x, 16 uploads), so that interval is bounded too, from the first
// capped interval on (the flows' own slow start loses too). A faster
// medium shows once its queue is gone.
// Startup's exit, once its slow start has settled, is the exception: its
// queue is the first sign of a full medium, before any loss, and so the
// best measure of the medium there is (clamped, the 18.4 Mbit/s of that
// interval at 16 uploads entered cruise as the 13.4 before it). A probe's
// queue is bounded by the probe's own windows (probeGain x the best)
// rather than the best: the probe filled the medium, and what it delivered
// over its queue is the medium's rate (2 uploads: 19.3 Mbit/s at 1.30x
// over a best of 16.4, after a startup that had exited early; recorded as
// 16.4, the caps then crept up 0.3 % a second for 50 s, their RTT's jitter
// above probeSkipAbove skipping the probes).
func (e *rateEstimator) recorded(s groupSample) float64 {
	exit := e.phase == phaseStartup && e.settled
	queue := s.inflation > drainInflation && e.capped > settleIntervals && !exit
	b := e.best()
	switch {
	case b <= 0:
	case queue && e.probing:
		return math.Min(s.goodput, probeGain*b)
	case (queue || e.afterQueue) && !e.withinWindows(s):
		return math.Min(s.goodput, e.arrivedBound(b, s))
	}
	return s.goodput
}

// arrivedBound is the catch-up rule's bound: the best, or (catchUpToArrivals)
// what the group's interfaces received in the interval if more. A judged
// goodput (arrivals.go) counts the bytes that arrived, not the in-order
// bytes a retransmission releases at once, so above the best it is the
// medium's share the group got, not a catch-up (coop-mixed downloading:
// 19.9 Mbit/s of in-order bytes at 1.25x the base RTT over a
// best of 10.5, the start's loss recovery; the interfaces received 13.2,
// the lanes hosts' share beside 2 plain downloads at 3.2 each; bounded at
// 10.5, the drain a second later set the caps there, the plain senders
// grew into the 2.7 Mbit/s left, and capping stopped only at 12-13 s).
func (e *rateEstimator) arrivedBound(best float64, s groupSample) float64 {
	if !e.rules.catchUpToArrivals || s.judged <= 0 {
		return best
	}
	return math.Max(best, math.Min(s.judged, s.goodput))
}

// withinWindows reports whether an interval delivered no more than the
// group's windows carry at their RTT, at its end or at the end of the
// interval before (what it delivered was sent up to an RTT before, under
// the windows of then: the caps lowered at startup's exit cut them before
// the next interval's goodput shows), so no catch-up: a loss's cumulative
// ACK acknowledges data sent rounds before, more than either window
// carries. Bounded at the best instead, the medium's rate over a queue was
// lost wherever the best lagged it: on the lab's 802.11 medium the 16
// uploads' startup exited at the group's goodput of an interval before
// (peers announce theirs late: 9.3-11.2 Mbit/s against 13.3-14.3
// delivered), the queue's 11.0-14.4 Mbit/s (no loss in the run) were
// recorded as that, and the caps stayed there, the medium idle 23-30 %.
func (e *rateEstimator) withinWindows(s groupSample) bool {
	w := math.Max(s.windows, e.input.windows)
	return s.windows > 0 && s.goodput <= w
}

// preStart leaves the estimate unknown while the group's goodput grows as
// its flows' slow start does, and starts startup at the first interval
// that shows a queue or grows less.
func (e *rateEstimator) preStart(s groupSample) {
	last := e.last
	e.last, e.est = s.goodput, 0
	if s.goodput >= minRateBits && (s.inflation > startupExit || s.goodput < preStartGrowth*last) {
		e.est = startupGain * e.cruiseRate(s.goodput, s)
	}
}

// startup doubles what the interval recorded, so a catch-up after the
// flows' own slow-start losses does not double the caps past the medium
// (16 uploads: 19.4 Mbit/s at 1.04x after an interval at 1.48x, doubled to
// 39.7, queued into the next loss).
func (e *rateEstimator) startup(s groupSample) {
	if s.inflation <= e.startupLimit() && len(e.window) > 0 {
		last := e.window[len(e.window)-1].bits
		e.est = math.Max(e.est, e.startupGain()*e.cruiseRate(last, s))
	}
}

func (e *rateEstimator) startupGain() float64 {
	if e.gain == 0 {
		return startupGain
	}
	return e.gain
}

// exitStartup goes to cruise at the best of startup's last exitWindow
// intervals: the exit's queue is the first sign of a full medium, and the
// earlier intervals of startup, with caps below it, can hold a catch-up
// of the flows' own slow-start losses (16 downloads: 26.3 Mbit/s at 1.02x
// on the lab's 20 Mbit/s AP, two intervals after their queue; as cruise's
// best it held the caps 37 % above the medium, the RTT at 1.09x, just
// below the trim's band, and the downloads unfair, 1.15-1.51 Mbit/s).
func (e *rateEstimator) exitStartup(s groupSample) {
	e.window = e.window[max(0, len(e.window)-exitWindow):]
	e.phase, e.inflated = phaseCruise, 0
	e.est = e.cruiseRate(e.best(), s)
	e.lastBest = e.best()
}

// drain restarts the window at the intervals the queue stood: the medium
// was full then, so the best of them is what it carries now.
func (e *rateEstimator) drain(now time.Time, s groupSample) {
	if e.probing { // the probe's own queue: it found nothing, and is over
		e.failed++
		e.cutShort = probePeriod(now)
	}
	e.window = e.window[max(0, len(e.window)-e.inflated):]
	e.lastBest = e.best() // the restart is meant to lower the estimate
	e.phase, e.inflated, e.probing, e.probeEst = phaseCruise, 0, false, 0
	if e.drainBest > 0 && e.sinceDrain <= drainMemory { // the queue came back
		e.drainBest = math.Max(e.drainBest, e.best())
		e.drainRef = math.Max(e.drainRef, e.bestJudged())
	} else {
		e.sinceDrain, e.drainBest, e.drainRef = 0, e.best(), e.bestJudged()
	}
	e.drained = true
	e.settled = true // an early drain ends startup: a later queue is the caps' or someone else's
	e.est = e.cruiseRate(e.best()*e.trimmed(), s)
}

// drainState is what the safety fallback's drain signal reads (safety.go):
// whether the queue a drain answered still stands in an interval after the
// drain's own (whose RTT was measured before the caps were lowered), or
// the drain was within drainMemory intervals (back: its queue emptied, and
// one now may be its return), and the last interval's group goodput over
// what the group delivered while the drained queue stood (the best the
// drain restarted from, the higher of two within drainMemory).
// Both sides of that share are judged goodput (arrivals.go: each host's
// bounded by what arrived on or left its interface): otherwise a
// loss's catch-up in the intervals the queue stood raised the reference
// above what the medium carries (8 downloads: 22-26 Mbit/s on a medium of
// 19.3; 2 uploads: one host's 21.7-21.9), the caps drained to that same
// best stayed above the medium, and the queue that stayed read as
// foreign at 74-89 % of it: every host stopped capping, without foreign
// traffic.
// The queue that comes back:
// in the lab's coop-mixed the first drain often came just after the plain
// flows' slow-start losses, so the queue emptied (1.02-1.10x) while the
// lanes group delivered 0.75-0.92 of its drained best, the plain windows
// grew back over the next 4-6 s with the RTT at 1.10-1.17x (below the
// drain's 1.15x about every other interval), and the signal waited for a
// second drain and then, with that drain's lower best as its reference,
// for the plain flows to take more. A queue of our own caps does not come
// back within seconds of a drain with the group delivering less than
// before: the drain lowered the caps to what the group delivered.
// A probe's queue (its intervals and the one after, while the raised caps
// come down) is the estimator's own and reports nothing: on the lab's
// 802.11 medium a probe 6.6 s after a drain held 16 uploads at 1.11-1.15x
// for 3 intervals, the group delivering 0.82 of the drain's best (a
// single interval's, the medium's goodput swinging by 10 % an interval),
// and every host stopped capping.
func (e *rateEstimator) drainState() (after bool, share float64, back bool) {
	if e.sinceDrain == 0 || e.drainBest <= 0 || !e.drained && e.sinceDrain > drainMemory || e.probeQueue {
		return false, 0, false
	}
	if e.drainRef <= 0 {
		return true, e.input.goodput / e.drainBest, !e.drained
	}
	return true, e.input.judgedOrGoodput() / e.drainRef, !e.drained
}

// restart forgets everything measured: while the safety fallback holds,
// the flows are uncapped and someone else's queue stands, so the
// intervals measure neither the medium nor the caps. Kept, the estimate
// stayed where the drain before the fallback put it (every interval over
// the foreign queue records at most the best: the catch-up rule) and the
// trim sank to its floor, and when the hold ended the caps came back at
// 0.85 of what the group had delivered capped, under the windows the
// flows had grown uncapped: in the lab's coop-mixed the lanes flows went
// from 80-122 segments to 36 at once, and where the hold ended at
// 37.2-37.8 s (4 of 20 upload repetitions) the lanes hosts
// got 0.73-0.82 of their plain-TCP goodput over the run's last 4 s. Restarted, the estimator begins as at a start:
// no caps while the group's goodput grows, then startup's caps at twice
// what it delivers, which bind only once startup ends; with the foreign
// queue still there the fallback's RTT signal fires again first.
func (e *rateEstimator) restart() {
	*e = rateEstimator{headroomBits: e.headroomBits, limit: e.limit, probeLength: e.probeLength, rules: e.rules}
}
