// Package bgudp holds the background lane's non-TCP traffic (QUIC, other
// UDP) to a queueing-delay target at whatever bottleneck it crosses, in
// both directions. The classifier polices the class per interface and
// direction (internal/bpf/classifier/bgclass.h) and holds it at the
// yield's rate while the foreground is active; this package steers the
// class's rate from a delay signal, on the interface's shapers (the
// upload's HTB class, the arrivals' IFB: shape.go) or, where there are
// none, on the policer: ICMP echo probes to the class's
// peers on the interface, sent only while such traffic flows (the
// classifier's event wakes the controller; it sleeps otherwise). With no
// peer answering, the class is held at the floor.
//
// rule.go is the controller's rule, free of I/O (docs/background.md,
// "Background QUIC and UDP").
package bgudp

import (
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/experiments"
)

// Rule is the controller's constants.
type Rule struct {
	Target   time.Duration // queueing delay to keep (the policy's background target)
	Interval time.Duration // one probe round and one step
	Floor    uint64        // lowest rate, bytes/s, at most 1/FloorShare of the link estimate (State.Floor)
	// Policy is the policy's target: Target while the class is alone, a
	// share of it beside a present foreground (the episode sets Target)
	Policy time.Duration
	// Off leaves parts of the rule off (experiments, to pair each with
	// what it replaced; the zero value is the rule)
	Off experiments.BgUDPOff
}

// slopeUnit is the queue above the target that the decrease answers with
// decreaseK of the rate: the target alone, the policy's target beside a
// present foreground (the slope the decrease has above the policy's
// target, as LEDBAT++'s share rule keeps it). The share target, 2.5 ms
// at the default, is two packets at 10 Mbit/s, and quic-go's bursts of
// up to 10 packets lift samples 3-8 ms above it with the link not full:
// at the share target's slope each such sample cut the rate by a
// quarter or more, the class sat at 0.47-0.71 (mean 0.63) of the capacity the
// foreground left idle, and its link estimate, whose standing-queue test
// (a quarter of the share target) that load meets, read the class's own
// rate (docs/background.md, "Background QUIC and UDP").
func (r Rule) slopeUnit() time.Duration {
	if r.Off.Slope || r.Policy < r.Target {
		return r.Target
	}
	return r.Policy
}

// emptyAt says whether setting rate after before empties the policer's
// bucket: at every decrease (from none too), so that it holds the class
// at the new rate from the next packet. A bucket left full (25 ms of the
// old rate) would pass a sender a little above the new rate for its
// depth ÷ the excess (about 200 ms after a cut of an eighth, longer than
// the wait between decreases): a second decrease would come before the
// first bites, and a loss-based sender (quic-go's CUBIC) would meet both
// and cut its own window on top, the link idle for half a second in
// every cycle (docs/background.md, "Background QUIC and UDP").
func (r Rule) emptyAt(before, rate uint64) bool {
	return !r.Off.KeepTokens && rate != 0 && (before == 0 || rate < before)
}

// DefaultRule is the rule at a target.
func DefaultRule(target time.Duration) Rule {
	return Rule{Target: target, Interval: 50 * time.Millisecond, Floor: 25_000, Policy: target}
}

