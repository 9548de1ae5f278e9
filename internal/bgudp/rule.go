// Package bgudp holds the background lane's non-TCP traffic (QUIC, other
// UDP) to a queueing-delay target at whatever bottleneck it crosses, in
// both directions. The classifier polices the class per interface and
// direction (internal/bpf/classifier/bgclass.h) and holds it at the
// yield's rate while the foreground is active; this package steers the
// policer's rate from a delay signal: ICMP echo probes to the traffic's
// peer, sent only while such traffic flows (the classifier's event wakes
// the controller; it sleeps otherwise).
//
// rule.go is the controller's rule, free of I/O (docs/background.md,
// "Background QUIC and UDP").
package bgudp

import (
	"time"
)

// Rule is the controller's constants.
type Rule struct {
	Target   time.Duration // queueing delay to keep (the policy's background target)
	Interval time.Duration // one probe and one step
	Floor    uint64        // lowest rate, bytes/s
}

// DefaultRule is the rule at a target.
func DefaultRule(target time.Duration) Rule {
	return Rule{Target: target, Interval: 50 * time.Millisecond, Floor: 25_000}
}

const (
	gain        = 0.02 // growth per step at no queue, of the rate at the last decrease (0.5 -> 1 in 25 steps)
	decreaseK   = 0.25 // rate × (1 − K·(qd/target − 1)) above the target
	minFactor   = 0.5  // at most halved per decrease
	headroom    = 1.25 // the rate stays within this of the highest rate a queue was seen at
	currentSpan = 2    // the current delay is the minimum of this many samples
	maxGrowth   = 3    // a queue's growth (s/s) a link estimate believes: a sender at 4× the link
)

// State is one interface's controller between steps.
type State struct {
	Rule    Rule
	Rate    uint64        // bytes/s; 0: not policed (until the first queue)
	Base    time.Duration // the minimum RTT of the episode
	Queue   time.Duration // the last step's queueing delay estimate
	Lost    uint64        // probes without an echo
	Samples uint64        // probes answered
	recent  []time.Duration
	peak    uint64        // the link's rate as estimated in the episode (its highest estimate)
	wait    int           // steps before the next decrease may come
	last    time.Duration // the previous step's queueing delay
}

// Step takes one probe's RTT (0: lost), the class's measured rate over
// the last step (bytes/s) and whether the yield holds it now; it returns
// the rate to set (0: not policed).
//
// Above the target the rate falls in proportion to the excess (at most by
// half), at most once per probe round trip (the last decrease must have
// had time to show); below it grows by a share of the link's rate, as the
// decreases estimated it, scaled by the room left under the target, up to
// a quarter above it. What the class sends is not a bound: a
// congestion-controlled sender backs off after the policer's drops and
// must find the room again.
//
// The link's rate at a decrease is what the class sent less what the
// queue grew by over the last step (a queue growing by g seconds per
// second is fed at (1 + g) × the link's rate; g at most 3): an
// unresponsive sender at twice the link, unpoliced until the first
// queue, is not taken for a link twice as fast, and a rate above the link
// does not raise the estimate by its excess. A queue's growth also reads
// a responsive sender's bursts (quic-go's slow start) as a slower link, so
// the estimate is also raised from below: a class held at its rate (it
// offers at least that) while the queue stays under a quarter of the
// target shows a link at least that fast.
func (s *State) Step(rtt time.Duration, measured uint64, held bool) uint64 {
	qd, ok := s.observe(rtt)
	s.Queue = qd
	if s.wait > 0 {
		s.wait--
	}
	last := s.last
	if ok {
		s.last = qd
	}
	if held || !ok {
		return s.Rate
	}
	switch {
	case qd > s.Rule.Target && s.wait == 0:
		f := max(minFactor, 1-decreaseK*(float64(qd)/float64(s.Rule.Target)-1))
		from := measured
		if s.Rate != 0 {
			from = min(s.Rate, measured)
		}
		s.peak = max(s.peak, linkRate(from, qd-last, s.Rule.Interval))
		s.Rate = max(s.Rule.Floor, uint64(float64(from)*f))
		s.wait = 1 + int((s.Base+qd)/s.Rule.Interval)
	case qd <= s.Rule.Target && s.Rate != 0:
		if measured >= s.Rate && qd <= s.Rule.Target/4 {
			s.peak = max(s.peak, s.Rate)
		}
		up := float64(s.peak) * gain * (1 - float64(qd)/float64(s.Rule.Target))
		s.Rate = max(s.Rule.Floor, min(s.Rate+uint64(up)+1, uint64(headroom*float64(s.peak))))
	}
	return s.Rate
}

// linkRate is the rate a queue fed at sent (bytes/s) drains at when it
// grew by grew over interval: sent / (1 + growth per second), the growth
// taken between 0 and maxGrowth.
func linkRate(sent uint64, grew, interval time.Duration) uint64 {
	g := min(maxGrowth, max(0, float64(grew)/float64(interval)))
	return uint64(float64(sent) / (1 + g))
}

// observe folds a sample into the base and current delay; a lost probe
// reads as twice the target (a probe is lost behind a full queue).
func (s *State) observe(rtt time.Duration) (time.Duration, bool) {
	if rtt <= 0 {
		s.Lost++
		if s.Samples == 0 {
			return 0, false
		}
		return 2 * s.Rule.Target, true
	}
	s.Samples++
	if s.Base == 0 || rtt < s.Base {
		s.Base = rtt
	}
	s.recent = append(s.recent, rtt)
	if len(s.recent) > currentSpan {
		s.recent = s.recent[1:]
	}
	cur := s.recent[0]
	for _, r := range s.recent[1:] {
		cur = min(cur, r)
	}
	return cur - s.Base, true
}
