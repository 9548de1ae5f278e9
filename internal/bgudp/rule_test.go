package bgudp

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

var testPeer = netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 0)

// fluidLink is a bottleneck of rate link (bytes/s) with a queue, probed by
// one peer's echo each step through delaySignal, as the episode does.
type fluidLink struct {
	link  float64
	base  time.Duration
	queue float64 // bytes
	sig   *delaySignal
	s     *State
}

func newFluid(link float64) *fluidLink {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	f := &fluidLink{link: link, base: 20 * time.Millisecond, sig: newDelaySignal(s.Rule.Target), s: s}
	f.step(0) // the episode's first echo, before the class's traffic builds a queue
	return f
}

// step sends offer (bytes/s) for one step through the policer and the
// queue, then steps the rule on the echo; it returns what the link carried
// (share of the link) and the queue's delay.
func (f *fluidLink) step(offer float64) (float64, time.Duration) {
	pass, carried := f.flow(offer)
	qd := f.delay()
	in := Input{Offered: uint64(offer), Passed: uint64(pass), Dt: f.s.Rule.Interval}
	f.sig.step(map[netip.AddrPort]peerResult{testPeer: {rtt: f.base + qd}}, &in)
	f.s.Step(in)
	return carried, qd
}

// flow sends offer (bytes/s) for one step through the policer into the
// queue; it returns what passed and what the link carried (its share).
func (f *fluidLink) flow(offer float64) (pass, carried float64) {
	dt := f.s.Rule.Interval
	pass, carried = offer, 1.0
	if f.s.Rate != 0 {
		pass = min(offer, float64(f.s.Rate))
	}
	f.queue += (pass - f.link) * dt.Seconds()
	if f.queue < 0 {
		carried, f.queue = 1+f.queue/(f.link*dt.Seconds()), 0
	}
	return pass, carried
}

// delay is the queue's delay now.
func (f *fluidLink) delay() time.Duration {
	return time.Duration(f.queue / f.link * float64(time.Second))
}

func TestRuleHoldsTheQueueNearTheTarget(t *testing.T) {
	f := newFluid(1.25e6)
	var maxQ time.Duration
	used := 0.0
	for i := range 600 {
		offer := 2 * f.link // a sender that fills any buffer
		c, qd := f.step(offer)
		if i >= 300 {
			maxQ, used = max(maxQ, qd), used+c/300
		}
	}
	t.Logf("queue at most %v over the second half, link used %.0f%%, rate %d B/s, link estimated %d B/s", maxQ, 100*used, f.s.Rate, f.s.Link)
	if maxQ > 25*time.Millisecond {
		t.Errorf("queue reached %v, want <= 25ms", maxQ)
	}
	if used < 0.9 {
		t.Errorf("link used %.0f%%, want >= 90%%", 100*used)
	}
}

func TestRuleLeavesTrafficWithoutQueueAlone(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	for i := range 100 {
		in := Input{Signal: true, Queue: time.Duration(i%3) * time.Millisecond, Offered: 1e6, Passed: 1e6, Dt: 50 * time.Millisecond}
		if r := s.Step(in); r != 0 {
			t.Fatalf("step %d set rate %d with no queue", i, r)
		}
	}
}

func TestRuleFreezesWhileHeld(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	r := s.Step(Input{Signal: true, Queue: 60 * time.Millisecond, Offered: 1e6, Passed: 1e6, Dt: 50 * time.Millisecond})
	if r == 0 {
		t.Fatal("no rate after a queue")
	}
	for range 10 {
		if got := s.Step(Input{Signal: true, Offered: 25_000, Passed: 25_000, Held: true, Dt: 50 * time.Millisecond}); got != r {
			t.Fatalf("held: rate moved %d -> %d", r, got)
		}
	}
}

func TestSignalLostProbeIsQueue(t *testing.T) {
	d := newDelaySignal(10 * time.Millisecond)
	var in Input
	d.step(map[netip.AddrPort]peerResult{testPeer: {rtt: 20 * time.Millisecond}}, &in)
	d.step(map[netip.AddrPort]peerResult{testPeer: {lost: 1}}, &in)
	if !in.Signal || in.Queue != 20*time.Millisecond {
		t.Errorf("a lost echo of a peer that answered: signal %v, queue %v; want twice the target", in.Signal, in.Queue)
	}
}

