// Tests of the judged goodput (arrivals.go): the interface's counters bound
// a loss's catch-up, the bound is announced and summed over the group, and
// the drain signal judges by it: a catch-up in the drained queue's
// intervals no longer makes the queue after the drain look foreign, and a
// foreign queue still stops capping when it did.
package coop

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// fakeIface is an interface's counters the test moves.
type fakeIface struct {
	rx, tx uint64
	err    error
}

func (f *fakeIface) InterfaceBytes() (uint64, uint64, error) { return f.rx, f.tx, f.err }

func TestArrivalsBound(t *testing.T) {
	var a arrivals
	if got := a.bound(1000); got != 1000 {
		t.Errorf("before any reading: %v, want unbounded", got)
	}
	a.observe(5000, nil)
	if got := a.bound(1000); got != 1000 {
		t.Errorf("after one reading: %v, want unbounded", got)
	}
	a.observe(5600, nil)
	if got := a.bound(1000); got != 600 {
		t.Errorf("600 bytes counted: %v, want 600", got)
	}
	if got := a.bound(400); got != 400 {
		t.Errorf("below what was counted: %v, want 400", got)
	}
	a.observe(100, nil) // the interface was replaced
	if got := a.bound(1000); got != 1000 {
		t.Errorf("after a counter went back: %v, want unbounded", got)
	}
	a.observe(200, errors.New("no such device"))
	if got := a.bound(1000); got != 1000 {
		t.Errorf("after a failed read: %v, want unbounded", got)
	}
	for _, c := range []struct{ g, j float64 }{{19e6, 19e6}, {41.9e6, 19.3e6}, {10e6, 0}, {0, 0}, {10e6, 12e6}} {
		over := overOf(c.g, c.j)
		if got := judgedOf(c.g, over); math.Abs(got-math.Min(c.g, math.Max(c.j, c.g/256))) > c.g/256 {
			t.Errorf("goodput %.1f judged %.1f: over %d reads back %.2f", c.g/1e6, c.j/1e6, over, got/1e6)
		}
	}
}

// TestJudgedGoodputAnnounced: a host's download catch-up (in-order bytes
// held behind a hole, then released at once) is judged as what arrived on
// its interface; its announcement says how much of its goodput that took
// off, and a peer sums the judged goodput into the group's. The estimate's
// input is the unbounded goodput, as before.
func TestJudgedGoodputAnnounced(t *testing.T) {
	g := newGroup(t, 2, downConfig())
	a, b := g.nodes[0], g.nodes[1]
	ifa := &fakeIface{rx: 5 << 30}
	a.c.iface = ifa
	fa, fb := downloadFlow(100), downloadFlow(200)
	a.flows.set(fa)
	b.flows.set(fb)
	g.round()
	// bytes per 0.5 s: in order at a and b, and what arrived at a
	steps := []struct{ recv, rx, peer uint64 }{
		{625_000, 650_000, 625_000}, {625_000, 650_000, 625_000},
		{60_000, 650_000, 625_000},    // the hole: little in order, as much arrived
		{1_190_000, 650_000, 625_000}, // the catch-up
		{625_000, 650_000, 625_000},
	}
	for i, s := range steps {
		fa.BytesRecv += s.recv
		fb.BytesRecv += s.peer
		ifa.rx += s.rx
		a.flows.set(fa)
		b.flows.set(fb)
		g.round()
		if i != 3 {
			continue
		}
		if got, want := a.c.down.goodput, 19.04e6; math.Abs(got-want) > 0.01e6 {
			t.Errorf("catch-up: goodput %.2f Mbit/s, want the in-order %.2f", got/1e6, want/1e6)
		}
		if got, want := a.c.down.judgedGoodput, 10.4e6; math.Abs(got-want) > 0.01e6 {
			t.Errorf("catch-up: judged %.2f Mbit/s, want what arrived, %.2f", got/1e6, want/1e6)
		}
		ann := a.c.ownAnnouncement(g.clk.now())
		if got := judgedOf(float64(ann.DownGoodputKbit)*1000, ann.DownGoodputOver); math.Abs(got-10.4e6) > 0.1e6 {
			t.Errorf("announced judged goodput %.2f Mbit/s, want 10.4", got/1e6)
		}
	}
	// b's group, at the round after a's catch-up (a's announcement of it)
	// judged: its own 10 + a's 10 bounded; the estimate's input: 10 + 10
	in := b.c.down.est.input
	if in.judgedOrGoodput() > 1.01*in.goodput || in.goodput < 19e6 {
		t.Errorf("b's group: goodput %.2f, judged %.2f Mbit/s", in.goodput/1e6, in.judgedOrGoodput()/1e6)
	}
}