const (
	gain      = 0.05 // growth per step at no queue, of the link's rate (0.5 -> 1 in 10 steps)
	decreaseK = 0.25 // rate × (1 − K·(qd/target − 1)) above the target
	minFactor = 0.5  // at most halved per decrease
	headroom  = 1.25 // the rate stays within this of the link's rate
	// shapedHeadroom is headroom for a shaped class: the shaper's rate is
	// what reaches the bottleneck whenever the sender keeps the shaper
	// busy (an unresponsive sender always does), so any excess over the
	// link's rate is the bottleneck's queue's growth: 1.25 grew it by
	// 0.2 s/s, 30 ms over a decrease's wait, +27 to +32 ms at the probe's
	// p95 beside an unresponsive UDP upload (docs/background.md,
	// "Background QUIC and UDP").
	shapedHeadroom = 1.05
	// ownLanding and drainTime: a shaped class that drives the queue
	// (State.heldToLink) is held at ownLanding of its measured link less
	// the rate that drains the queue it sees in drainTime. Bounded by the
	// measurement and answering only a queue over the target, an
	// unresponsive UDP upload kept the target as a standing queue (the
	// probe's p50 5.5-9 ms, p95 +8.6 to +10.9 ms); at 1.05 of a link
	// estimate that a bottleneck's token bucket had lifted (a window with
	// no queue read up to 1.06 of a 10 Mbit/s TBF with a 15 KB bucket),
	// +14 ms (docs/background.md, "Background QUIC and UDP")
	ownLanding = 0.98
	drainTime  = 100 * time.Millisecond
	// ownShare: the class's queue is its own where the interface sent at
	// most this much more than the class over the window
	ownShare = 1.1
	// arrivalsHeadroom: shaped arrivals stay under their measured link
	// (a share of its busiest measurement): above it the remote queue
	// grows, and a lowered rate drains it only by the difference, the
	// remote sender meeting no drop to cut its window at. Beside a UDP
	// call the probe's p95 over the call alone was +16 to +74 ms at
	// 1.05 and 1.0, +1.2 to +11.7 ms at 0.95; alone the download keeps
	// 0.78-0.88 of the link at 0.95 against 0.90-0.93 (docs/background.md,
	// "Background QUIC and UDP")
	arrivalsHeadroom = 0.95
	beyondLink       = 0.25 // the growth's share above the link's rate
	fastStart        = 0.25 // growth per step before the link's rate is known, of the rate
	estimateSteps    = 4    // the link estimate's window, in steps
	estimateKeep     = 40   // the link's rate is the highest estimate of this many steps
	maxGrowth        = 3    // a queue's growth (s/s) an estimate believes: a sender at 4× the link
)

// Input is one step's observation.
type Input struct {
	Signal bool          // a delay sample (or a lost probe) came this step
	Queue  time.Duration // the current queueing delay (the filtered one)
	Raw    time.Duration // the step's newest sample's queueing delay, unfiltered
	// Age is how long before the step's end Raw's probe left: its queue
	// stood at the bottleneck then, not at the step's end (0: not known)
	Age     time.Duration
	Base    time.Duration // the base delay of the path Queue is on
	Spoke   int           // the peers whose samples came this step (Queue is the largest of theirs)
	Least   time.Duration // the least of those peers' queues: the one every path of theirs shows
	Other   time.Duration // the other direction's queue taken off Queue, Raw and Least (ownDirection)
	Offered uint64        // the class's bytes/s over the step, before the policer
	Passed  uint64        // what the policer let through, bytes/s
	// AllLanes is the interface's bytes/s in the controlled direction,
	// every lane's (tx_bytes up, rx_bytes down; 0: not known): what
	// crossed the bottleneck the class shares
	AllLanes uint64
	Arrived  bool          // the controlled direction is arrivals: they crossed the bottleneck already
	Held     bool          // the yield holds the class now
	Quiet    bool          // a foreground sent recently and is quiet now (yield.Window.Quiet: between its bursts)
	Shaped   bool          // the step's upload left by the shaper (its excess waited in it)
	Backlog  uint64        // the shaper's bytes waiting at the step's end
	Dropped  bool          // the shaper dropped some of the class's packets in the step
	Dt       time.Duration // the step's length
}

// State is one interface's controller between steps.
type State struct {
	Rule  Rule
	Rate  uint64        // bytes/s; 0: not policed (until the first queue)
	Queue time.Duration // the last step's queueing delay estimate
	Link  uint64        // the link's rate as estimated (bytes/s, 0: not yet)
	// UnderLink says the last step held the class under its measured link
	// (heldToLink), not steered by the target
	UnderLink bool
	wait      int // steps before the next decrease may come
	// undropped is the steps since the shaper last dropped the class's
	// packets (or since the episode began)
	undropped int
	last      time.Duration // the previous step's queueing delay
	win       window        // the last estimateSteps+1 steps, for the link estimate
	sent      sentLog       // the class's bytes of the last sentSteps steps, for an upload's
	ests      []estimate    // the last estimateKeep steps' estimates
	// measured: the highest window's measurement of the last
	// estimateKeep steps (0: none; Link may be a lower bound above it)
	measured uint64
	// lastMeasured: the last measured it held, kept when it ages out
	// (0: never measured): where the link was last seen (known)
	lastMeasured uint64
}