// A peer that never answers gives no signal, and after blindSteps the
// episode is blind (held at the floor); another peer that answers keeps
// the signal, and the largest queue of the peers that answer is the
// class's.
func TestSignalSilentPeer(t *testing.T) {
	silent, other := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.2"), 0), netip.AddrPortFrom(netip.MustParseAddr("192.0.2.3"), 0)
	d := newDelaySignal(10 * time.Millisecond)
	var in Input
	blind := false
	for range blindSteps {
		blind = d.step(map[netip.AddrPort]peerResult{silent: {}}, &in)
		if in.Signal {
			t.Fatal("a silent peer gave a signal")
		}
	}
	if !blind {
		t.Error("no answer for blindSteps: not blind")
	}
	for i := range 2 * silentLosses {
		blind = d.step(map[netip.AddrPort]peerResult{silent: {lost: 1}, other: {rtt: time.Duration(20+i%2) * time.Millisecond}, testPeer: {rtt: 30 * time.Millisecond}}, &in)
	}
	if blind || !in.Signal {
		t.Errorf("two peers answer: blind %v, signal %v", blind, in.Signal)
	}
	d.step(map[netip.AddrPort]peerResult{silent: {lost: 1}, other: {rtt: 35 * time.Millisecond}, testPeer: {rtt: 30 * time.Millisecond}}, &in)
	d.step(map[netip.AddrPort]peerResult{silent: {lost: 1}, other: {rtt: 35 * time.Millisecond}, testPeer: {rtt: 30 * time.Millisecond}}, &in)
	if in.Queue != 15*time.Millisecond {
		t.Errorf("queue %v, want the largest peer's, 15ms", in.Queue)
	}
}

// An unresponsive sender above the link's rate, unpoliced until the first
// queue: the rule's link rate comes from the bottleneck's work over
// windows with a queue, not from what the sender offers.
func TestRuleEstimatesTheLinkNotTheSender(t *testing.T) {
	for _, x := range []float64{1.3, 2, 4} {
		f := newFluid(1.25e6)
		var maxQ time.Duration
		used := 0.0
		for i := range 600 {
			c, qd := f.step(x * f.link)
			if i >= 300 {
				maxQ, used = max(maxQ, qd), used+c/300
			}
		}
		t.Logf("sender at %.1f× the link: link estimated %d B/s, queue at most %v and %.0f%% of the link over the second half", x, f.s.Link, maxQ, 100*used)
		if e := float64(f.s.Link) / f.link; e < 0.9 || e > 1.1 {
			t.Errorf("sender at %.1f× the link: link estimated at %.2f× its rate", x, e)
		}
		if maxQ > 20*time.Millisecond {
			t.Errorf("sender at %.1f× the link: queue reached %v, want <= 20ms", x, maxQ)
		}
	}
}

func TestLinkRate(t *testing.T) {
	for _, c := range []struct {
		sent float64
		grew time.Duration
		want uint64
	}{
		{2_000_000, 0, 2_000_000},                       // no growth: all of it went through
		{2_000_000, -25 * time.Millisecond, 4_000_000},  // a queue draining: the link sent more than came
		{2_000_000, -100 * time.Millisecond, 4_000_000}, // at most twice
		{2_000_000, 50 * time.Millisecond, 1_000_000},   // grew by the span's length: twice the link
		{2_000_000, 1000 * time.Millisecond, 500_000},   // at most 4×
	} {
		if got := linkRate(c.sent, c.grew, 50*time.Millisecond); got != c.want {
			t.Errorf("linkRate(%v, %v) = %d, want %d", c.sent, c.grew, got, c.want)
		}
	}
}