// catchUpRun is the lab's false fallback at 8 downloads (pair 3 of
// `lanes lab run coop --modes lanes --ap-rate estimate
// --direction down --hosts 2,8,16 --duration 40s`), replayed from host 1's
// estimator status (result.json, every 200 ms) at the controller's 0.5 s
// intervals: the group's slow start; the start's losses, in-order bytes
// held behind holes (9.7 Mbit/s at 1.44x); their catch-up (25.5 and 26.3,
// while the medium delivered 19.3 in every 200 ms and the interfaces
// counted that plus headers: judged 20.1), bounded by the estimator's
// catch-up rule but for 22.6 at 1.17x, startup's exit once settled,
// recorded as the best; the drain from it, and after it the queue that
// stays at 1.19-1.22x (the caps, from the same best, 1.2x above the
// medium) with the group delivering the medium, 19.1-19.5. after: the
// intervals after the drain's. judged: whether the samples carry the
// interfaces' bound (main: without). It returns the interval the fallback
// stopped capping (-1: none) and the drain's.
func catchUpRun(t *testing.T, judged bool, after []groupSample) (stopAt, drainAt int) {
	t.Helper()
	const arrived = 20.1e6 // 19.3 Mbit/s of payload and its headers
	seq := []groupSample{
		{goodput: 3.6e6, inflation: 1.00}, {goodput: 8.1e6, inflation: 1.04}, // pre-start
		{goodput: 10.9e6, inflation: 1.48},                  // the slow start's queue: startup
		{goodput: 9.7e6, inflation: 1.44},                   // losses: holes
		{goodput: 25.5e6, judged: arrived, inflation: 1.34}, // catch-up
		{goodput: 26.3e6, judged: arrived, inflation: 1.05},
		{goodput: 22.6e6, judged: arrived, inflation: 1.17}, // startup's exit: the best
		{goodput: 19.5e6, inflation: 1.19},                  // the drain
	}
	return replay(t, false, judged, append(seq, after...))
}

// replay feeds seq to a fresh estimator (the downlink's, or the uplink's:
// up) and safety fallback at 0.5 s intervals, clear of probe periods; it
// returns the interval the fallback stopped capping (-1: none) and the
// drain's. judged: whether the samples keep their judged goodput (main:
// without, the goodput).
func replay(t *testing.T, up, judged bool, seq []groupSample) (stopAt, drainAt int) {
	t.Helper()
	rules := estimatorRules{drainUnsettledStartup: true, catchUpToArrivals: judged}
	if up {
		rules = uplinkRules
	}
	e := newRateEstimator(120_000, 2e9, 500*time.Millisecond, rules)
	s := safety{cfg: DefaultConfig().Safety}
	if up {
		s.returningQueueLine = upBackInflation
	}
	stopAt, drainAt = -1, -1
	now := t0.Add(8500 * time.Millisecond) // no probe period before the fallback's
	for i, x := range seq {
		x.minRTT = 256 * time.Millisecond
		if up {
			x.windows = 30e6 // within the windows: recorded (startup doubled them)
		}
		if !judged {
			x.judged = 0
		}
		e.update(now, x)
		if e.drained && drainAt < 0 {
			drainAt = i
		}
		d, share, back := e.drainState()
		o := observation{flows: 8, inflation: x.inflation, queueDelay: time.Duration((x.inflation - 1) * float64(256*time.Millisecond)),
			inflightLow: true, drained: d, drainShare: share, drainBack: back}
		if ok, _ := s.update(now, o); !ok && stopAt < 0 {
			stopAt = i
		}
		now = now.Add(500 * time.Millisecond)
	}
	return stopAt, drainAt
}

// TestCatchUpQueueIsNotForeign: the queue that stays after a drain whose
// reference a catch-up raised does not stop capping when the reference is
// judged by what arrived (under main's reading it stopped capping 3
// intervals after the drain, on every host); a foreign queue after the
// same start still does, in the same interval as under main's reading.
func TestCatchUpQueueIsNotForeign(t *testing.T) {
	const air = 19.3e6
	stays := []groupSample{ // our caps' queue: the group delivers the medium
		{goodput: 19.1e6, inflation: 1.19}, {goodput: 19.5e6, inflation: 1.22}, {goodput: 19.5e6, inflation: 1.22}}
	for i := range 12 {
		stays = append(stays, groupSample{goodput: air * (1 + 0.01*float64(i%3-1)), inflation: 1.17 + 0.01*float64(i%5)})
	}
	stopMain, drainMain := catchUpRun(t, false, stays)
	if drainMain < 0 || stopMain-drainMain != DefaultConfig().Safety.DrainIntervals {
		t.Fatalf("main's reading: drain at %d, fallback at %d; the replay no longer shows the false fallback", drainMain, stopMain)
	}
	stop, drain := catchUpRun(t, true, stays)
	if drain != drainMain {
		t.Errorf("the drain moved: interval %d, main's %d (the estimate must not change)", drain, drainMain)
	}
	if stop >= 0 {
		t.Errorf("judged: a queue of our own caps after a catch-up stopped capping at interval %d (drain at %d)", stop, drain)
	}
	// coop-mixed: foreign flows grow into the room the lowered caps leave,
	// the lanes group delivering 0.90-0.75 of the medium within 1.5 s
	var foreign []groupSample
	for i, f := range []float64{0.9, 0.85, 0.8, 0.75, 0.72, 0.7, 0.7, 0.7} {
		foreign = append(foreign, groupSample{goodput: f * air, inflation: 1.25 + 0.02*float64(i)})
	}
	stopMain, _ = catchUpRun(t, false, foreign)
	stop, _ = catchUpRun(t, true, foreign)
	if stop < 0 || stop != stopMain {
		t.Errorf("judged: a foreign queue stopped capping at interval %d, main's reading at %d", stop, stopMain)
	}
}