// Step takes one step's observation and returns the rate to set (0: not
// policed).
//
// A shaped upload held to its link (heldToLink) is set to ownLanding of
// its measured link less what drains its queue in drainTime. Otherwise,
// above the target the rate falls in proportion to the excess (at most by
// half), at most once per probe round trip and not while the queue is
// already falling (the last decrease is draining it); below it the rate
// grows by a share of the link's rate scaled by the room left under the
// target (a quarter of that above the link's rate), up to a quarter above
// it. What the class sends is not a bound: a congestion-controlled
// sender backs off after the policer's drops and must find the room
// again.
//
// The link's rate is measured over windows of estimateSteps steps in
// which the queue never emptied (every sample at least a quarter of the
// target): then the bottleneck sent all the time, at the rate every
// lane's bytes crossed it (the interface's counter, where read,
// winStep.carried): what arrived (downloads), or what left while the
// samples' probes stood in the queue less what the queue grew by
// (uploads, alignedRate: a queue growing by g s/s is fed at (1 + g) ×
// the link's rate). The window spans several steps so that a burst the
// queue shows a step late is not read as a slow link. A step in which
// the policer dropped and no queue formed shows a link at least as fast
// as what passed (a lower bound: the growth is not slowed above it). The
// link's rate is the highest estimate of the last estimateKeep steps
// (the last one when none came).
func (s *State) Step(in Input) uint64 {
	s.observeLink(in)
	s.undropped++
	if in.Dropped {
		s.undropped = 0
	}
	s.UnderLink = !in.Held && s.heldToLink(in)
	if in.Signal {
		s.Queue = in.Queue
	}
	if s.wait > 0 {
		s.wait--
	}
	last := s.last
	if in.Signal {
		s.last = in.Queue
	}
	if in.Held || !in.Signal {
		return s.Rate
	}
	qd, target := in.Queue, s.Rule.Target
	switch {
	case s.UnderLink:
		s.Rate = max(s.Floor(), uint64(float64(s.measured)*max(minFactor, ownLanding-float64(qd)/float64(drainTime))))
	case qd > target && s.wait == 0 && (qd >= last || s.Rate == 0):
		f := max(minFactor, 1-decreaseK*float64(qd-target)/float64(s.Rule.slopeUnit()))
		// what the class sent of late (the window's), not one step's: a
		// step a millisecond long passed nothing, and a decrease from it
		// took a class at 12 Mbit/s to the floor
		from := s.win.rate()
		if s.Rate != 0 {
			from = min(s.Rate, max(from, s.Link))
		}
		if s.Link != 0 {
			from = min(from, uint64(s.headroom(in)*float64(s.Link)))
		}
		floor := s.Floor()
		if s.Rate == 0 {
			// the policer's first rate is at most what the class sent: a
			// floor above it (before a link estimate the rule's 25 KB/s,
			// the whole of a 0.2 Mbit/s link) is no decrease, and the
			// queue quic-go's slow start left stood 2-3 s
			floor = min(floor, from)
		}
		s.Rate = max(floor, uint64(float64(from)*f))
		s.wait = 2 + int((in.Base+qd)/s.Rule.Interval) // the queue answers a step late, the current delay a step after
	case qd <= target && s.Rate != 0:
		ref := float64(s.Link)
		if ref == 0 {
			ref = float64(s.Rate)
		}
		acc := s.account(in)
		room := max(ref-acc.others, float64(s.Rate)) // what the other lanes leave of the link
		up := room * gain * (1 - float64(qd)/float64(target))
		if s.Link == 0 && qd <= target/4 && in.Offered > in.Passed {
			up = float64(s.Rate) * fastStart // no estimate yet, no queue, the policer drops: find the link
		}
		if acc.beyond(s.Rate, s.Rule.shapedShare(in)) {
			up *= beyondLink
		}
		bound := uint64(s.headroom(in) * ref)
		if room := acc.room(in.Shaped, s.Rule.Off.Room); room != 0 {
			bound = min(bound, room)
		}
		if s.Rate > bound {
			bound = s.Rate // a rate the estimate does not explain is kept, not cut
		}
		next := s.Rate + uint64(up) + 1
		if s.Rule.betweenBursts(in, qd, s.measured) {
			next = max(next, min(bound, s.measured))
		}
		s.Rate = max(s.Floor(), min(next, bound))
	}
	return s.Rate
}