// A responsive sender's start-up burst (a queue of 150 ms the echo shows
// a step late) does not hold the class below the link: the decreases
// stop while the queue drains, and the link's rate comes from windows
// with a standing queue.
func TestRuleRecoversFromAStartBurst(t *testing.T) {
	f := newFluid(1.25e6)
	f.queue = 0.15 * f.link
	used := 0.0
	for i := range 200 {
		c, _ := f.step(2 * f.link)
		if i >= 40 {
			used += c / 160
		}
	}
	t.Logf("link estimated %d B/s, %.0f%% of the link used from the 2nd second", f.s.Link, 100*used)
	if used < 0.9 {
		t.Errorf("%.0f%% of the link used from the 2nd second, want >= 90%%", 100*used)
	}
}

// The first cut (the class not policed yet) starts from what the class
// sent over the estimate's window, not from the step's own bytes: a
// bursty sender (iperf3 -u on a busy machine) may pass nothing in the
// 50 ms step whose sample shows the queue its bursts built. Before, that
// step cut the class to its floor, 25 KB/s, and at 5 % of an estimate no
// larger a step it stayed near there for seconds (0.03-0.06 of the link).
func TestRuleFirstCutFromTheWindowNotOneStep(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	dt := 50 * time.Millisecond
	for _, passed := range []uint64{2.5e6, 0, 2.5e6, 0} { // bursts and gaps, no queue yet
		s.Step(Input{Signal: true, Offered: passed, Passed: passed, Dt: dt})
	}
	r := s.Step(Input{Signal: true, Queue: 30 * time.Millisecond, Raw: 30 * time.Millisecond, Dt: dt})
	if r < 250_000 { // a tenth of the sender's 1.25 MB/s mean over the window
		t.Errorf("first cut to %d B/s from a sender at 1.25 MB/s over the window (floor %d)", r, s.Floor())
	}
}

// A Version Negotiation packet answers the probe whose destination ID it
// carries as its source ID; other packets answer nothing.
func TestVersionNegotiationMatch(t *testing.T) {
	vn := []byte{0x80 | 0x3f, 0, 0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 8, 0x12, 0x34, 0x00, 0x07, 9, 9, 9, 9, 0, 0, 0, 1}
	if seq, ok := vnSeq(vn, 0x1234); !ok || seq != 7 {
		t.Errorf("vnSeq = %d, %v; want 7, true", seq, ok)
	}
	if _, ok := vnSeq(vn, 0x4321); ok {
		t.Error("another prober's reply matched")
	}
	vn[4] = 1 // a version: a long-header packet, not a negotiation
	if _, ok := vnSeq(vn, 0x1234); ok {
		t.Error("a packet of version 1 matched")
	}
}

// An echo to each peer's address once; a peer silent to echo gets version
// probes to its flows' ports every vnEvery steps and an echo every
// icmpRetry.
func TestProbeTargets(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.4"), netip.MustParseAddr("192.0.2.5")
	peers := []netip.AddrPort{netip.AddrPortFrom(a, 443), netip.AddrPortFrom(a, 4433), netip.AddrPortFrom(b, 443)}
	d := newDelaySignal(10 * time.Millisecond)
	if got := probeTargets(1, peers, d); len(got) != 2 || got[0].Port() != 0 || got[1].Port() != 0 {
		t.Fatalf("targets %v, want one echo per address", got)
	}
	var in Input
	for range silentSteps {
		d.step(map[netip.AddrPort]peerResult{netip.AddrPortFrom(a, 0): {}, netip.AddrPortFrom(b, 0): {rtt: time.Millisecond}}, &in)
	}
	want := []netip.AddrPort{netip.AddrPortFrom(a, 443), netip.AddrPortFrom(a, 4433), netip.AddrPortFrom(b, 0)}
	if got := probeTargets(2, peers, d); !slices.Equal(got, want) {
		t.Errorf("step 2: targets %v, want %v", got, want)
	}
	if got := probeTargets(3, peers, d); !slices.Equal(got, want[2:]) {
		t.Errorf("step 3: targets %v, want %v", got, want[2:])
	}
	if got := probeTargets(icmpRetry, peers, d); !slices.Contains(got, netip.AddrPortFrom(a, 0)) {
		t.Errorf("step %d: targets %v, want the silent peer's echo retried", icmpRetry, got)
	}
}