// TestUploadCatchUpQueueIsNotForeign: a lab run's false fallback at 2
// uploads (`lanes lab run coop --modes lanes --ap-rate estimate --hosts 2
// --duration 40s`, A1), host 2's estimator status replayed: over a queue
// at 1.43x, an interval read 21.9 Mbit/s (its own catch-up of cumulative
// ACKs plus its peer's announced goodput; within the windows startup had
// doubled, so recorded) while the medium carried 19.3; the drain restarted
// from it, the queue emptied, came back at the uplink's line (1.11-1.14x,
// the trim stepping down) with the group at 19.1-20.3, 0.87-0.88 of 21.9:
// capping stopped on both hosts. Judged by what left the interfaces (20.1
// with headers) the group delivers 0.95 of its reference.
func TestUploadCatchUpQueueIsNotForeign(t *testing.T) {
	const left = 20.1e6
	seq := []groupSample{
		{goodput: 0.7e6, inflation: 1.04}, {goodput: 3.5e6, inflation: 1.18}, // pre-start, startup
		{goodput: 4.9e6, inflation: 1.22}, {goodput: 10.9e6, inflation: 1.36}, {goodput: 13.0e6, inflation: 1.32},
		{goodput: 16.5e6, inflation: 1.32}, {goodput: 19.8e6, inflation: 1.00}, {goodput: 12.1e6, inflation: 1.01},
		{goodput: 11.9e6, inflation: 1.03}, {goodput: 13.7e6, inflation: 1.21}, // cruise
		{goodput: 21.9e6, judged: left, inflation: 1.43}, {goodput: 20.5e6, judged: left, inflation: 1.45}, // catch-up; the drain
		{goodput: 11.0e6, inflation: 1.02}, {goodput: 11.4e6, inflation: 1.05},
		{goodput: 20.3e6, inflation: 1.11}, {goodput: 18.5e6, inflation: 1.14}, {goodput: 20.0e6, inflation: 1.14},
	}
	stays := slices.Clone(seq)
	for i := range 8 {
		stays = append(stays, groupSample{goodput: 19.1e6 + 0.1e6*float64(i%2), inflation: 1.12})
	}
	stopMain, drainMain := replay(t, true, false, stays)
	if drainMain < 0 || stopMain < 0 {
		t.Fatalf("main's reading: drain at %d, fallback at %d; the replay no longer shows the false fallback", drainMain, stopMain)
	}
	if stop, drain := replay(t, true, true, stays); stop >= 0 || drain != drainMain {
		t.Errorf("judged: fallback at %d (drain at %d, main's %d): want none", stop, drain, drainMain)
	}
	// the same start, then a foreign upload growing into the room
	foreign := slices.Clone(seq)
	for i, f := range []float64{0.85, 0.8, 0.75, 0.72, 0.7, 0.7, 0.7, 0.7} {
		foreign = append(foreign, groupSample{goodput: f * 19.3e6, inflation: 1.15 + 0.02*float64(i)})
	}
	stopMain, _ = replay(t, true, false, foreign)
	if stop, _ := replay(t, true, true, foreign); stop < 0 || stop != stopMain {
		t.Errorf("judged: a foreign queue stopped capping at interval %d, main's reading at %d", stop, stopMain)
	}
}