// betweenBursts says whether the step's class goes back to the link at
// once (its measurement, within the room the other lanes leave and the
// headroom) instead of growing a share of it a step: a foreground that sent
// recently is quiet (a video between its segments, between page loads),
// the queue is down to a quarter of the class's own target, and the link
// was measured in the last estimateKeep steps, as LEDBAT++ slow-starts
// to the window the link carries there (ledbat.c's lb_link_window).
// Grown 5 % of the link a step from where a segment's queue had cut it,
// the class took 0.75 s of a 1.2 s gap to come back, 0.43 of the
// capacity a video downloading 2 s segments at 40 % left idle
// (docs/background.md, "Background QUIC and UDP").
func (r Rule) betweenBursts(in Input, qd time.Duration, measured uint64) bool {
	return in.Quiet && !r.Off.Bursts && measured != 0 && qd <= r.Policy/4
}

// known is the link's rate as known, above which the growth is slowed
// (beyondLink): its busiest measurement of the last estimateKeep steps,
// or with none the last one however old (0: never measured). Unslowed
// once its measurement aged out, a shaped download grew 5 % of the link
// a step to 1.25 of a lower bound at 0.9 of the link, and the remote
// queue stood 63-79 ms (a probe's p95 +35 ms beside an ngtcp2 download
// on a loaded machine). A lower bound is not a bound to slow at: it is
// what passed, so the rate is at it whenever the policer drops, and
// slowed above it an unresponsive UDP upload held low by a loaded
// machine's jitter regained 1.25 % a step, 16 % of the link after 4 s.
func (s *State) known() uint64 {
	if s.measured != 0 {
		return s.measured
	}
	return s.lastMeasured
}

// shapedShare says whether the step is a shaped upload's beside a
// present foreground (the share target): there the shaper's output is
// smooth, the bottleneck's queue follows its rate alone, and a window
// whose samples stayed under the share target while the shaper held the
// class shows a link at least as fast as what passed; the growth above
// the window's measurement is not slowed. Beside a foreground the
// measurement is the class's own rate (the standing-queue test is met by
// the foreground's queue), so after a hold that left the rate at the
// floor the slowed growth kept the class at a third of the idle
// capacity for 10 s and more (docs/background.md, "Background QUIC and
// UDP").
func (r Rule) shapedShare(in Input) bool {
	return in.Shaped && r.Target < r.Policy
}

// headroom is how far above the link's rate the step's rate may go:
// for a shaped class whose link's rate was measured with a standing queue
// in the last estimateKeep steps (a lower bound alone leaves headroom, so
// that the class finds the link again from its floor), that measurement
// where the class drives the queue (drives: the other lanes' bytes do not
// lift it, its sender fills the shaper), else shapedHeadroom of the
// estimate; arrivalsHeadroom of the
// measurement for its shaped arrivals.
func (s *State) headroom(in Input) float64 {
	switch {
	case in.Shaped && in.Arrived && s.measured != 0 && s.Link != 0:
		return arrivalsHeadroom * float64(s.measured) / float64(s.Link)
	case in.Shaped && s.measured != 0:
		return shapedHeadroom
	}
	return headroom
}

// heldToLink says whether the step's class is held under its measured
// link (ownLanding, drainTime) instead of steered by the target: a shaped
// upload that drives the queue (drives), measured in the last
// estimateKeep steps, whose shaper dropped none of its packets over as
// many: its sender waits for the shaper (an unresponsive one, blocked on
// its socket), so what the shaper passes is what reaches the bottleneck,
// the queue is its own, and the rate that keeps the link busy with no
// queue is known. The class finds the link again when the measurement
// ages out. A sender that meets the shaper's drops answers them (quic-go,
// dropped every 14-16 steps) and needs the queue to keep the link busy
// through its window's cuts: held so, quic-go's upload kept 0.86-0.90 of
// the link against 0.92-0.95.
func (s *State) heldToLink(in Input) bool {
	return in.Shaped && !in.Arrived && s.measured != 0 && s.undropped >= estimateKeep && s.drives()
}

// Blind holds the class at the floor: no delay signal tells its queue.
func (s *State) Blind() uint64 {
	s.Rate = s.Floor()
	return s.Rate
}

// FloorShare: the class's floor, its yield's rate and its probes each
// take at most 1/FloorShare of the link estimate. A fixed 200 kbit/s is
// the whole of a 0.2 Mbit/s link and 40 % of a 0.5 Mbit/s one: a floor
// that large keeps a queue the controller cannot take away, and the
// probes behind it time out.
const FloorShare = 16