// A link estimate far below the link (a window read during the start-up
// queue's drain) does not hold a sender that offers just the policer's
// rate (a congestion-controlled sender the policer limits, with no
// drops): a class held at its rate with no queue raises the estimate.
func TestRuleRecoversFromALowEstimate(t *testing.T) {
	f := newFluid(1.25e6)
	f.s.Rate, f.s.Link, f.s.measured = 600_000, 600_000, 600_000
	f.s.ests = []estimate{{rate: 600_000, busy: true}}
	used := 0.0
	for i := range 600 {
		c, _ := f.step(min(float64(f.s.Rate), 2*f.link))
		if i >= 300 {
			used += c / 300
		}
	}
	t.Logf("link estimated %d B/s, %.0f%% of the link used over the second half", f.s.Link, 100*used)
	if used < 0.9 {
		t.Errorf("%.0f%% of the link used over the second half, want >= 90%%", 100*used)
	}
}

func TestRuleEmptiesTheBucketAtADecrease(t *testing.T) {
	r := DefaultRule(10 * time.Millisecond)
	for _, c := range []struct {
		before, rate uint64
		want         bool
	}{{1_250_000, 1_100_000, true}, {0, 600_000, true}, {1_100_000, 1_150_000, false}, {1_100_000, 1_100_000, false}, {1_100_000, 0, false}} {
		if got := r.emptyAt(c.before, c.rate); got != c.want {
			t.Errorf("%d -> %d B/s: empties %v, want %v", c.before, c.rate, got, c.want)
		}
	}
	r.Off.KeepTokens = true
	if r.emptyAt(1_250_000, 1_100_000) {
		t.Error("Off.KeepTokens: a decrease emptied the bucket")
	}
}

// A download on a 0.2 Mbit/s link whose sender filled a 500 ms buffer:
// the probes wait behind the queue, so steps come with no sample. The
// link is known at the first sample (the probe stood in the queue
// through the steps before it) and the floor falls to its share at once,
// so the decreases take the class under the link; before, no window of
// five steps was all samples, the estimate came 1.1 s late, and the
// floor (the whole link) held the queue standing.
func TestLinkEstimateThroughAStandingQueueWithoutSamples(t *testing.T) {
	const link = 25_000.0
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	dt := s.Rule.Interval
	arrive := func(signal bool, raw time.Duration) {
		s.Step(Input{Signal: signal, Queue: raw, Raw: raw, Offered: link, Passed: link, AllLanes: link, Arrived: true, Dt: dt})
	}
	for range 6 { // the queue builds behind the first probe
		arrive(false, 0)
	}
	if s.Link != 0 {
		t.Fatalf("a link estimate (%d B/s) from steps without a sample", s.Link)
	}
	arrive(true, 400*time.Millisecond)
	if s.Link < 0.9*link || s.Link > 1.1*link {
		t.Fatalf("link %d B/s after the first sample, want %.0f", s.Link, link)
	}
	if s.Rate == 0 || float64(s.Rate) > link/2+1 {
		t.Fatalf("first decrease to %d B/s, want at most half the link (%.0f)", s.Rate, link/2)
	}
	if f := s.Floor(); float64(f) > link/FloorShare+1 {
		t.Fatalf("floor %d B/s, want at most 1/%d of the link", f, FloorShare)
	}
}

// A step with no sample keeps what the last sample showed less its own
// length (a queue drains no faster than its delay), and a sample that
// waited raw shows at least x of queue at the end of a step x before it.
func TestLeastQueueOfStepsWithoutSamples(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	dt := s.Rule.Interval
	step := func(signal bool, raw time.Duration) {
		s.Step(Input{Signal: signal, Queue: raw, Raw: raw, Arrived: true, Dt: dt})
	}
	step(false, 0)
	step(false, 0)
	step(true, 120*time.Millisecond) // the two before ended 50 and 100 ms before it
	step(false, 0)
	step(false, 0)
	var got []time.Duration
	for _, w := range s.win {
		got = append(got, w.least)
	}
	want := []time.Duration{100 * time.Millisecond, 50 * time.Millisecond, 120 * time.Millisecond, 70 * time.Millisecond, 20 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Fatalf("least queue at the steps' ends %v, want %v", got, want)
	}
}

