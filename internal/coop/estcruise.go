// estcruise.go: the rate estimator in cruise (estimate.go has the phases):
// the probes every probeEvery of wall-clock time, the trim that follows
// what the group delivers between them, the rate it reports, and the best
// goodput of its window of rate samples.
package coop

import (
	"math"
	"time"
)

func (e *rateEstimator) cruise(now time.Time, s groupSample) {
	best := e.best()
	if e.probing && s.goodput > regrowth*e.preProbe && s.inflation <= startupExit {
		e.phase, e.probing, e.failed = phaseStartup, false, 0
		e.trim, e.high, e.low, e.gain, e.floor = 1, 0, 0, regrowGain, 0
		e.est = e.gain * e.cruiseRate(s.goodput, s)
		return
	}
	inProbe := e.inProbe(now)
	if !inProbe && inProbeWindow(now, e.probeLength) {
		e.cutShort = probePeriod(now) // skipped: for the whole period (see inProbe)
	}
	if inProbe && !e.probing {
		e.preProbe = best
	}
	if e.probing && !inProbe {
		e.failed++ // ended without regrowth
	}
	if !inProbe && !e.probing { // a probe's queue is the probe's
		e.adjustTrim(s)
		e.queued = s.inflation > probeSkipAbove
	}
	e.probing = inProbe
	e.keepTrimmed(best)
	e.est = e.cruiseRate(best*e.trimmed(), s)
	e.probeEst = math.Min(e.cruiseRate(probeGain*best*e.trimmed(), s), e.limit)
}

// keepTrimmed raises the trim as far as the best falls (up to no trim),
// so the trimmed best stays where the RTT put it when a high sample leaves
// the window: the trim had been compensating that sample's overshoot.
// (Measured: a catch-up of 21.5 Mbit/s in startup, trimmed against, left
// the window at 36 s, and the caps of 16 uploads fell from 28 to 25
// segments at the RTT's floor, 10 s to climb back at half a step a
// second.) A slower medium shows as a queue, and drains.
func (e *rateEstimator) keepTrimmed(best float64) {
	if e.trim > 0 && e.lastBest > best && best > 0 {
		e.trim = math.Min(1, e.trim*e.lastBest/best)
	}
	e.lastBest = best
}

// adjustTrim moves the trim by one cruise interval's RTT: down a step
// after trimIntervals above trimAbove, up half a step after as many below
// trimBelow.
func (e *rateEstimator) adjustTrim(s groupSample) {
	switch {
	case s.inflation > trimAbove:
		e.high, e.low = e.high+1, 0
	case s.inflation > 0 && s.inflation < trimBelow:
		e.high, e.low = 0, e.low+1
	default:
		e.high, e.low = 0, 0
	}
	if e.high >= trimIntervals {
		e.trim, e.high = math.Max(trimFloor, e.trimmed()-trimStep), 0
	}
	if e.low >= trimIntervals {
		e.trim, e.low = math.Min(1, e.trimmed()+trimStep/2), 0
	}
}

func (e *rateEstimator) trimmed() float64 {
	if e.trim == 0 {
		return 1
	}
	return e.trim
}

// inProbe reports whether now is inside a probe of the wall clock's
// schedule, the same for every host with the same count of failed probes:
// the first probeLength of every 2^failed-th probe period, unless a drain
// ended that period's probe or the medium showed a standing queue in the
// last interval before it. A skipped
// period stays skipped (cruise marks it cutShort at its first interval):
// otherwise an interval inside it that read no queue started the
// probe late, for what was left of probeLength, on the hosts that read it
// so (on the lab's 802.11 medium 6 of 16 hosts, for 0.2-0.4 s), which
// found nothing and counted as failed.
func (e *rateEstimator) inProbe(now time.Time) bool {
	p := probePeriod(now)
	if !inProbeWindow(now, e.probeLength) || p == e.cutShort {
		return false
	}
	if e.queued && !e.probing {
		return false
	}
	return p%(int64(1)<<min(e.failed, probeBackoffMax)) == 0
}

// inProbeWindow reports whether now is within the first probeLength of its
// probe period.
func inProbeWindow(now time.Time, probeLength time.Duration) bool {
	return now.UnixNano()%int64(probeEvery) < int64(probeLength)
}

func probePeriod(now time.Time) int64 { return now.UnixNano() / int64(probeEvery) }

// cruiseRate is a delivered rate plus the headroom over the group's base RTT:
// the caps subtract the headroom from the window, which would otherwise hold
// the group below what the medium delivered and walk the estimate down.
func (e *rateEstimator) cruiseRate(delivered float64, s groupSample) float64 {
	if s.minRTT <= 0 {
		return delivered
	}
	return delivered + e.headroomBits/s.minRTT.Seconds()
}

// bestJudged is the window's best judged goodput (rateSample.judged).
func (e *rateEstimator) bestJudged() float64 {
	b := 0.0
	for _, r := range e.window {
		b = math.Max(b, r.judged)
	}
	return b
}

func (e *rateEstimator) best() float64 {
	b := 0.0
	for _, r := range e.window {
		b = math.Max(b, r.bits)
	}
	return b
}

// rateSample is one interval's group goodput in the estimator's window.
type rateSample struct {
	t    time.Time
	bits float64
	// judged: the interval's group goodput bounded by what the hosts'
	// interfaces counted (arrivals.go), at most bits
	judged float64
}