// Floor is the class's lowest rate (bytes/s): the rule's, at most
// 1/FloorShare of the link estimate where there is one.
func (s *State) Floor() uint64 {
	if s.Link == 0 {
		return s.Rule.Floor
	}
	return max(1, min(s.Rule.Floor, s.Link/FloorShare))
}

// ProbeBudget is the rate (bytes/s, requests and replies) the class's
// probes may take: 1/FloorShare of the link estimate, or of measured
// (the class's own rate, bytes/s) where that is larger or there is no
// estimate yet: the link carries at least what the class moves.
func (s *State) ProbeBudget(measured uint64) uint64 {
	return max(s.Link, measured) / FloorShare
}

// observeLink adds the step to the link estimate's window and updates
// the estimate.
func (s *State) observeLink(in Input) {
	bytes := float64(in.Passed)
	if in.Arrived {
		bytes = float64(in.Offered)
	}
	s.win.add(winStep{bytes: bytes * in.Dt.Seconds(), all: float64(in.AllLanes) * in.Dt.Seconds(), offered: float64(in.Offered) * in.Dt.Seconds(),
		rate: float64(s.Rate) * in.Dt.Seconds(), dt: in.Dt, raw: in.Raw, age: in.Age, ok: in.Signal, backlog: in.Backlog})
	every := s.account(in).every
	s.sent.add(s.win[len(s.win)-1].carried(every), in.Dt)
	e := estimate{rate: linkEstimate(s.win, s.sent, s.Rule.busy(every), in.Arrived, every), busy: true}
	if e.rate == 0 && !in.Arrived && in.Shaped && s.drives() {
		e.rate = stepEstimate(s.win, s.sent, s.Rule.Target/4)
	}
	if e.rate == 0 {
		noQueue := s.Rule.Target / 4
		if s.Rule.shapedShare(in) {
			noQueue = s.Rule.Target
		}
		e = estimate{rate: lowerBound(s.win, noQueue, every)}
	}
	s.ests = append(s.ests, e)
	if len(s.ests) > estimateKeep {
		s.ests = s.ests[1:]
	}
	var best, busy uint64
	for _, e := range s.ests {
		best = max(best, e.rate)
		if e.busy {
			busy = max(busy, e.rate)
		}
	}
	if best != 0 {
		s.Link, s.measured = best, busy
	}
	if busy != 0 {
		s.lastMeasured = busy
	}
}

// estimate is one step's estimate of the link's rate.
type estimate struct {
	rate uint64 // bytes/s, 0: none
	busy bool   // from a window with a standing queue (else: a lower bound)
}

// linkEstimate is the bottleneck's rate over the window's steps after its
// first (bytes/s; arrivals: every lane's where counted), or 0 unless the
// queue stayed at least busy at every step's end, the first's included:
// as the samples around a step show it (winStep.least), and for an upload
// its first and last steps samples (its growth is read from them). An
// upload whose every step had to be a sample was never measured beside a
// peer silent to echo, whose version probes answer every other step: its
// growth before an estimate (a quarter of its rate a step) took it to
// 12-22 Mbit/s on a 10 Mbit/s link, the probe's p95 +39 to +45 ms.
func linkEstimate(win []winStep, sent sentLog, busy time.Duration, arrived, every bool) uint64 {
	if len(win) < estimateSteps+1 {
		return 0
	}
	var bytes float64
	var span time.Duration
	for i, w := range win {
		end := i == 0 || i == len(win)-1
		if w.least < busy || !arrived && end && (!w.ok || w.raw < busy) {
			return 0
		}
		if i > 0 {
			bytes += w.carried(every)
			span += w.dt
		}
	}
	if span <= 0 {
		return 0
	}
	if arrived {
		return uint64(bytes / span.Seconds())
	}
	return alignedRate(sent, win[0], win[len(win)-1], span)
}

// alignedRate is the bottleneck's rate from an upload's samples at a and
// b, span apart: each shows the queue as it stood when its probe left
// (its age before its step's end), so the bytes that fed the growth
// between them are those sent between those two moments, not in the
// span; 0 where the log does not reach back. Read in the span, a queue
// of 320 ms that an unpoliced start built at 20 Mbit/s, seen while the
// class's decreases had taken it to 5.2 Mbit/s, read a 10 Mbit/s link as
// 3.4-4.9 Mbit/s.
func alignedRate(sent sentLog, a, b winStep, span time.Duration) uint64 {
	from, to := span+a.age, b.age
	if from <= to {
		return 0
	}
	bytes, ok := sent.between(from, to)
	if !ok {
		return 0
	}
	return linkRate(bytes/(from-to).Seconds(), b.raw-a.raw, from-to)
}