// Above a link known only as a lower bound (its busy measurement aged
// out) the growth is slowed as above a measurement: unslowed, a shaped
// download grew 5 % of the link a step to 1.25 of it, and the remote
// queue stood 63-79 ms.
// Above the link last measured, aged out of the estimate's keep, the
// growth stays slowed.
func TestGrowthAboveAnAgedMeasurementIsSlowed(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: 1_100_000, Link: 1_000_000, lastMeasured: 1_000_000}
	before := s.Rate
	s.Step(Input{Signal: true, Arrived: true, Shaped: true, Offered: 1_100_000, Passed: 1_100_000, Dt: s.Rule.Interval})
	if up, most := s.Rate-before, uint64(beyondLink*gain*1_100_000)+1; up > most {
		t.Fatalf("grew %d B/s in a step above the link last measured, want at most %d", up, most)
	}
}

// An unresponsive upload held far under the link, with no queue and
// only lower bounds (what passed) for a link, finds the link again at
// the growth's full pace: 2 s from 1/8 of a 10 Mbit/s link to most of it.
func TestGrowthFromUnderALowerBoundIsNotSlowed(t *testing.T) {
	const link = 1_250_000
	s := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: link / 8, Link: link / 8, lastMeasured: link}
	for i := 0; i < 40; i++ {
		s.Step(Input{Signal: true, Queue: 100 * time.Microsecond, Raw: 100 * time.Microsecond,
			Offered: 2 * link, Passed: min(s.Rate, link), Shaped: true, Backlog: 60_000, Dt: s.Rule.Interval})
	}
	if s.Rate < link*3/4 {
		t.Fatalf("rate %d B/s after 2 s of no queue from %d, want >= %d", s.Rate, link/8, link*3/4)
	}
	never := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: link / 8, Link: link / 8}
	for i := 0; i < 40; i++ {
		never.Step(Input{Signal: true, Queue: 100 * time.Microsecond, Raw: 100 * time.Microsecond,
			Offered: 2 * link, Passed: min(never.Rate, link), Dt: never.Rule.Interval})
	}
	if never.Rate < link*3/4 {
		t.Fatalf("never measured: rate %d B/s after 2 s of no queue from %d, want >= %d", never.Rate, link/8, link*3/4)
	}
}

// A decrease starts from what the class passed over the window, not in
// its step: a step a millisecond long (a probe's answer right after the
// tick) passed nothing, and the class at 1.5 MB/s with no link estimate
// (a peer silent to echo: every other step a sample) fell to the floor.
func TestDecreaseFromAShortStep(t *testing.T) {
	s := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: 1_500_000}
	for range estimateSteps + 1 {
		s.Step(Input{Offered: 1_500_000, Passed: 1_500_000, Shaped: true, Dt: s.Rule.Interval})
	}
	s.Step(Input{Signal: true, Queue: 30 * time.Millisecond, Raw: 50 * time.Millisecond, Shaped: true, Dt: time.Millisecond})
	if s.Rate < 1_500_000*2/5 {
		t.Fatalf("rate %d B/s after a decrease at 30 ms of queue from 1.5 MB/s, want at least 2/5 of it (a decrease at most halves)", s.Rate)
	}
}

// An upload whose queue stands and grows is measured though every other
// step has no sample (a peer silent to echo: its version probes answer
// every other step): the window's ends are samples, the steps between
// bounded by them.
func TestUploadMeasuredWithASampleEveryOtherStep(t *testing.T) {
	const link = 1_250_000.0
	s := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: 1_500_000}
	dt := s.Rule.Interval
	q := 20 * time.Millisecond
	for i := range 12 {
		q += time.Duration(float64(dt) * (1_500_000/link - 1)) // fed at 1.2 × the link
		s.Step(Input{Signal: i%2 == 0, Queue: q, Raw: q, Offered: 1_500_000, Passed: 1_500_000, Shaped: true, Dt: dt})
	}
	if float64(s.measured) < 0.9*link || float64(s.measured) > 1.1*link {
		t.Fatalf("measured %d B/s with a sample every other step, want %.0f", s.measured, link)
	}
}