// TestMixedStartDrainsToWhatArrived replays the downlink's start in the
// lab's coop-mixed (4 lanes hosts beside 2 plain downloads,
// main's first repetition): the start's losses, the recovery's intervals
// at 10.5-11.5 Mbit/s recorded as the best, then 19.9 of in-order bytes at
// 1.25x while the lanes hosts' interfaces received 13.2 (their share of
// the 19.3 medium beside the plain hosts' 6.4), and the drain. Bounded at
// the best (main) the drain restarted from 10.5 and the plain senders grew
// into the rest; bounded at what arrived, from the lanes hosts' share.
func TestMixedStartDrainsToWhatArrived(t *testing.T) {
	seq := []groupSample{
		{goodput: 0.7e6, inflation: 1.00}, {goodput: 3.9e6, inflation: 1.07}, // pre-start
		{goodput: 7.9e6, inflation: 1.49}, // the slow starts' queue: startup
		{goodput: 10.5e6, judged: 9.6e6, inflation: 1.45},
		{goodput: 10.7e6, inflation: 1.48},
		{goodput: 11.5e6, judged: 9.4e6, inflation: 1.16},
		{goodput: 19.9e6, judged: 13.2e6, inflation: 1.25}, // in-order bytes released; 13.2 arrived
		{goodput: 13.0e6, inflation: 1.31},
		{goodput: 13.0e6, inflation: 1.31},
	}
	for _, judged := range []bool{false, true} {
		e := newRateEstimator(120_000, 2e9, 500*time.Millisecond, estimatorRules{drainUnsettledStartup: true, catchUpToArrivals: judged})
		now := t0.Add(8500 * time.Millisecond)
		drainBest := 0.0
		for _, x := range seq {
			x.minRTT = 256 * time.Millisecond
			e.update(now, x)
			if e.drained && drainBest == 0 {
				drainBest = e.drainBest
			}
			now = now.Add(500 * time.Millisecond)
		}
		switch {
		case drainBest == 0:
			t.Fatalf("catchUpToArrivals %v: no drain", judged)
		case judged && (drainBest < 13.0e6 || drainBest > 13.2e6):
			t.Errorf("judged: the drain restarted from %.1f Mbit/s, want what arrived, 13.2", drainBest/1e6)
		case !judged && drainBest > 11.5e6:
			t.Errorf("main's rule: the drain restarted from %.1f Mbit/s, want the recovery's best", drainBest/1e6)
		}
		t.Logf("catchUpToArrivals %v: drain from %.1f Mbit/s", judged, drainBest/1e6)
	}
}

// TestStartupBestNotFromCatchUp replays a 16-download start in which one
// host's best came from a loss's catch-up (the ACK class's
// pair 3: 23.3 Mbit/s of in-order bytes at 3.0 s, while the group's
// interfaces received 16.7, on the lab's 19.3 Mbit/s medium), one
// interval before startup's exit. Main's estimator took that interval as
// cruise's best, and the host's caps settled 1.2x above its peers'; with
// the best recorded at most at the judged goodput (bestWithinArrivals) startup
// exits at the queue's interval, the medium's rate.
func TestStartupBestNotFromCatchUp(t *testing.T) {
	seq := []groupSample{
		{goodput: 2e6, inflation: 1.00}, {goodput: 5e6, inflation: 1.02}, {goodput: 7e6, inflation: 1.03}, // pre-start
		{goodput: 8e6, inflation: 1.03}, // grows less: startup
		{goodput: 12e6, inflation: 1.03}, {goodput: 16e6, inflation: 1.04},
		{goodput: 18e6, judged: 18.6e6, inflation: 1.05}, {goodput: 19.0e6, inflation: 1.04}, // settled
		{goodput: 23.3e6, judged: 16.7e6, inflation: 1.05}, // the catch-up: in-order bytes released
		{goodput: 19.2e6, judged: 19.9e6, inflation: 1.12}, // the queue: startup's exit
		{goodput: 19.2e6, inflation: 1.08}, {goodput: 19.3e6, inflation: 1.07}, {goodput: 19.2e6, inflation: 1.08},
	}
	for _, judged := range []bool{false, true} {
		e := newRateEstimator(120_000, 2e9, 500*time.Millisecond, estimatorRules{drainUnsettledStartup: true, catchUpToArrivals: true, bestWithinArrivals: judged})
		now := t0.Add(200 * time.Millisecond)
		for _, x := range seq {
			x.minRTT = 256 * time.Millisecond
			e.update(now, x)
			now = now.Add(500 * time.Millisecond)
		}
		if e.phase != phaseCruise {
			t.Fatalf("bestWithinArrivals %v: startup did not exit", judged)
		}
		best := e.best()
		switch {
		case judged && best > 19.3e6:
			t.Errorf("judged: cruise's best %.1f Mbit/s, want the exit's 19.2, not the catch-up", best/1e6)
		case !judged && best < 23.3e6:
			t.Errorf("main's rule: cruise's best %.1f Mbit/s, want the catch-up's 23.3", best/1e6)
		}
		t.Logf("bestWithinArrivals %v: best %.1f Mbit/s, estimate %.1f", judged, best/1e6, e.est/1e6)
	}
}