// stepEstimate is the bottleneck's rate over the window's last step
// (bytes/s) for a shaped upload (its output smooth: an unshaped sender's
// burst shows in the queue a step late, and a step read 1.33 of the
// link) when the queue stood at least busy at both its
// ends and grew (at most what passed: a step's fall may be a burst's
// tail, read a step late), else 0. A controller that keeps the queue
// under busy meets the window's test only when it overshoots; a step
// whose queue grew is measured there, and a bottleneck's token bucket
// cannot lift it as it lifts a lower bound.
func stepEstimate(win []winStep, sent sentLog, busy time.Duration) uint64 {
	if len(win) < 2 {
		return 0
	}
	a, b := win[len(win)-2], win[len(win)-1]
	if !a.ok || !b.ok || a.raw < busy || b.raw < a.raw || b.dt <= 0 {
		return 0
	}
	return alignedRate(sent, a, b, b.dt)
}

// drives says whether the class alone drives the bottleneck's queue: over
// the link estimate's window the interface sent at most ownShare of what
// the class passed (the other lanes' part, counted where the interface's
// counter is read; not known, not so), and its sender kept the shaper's
// queue at least half full at every step's end, as a sender that does not
// answer its drops does (what the shaper passes is then what reaches the
// bottleneck). A sender that answers them (quic-go's CUBIC) sets its own
// pace: held within its measured link whenever its queue merely stood, it
// lost 10-25 points of the cellular traces alone, the measurements
// following their swings.
func (s *State) drives() bool {
	var class, sent float64
	for _, w := range s.win {
		if w.all == 0 || w.backlog*2 < uint64(datapath.BgShapeQueueLimit(uint64(w.rate/w.dt.Seconds()))) {
			return false
		}
		class, sent = class+w.bytes, sent+w.all
	}
	return len(s.win) > 0 && sent <= ownShare*class
}

// lowerBound is what passed over the window's steps after its first
// (bytes/s) when the policer held the class (it dropped over 5 % of what
// was offered, or the class offered at least 95 % of the rate) and no
// queue formed (every sample below noQueue): the link takes at least
// that; 0 otherwise.
func lowerBound(win []winStep, noQueue time.Duration, every bool) uint64 {
	if len(win) < estimateSteps+1 {
		return 0
	}
	var passed, offered, rate, carried float64
	var span time.Duration
	for i, w := range win {
		if !w.ok || w.raw > noQueue || i > 0 && w.rate == 0 {
			return 0
		}
		if i > 0 {
			passed, offered, rate, span = passed+w.bytes, offered+w.offered, rate+w.rate, span+w.dt
			carried += w.carried(every)
		}
	}
	if span <= 0 || offered <= passed*1.05 && offered < rate*0.95 {
		return 0
	}
	return uint64(carried / span.Seconds())
}

// carried is what crossed the bottleneck in the step: every lane's bytes
// where the interface's counter is read and every is set, else the
// class's. Beside a foreground that keeps the queue standing the
// class's own arrivals read its own rate as the link, and the arrivals'
// headroom held it under 0.95 of that, step after step, down to the floor
// (docs/background.md, "Background QUIC and UDP").
func (w winStep) carried(every bool) float64 {
	if every {
		return max(w.bytes, w.all)
	}
	return w.bytes
}

// linkRate is the rate a queue fed at sent (bytes/s) drains at when it
// grew by grew over span: sent / (1 + growth per second), the growth
// taken between −1/2 and maxGrowth.
func linkRate(sent float64, grew, span time.Duration) uint64 {
	g := min(maxGrowth, max(-0.5, float64(grew)/float64(span)))
	return uint64(sent / (1 + g))
}

// busy is the queue every step of a window must show for the window to
// measure the link: a quarter of the target; where the window counts
// every lane's arrivals, a quarter of the policy's. Beside a present
// foreground a quarter of the share target (0.6 ms) is what a
// foreground's own bursts keep; a window that met it read every lane's
// arrivals, less than the link, and the room bound would hold the class
// at its own rate (TestArrivalsBesideAStandingQueueMeasureEveryLane).
func (r Rule) busy(every bool) time.Duration {
	if every && !r.Off.Room {
		return max(r.Target, r.Policy) / 4
	}
	return r.Target / 4
}