// lateLink is fluidLink with the echo's timing: a probe leaves at each
// step's start, waits behind the queue it meets, and its answer is read at
// the end of the step it comes back in, so a sample shows the queue of a
// queueing delay and more before.
type lateLink struct {
	fluidLink
	now    time.Duration
	probes []lateProbe
}

type lateProbe struct{ sent, rtt time.Duration }

func newLate(link float64) *lateLink {
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	return &lateLink{fluidLink: fluidLink{link: link, base: 20 * time.Millisecond, sig: newDelaySignal(s.Rule.Target), s: s}}
}

// step is fluidLink.step with the late samples.
func (f *lateLink) step(offer float64) (float64, time.Duration) {
	dt := f.s.Rule.Interval
	f.probes = append(f.probes, lateProbe{f.now, f.base + f.delay()})
	pass, carried := f.flow(offer)
	f.now += dt
	res := map[netip.AddrPort]peerResult{}
	for len(f.probes) > 0 && f.probes[0].sent+f.probes[0].rtt <= f.now {
		p := f.probes[0]
		res[testPeer] = peerResult{rtt: p.rtt, age: f.now - p.sent}
		f.probes = f.probes[1:]
	}
	in := Input{Offered: uint64(offer), Passed: uint64(pass), Dt: dt}
	f.sig.step(res, &in)
	f.s.Step(in)
	return carried, f.delay()
}

// An unresponsive sender at twice the link, unpoliced until its first
// queue, seen by samples that come back a queueing delay late: the link
// is read from the bytes sent while each sample's probe stood in the
// queue. Read from the bytes sent in the window, the decreases that
// followed the start's queue made the link look half as fast.
func TestLinkReadFromWhatFedTheQueue(t *testing.T) {
	f := newLate(1.25e6)
	var got []float64
	for range 120 {
		f.step(2 * f.link)
		if e := f.s.ests[len(f.s.ests)-1]; e.busy && e.rate != 0 {
			got = append(got, float64(e.rate)/f.link)
		}
	}
	t.Logf("each window's link ÷ the link's rate: %.2f", got)
	if len(got) == 0 {
		t.Fatal("no window measured the link")
	}
	for _, e := range got {
		if e < 0.8 || e > 1.25 {
			t.Errorf("a window read %.2f× the link's rate, want within 0.8-1.25", e)
		}
	}
}

// Between a foreground's bursts (a video's segments) the class goes back
// to its measured link in one step once the queue is down to a quarter of
// its target; with the foreground sending, or the queue higher, it grows
// a share of the link a step as before.
func TestBackToTheLinkBetweenBursts(t *testing.T) {
	const link = 1_250_000
	step := func(quiet bool, qd time.Duration) uint64 {
		s := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: link / 10, Link: link, measured: link}
		s.Step(Input{Signal: true, Queue: qd, Raw: qd, Quiet: quiet, Arrived: true, Shaped: true,
			Offered: link / 10, Passed: link / 10, Dt: s.Rule.Interval})
		return s.Rate
	}
	if r := step(true, time.Millisecond); r < link*9/10 || r > link {
		t.Errorf("quiet foreground, 1 ms of queue: rate %d B/s after a step from %d, want the measured link within its headroom (%d-%d)", r, link/10, link*9/10, link)
	}
	for _, c := range []struct {
		quiet bool
		qd    time.Duration
	}{{false, time.Millisecond}, {true, 5 * time.Millisecond}} {
		if r := step(c.quiet, c.qd); r > link/10+uint64(gain*link)+1 {
			t.Errorf("quiet %v, %v of queue: rate %d B/s after a step from %d, want a step's growth at most", c.quiet, c.qd, r, link/10)
		}
	}
}
