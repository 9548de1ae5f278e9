// shape_test.go: the upload shaped instead of policed, beside a present
// foreground, through the episode's control on fakeDP: a loss-based
// sender meets the shaper's queue, not drops, at the rate's decreases.
package bgudp

import (
	"io"
	"log/slog"
	"math/rand"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/yield"
)

// shapeRun plays a loss-based sender (its rate cut by 0.7 at a step it
// lost bytes in: over the policer, or past the shaper's full queue;
// grown by 2 % of the link per step otherwise) beside a foreground at
// 40 % of a 10 Mbit/s link for 600 steps, with half the probe's samples
// lifted by one of the class's bursts (shareRun's); it returns the
// class's share of the idle capacity, the bottleneck queue's mean over
// the last 400 steps and whether the episode shaped.
func shapeRun(t *testing.T, off experiments.BgUDPOff) (share float64, meanQ time.Duration, shaped bool) {
	return shapeRunFrom(t, off, 0, 0.3)
}

// shapeRunFrom is shapeRun from a shaped rate of start (bytes/s; 0:
// none), its link estimate the whole link (every lane's bytes read it so
// while a foreground's bulk transfer held the class), the sender offering
// offer0 of the link.
func shapeRunFrom(t *testing.T, off experiments.BgUDPOff, start uint64, offer0 float64) (share float64, meanQ time.Duration, shaped bool) {
	const link = 1.25e6
	fg := 0.4 * link
	dp := &fakeDP{hasShaper: true, present: true}
	policy := 10 * time.Millisecond
	e := &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(policy)}}
	e.state.Rule.Off = off
	sig := newDelaySignal(yield.ShareTarget(policy))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rng := rand.New(rand.NewSource(1))
	dt := e.state.Rule.Interval
	offer, queue := offer0*link, 0.0
	var carried, q float64
	prev := dp.cls
	if start != 0 { // as a foreground's bulk transfer leaves the class: low
		e.state.Rate, e.state.Link, e.state.measured = start, link, link
		e.state.ests = []estimate{{rate: link, busy: true}}
		e.shape[datapath.Upload].set(dp, e.Ifindex, datapath.Upload, start, log)
	}
	for i := range 600 {
		b := offer * dt.Seconds()
		c := &dp.cls[datapath.Upload]
		c.Bytes, c.Packets = c.Bytes+uint64(b), c.Packets+uint64(b/1200)+1
		var pass, lost float64
		if dp.shapeRate != 0 {
			dp.shapeQ += b
			out := min(dp.shapeQ, float64(dp.shapeRate)*dt.Seconds())
			lost = max(0, dp.shapeQ-out-float64(datapath.BgShapeQueueLimit(dp.shapeRate)))
			dp.shapeQ -= out + lost
			if lost > 0 {
				dp.shapeDrop++
			}
			dp.shapeSent += uint64(out)
			pass = out / dt.Seconds()
		} else {
			pass = offer
			if r := dp.rates[datapath.Upload]; r != 0 {
				pass = min(offer, float64(r))
			}
			lost = (offer - pass) * dt.Seconds()
			c.DropBytes += uint64(lost)
		}
		dp.sent += uint64((pass + fg) * dt.Seconds())
		queue += (pass + fg - link) * dt.Seconds()
		sent := pass
		if queue < 0 {
			sent, queue = pass+queue/dt.Seconds(), 0
		}
		qd := time.Duration(queue / link * float64(time.Second))
		burst := time.Duration(0)
		if rng.Intn(2) == 0 {
			burst = time.Duration(rng.Int63n(int64(8 * time.Millisecond * time.Duration(pass+1) / time.Duration(link-fg))))
		}
		in := Input{Dt: dt}
		blind := sig.step(map[netip.AddrPort]peerResult{testPeer: {rtt: 40*time.Millisecond + qd + burst}}, &in)
		cur := dp.cls
		if err := e.control(dp, log, &in, blind, prev, cur, policy); err != nil {
			t.Fatal(err)
		}
		prev = cur
		shaped = shaped || e.Shaped
		if lost > 0 {
			offer *= 0.7
		} else {
			offer += 0.02 * link
		}
		if i >= 200 {
			carried, q = carried+sent/(link-fg)/400, q+float64(qd)/400
		}
	}
	return carried, time.Duration(q), shaped
}

// Beside a foreground the shaped upload keeps the bottleneck busy through
// the sender's cuts from the shaper's queue: it takes at least 0.9 of
// the idle capacity, 0.1 more than policed, the bottleneck's queue at
// the share target.
func TestShapedUploadBesideForeground(t *testing.T) {
	share, q, shaped := shapeRun(t, experiments.BgUDPOff{})
	share0, q0, shaped0 := shapeRun(t, experiments.BgUDPOff{Shape: true})
	t.Logf("class's share of the idle capacity shaped: %.2f (queue mean %v); policed %.2f (%v)", share, q, share0, q0)
	if !shaped || shaped0 {
		t.Fatalf("shaped %v with the shaper, %v without", shaped, shaped0)
	}
	if share < 0.9 || share < share0+0.1 {
		t.Errorf("shaped %.2f, policed %.2f: want at least 0.9 and 0.1 more", share, share0)
	}
	if q > yield.ShareTarget(10*time.Millisecond) {
		t.Errorf("queue mean %v above the share target", q)
	}
}

// An interface without a shaper: the upload is policed.
func TestUploadPolicedWithoutShaper(t *testing.T) {
	s := newDirSim(1.25e6)
	for range 200 {
		s.step(t, [2]float64{2 * s.link, 30_000})
	}
	if s.dp.rates[datapath.Upload] == 0 || s.e.Shaped {
		t.Fatalf("upload policed at %d B/s, shaped %v: want policed", s.dp.rates[datapath.Upload], s.e.Shaped)
	}
}

// From the floor (as a foreground's bulk transfer leaves the class)
// beside a foreground, the shaped upload finds the idle capacity again:
// its growth is slowed only above the room the link as known leaves
// (account.beyond), not above its own rate.
func TestShapedUploadRecoversBesideForeground(t *testing.T) {
	share, q, _ := shapeRunFrom(t, experiments.BgUDPOff{}, 25_000, 0.02)
	t.Logf("from the floor, steps 200-600: %.2f of the idle capacity (queue mean %v)", share, q)
	if share < 0.9 {
		t.Errorf("from the floor %.2f of the idle capacity, want at least 0.9", share)
	}
	if q > yield.ShareTarget(10*time.Millisecond) {
		t.Errorf("queue mean %v above the share target", q)
	}
}

// bucketRun plays an unresponsive sender (twice the link) shaped into a
// 10 Mbit/s bottleneck that is a token bucket (15 KB deep, as the remote
// tests' TBF) beside the probe alone, for 600 steps, the bottleneck's
// queue sampled at each step's end a step late (as the probe's answer
// comes); counted says whether the interface's bytes are read (LinkSent).
// It returns the queue's p95 and the class's share of the link over the
// last 400 steps.
func bucketRun(t *testing.T, counted bool) (p95 time.Duration, share float64) {
	const link, depth = 1.25e6, 15_000.0
	dp := &fakeDP{hasShaper: true, present: true}
	policy := 10 * time.Millisecond
	e := &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(policy)}}
	sig := newDelaySignal(yield.ShareTarget(policy))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dt := e.state.Rule.Interval
	tokens, queue, lastQ := depth, 0.0, time.Duration(0) // bytes, bytes
	prev := dp.cls
	var qs []time.Duration
	for i := range 600 {
		b := 2 * link * dt.Seconds()
		out := b
		if dp.shapeRate != 0 { // the sender's socket waits while the shaper's queue is full
			out = min(dp.shapeQ+b, float64(dp.shapeRate)*dt.Seconds())
			b = min(b, float64(datapath.BgShapeQueueLimit(dp.shapeRate))+out-dp.shapeQ)
			dp.shapeQ += b - out
			dp.shapeSent += uint64(out)
		}
		c := &dp.cls[datapath.Upload]
		c.Bytes, c.Packets = c.Bytes+uint64(b), c.Packets+uint64(b/1200)+1
		if counted {
			dp.sent += uint64(out) + 1
		}
		// the bucket passes what its tokens cover, the rest queues
		queue += out
		avail := tokens + link*dt.Seconds()
		sent := min(queue, avail)
		tokens, queue = min(depth, avail-sent), queue-sent
		in := Input{Dt: dt}
		sig.step(map[netip.AddrPort]peerResult{testPeer: {rtt: 40*time.Millisecond + lastQ}}, &in)
		lastQ = time.Duration(queue / link * float64(time.Second))
		cur := dp.cls
		if err := e.control(dp, log, &in, false, prev, cur, policy); err != nil {
			t.Fatal(err)
		}
		prev = cur
		if i >= 200 {
			qs, share = append(qs, lastQ), share+sent/dt.Seconds()/link/400
		}
	}
	slices.Sort(qs)
	if counted && (float64(dp.raised) < 0.9*link || float64(dp.raised) > 1.1*link) {
		t.Errorf("the account's upload capacity %d B/s, want the measured link's ~%.0f", dp.raised, link)
	}
	return qs[len(qs)*95/100], share
}

// An unresponsive upload at a token-bucket bottleneck, beside the probe
// alone, its socket waiting on the shaper: where the interface's counter
// shows the queue is the class's own, the class is held under its
// measured link (State.heldToLink); without the counter, within 1.05 of
// an estimate the bucket lifts. Paired: the same bottleneck and sender.
func TestOwnQueueAtATokenBucket(t *testing.T) {
	own, ownShare := bucketRun(t, true)
	est, estShare := bucketRun(t, false)
	t.Logf("queue p95 %v with the interface's counter, %v without; share of the link %.2f, %.2f", own, est, ownShare, estShare)
	if own >= est {
		t.Errorf("queue p95 %v with the interface's counter, %v without: want lower", own, est)
	}
	if ownShare < 0.9 {
		t.Errorf("share of the link %.2f with the interface's counter, want at least 0.9", ownShare)
	}
}

// A shaped upload beside a UDP call at 40 % of its measured link (the
// measurement kept fresh), its sender offering twice the link: within the
// room the call leaves (the link less the other lanes' bytes, the
// interface's counter) the bottleneck's queue stays empty; measured from
// its own bytes (own-link: no room) the class grows to its headroom over
// the whole link and the call's 40 % stands on top of it, the queue over
// the share target at its peaks.
func TestShapedUploadWithinTheRoom(t *testing.T) {
	const link, call = 1_250_000.0, 500_000.0
	run := func(off experiments.BgUDPOff) (peak time.Duration, rate uint64) {
		s := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: link / 4}
		s.Rule.Off = off
		s.Rule.Target = yield.ShareTarget(10 * time.Millisecond) // beside a present foreground
		var q float64                                            // the bottleneck's queue, bytes
		for i := range 4 * estimateKeep {
			s.ests = append(s.ests[:0], estimate{rate: link, busy: true})
			s.Link, s.measured = link, link
			pass := float64(s.Rate)
			q = max(0, q+(pass+call-link)*s.Rule.Interval.Seconds())
			qd := time.Duration(q / link * float64(time.Second))
			s.Step(Input{Signal: true, Queue: qd, Raw: qd, Offered: 2 * link, Passed: uint64(pass),
				AllLanes: uint64(pass + call), Shaped: true, Dt: s.Rule.Interval})
			if i >= estimateKeep {
				peak = max(peak, qd)
			}
		}
		return peak, s.Rate
	}
	room, rate := run(experiments.BgUDPOff{})
	whole, _ := run(experiments.BgUDPOff{OwnLink: true})
	t.Logf("queue at its peak %v within the room (rate %d B/s of the %.0f the call leaves), %v measured from its own bytes", room, rate, link-call, whole)
	if room > 0 || float64(rate) < 0.9*(link-call) {
		t.Errorf("within the room: queue peak %v, rate %d B/s; want no queue at 0.9-1.0 of the %.0f the call leaves", room, rate, link-call)
	}
	if whole <= yield.ShareTarget(10*time.Millisecond) {
		t.Errorf("measured from its own bytes the queue peaked at %v, want over the share target (else the test shows nothing)", whole)
	}
}

// A shaped upload that drives the queue is held under its measured link
// only while its shaper drops none of its packets (and arrivals never): a sender that meets
// the drops (quic-go's, every 14-16 steps) is steered by the target, its
// queue carrying the link through its window's cuts.
func TestHeldToLinkWhileTheShaperDropsNothing(t *testing.T) {
	const link = 1_250_000
	run := func(dropEvery int, arrived bool) uint64 {
		s := &State{Rule: DefaultRule(10 * time.Millisecond), Rate: link}
		s.ests = []estimate{{rate: link, busy: true}}
		s.Link, s.measured = link, link
		limit := uint64(datapath.BgShapeQueueLimit(link))
		for i := range 2 * estimateKeep {
			s.Step(Input{Signal: true, Offered: link, Passed: link, AllLanes: link, Shaped: true, Backlog: limit, Arrived: arrived,
				Dropped: dropEvery != 0 && i%dropEvery == 0, Dt: s.Rule.Interval})
			s.ests = append(s.ests[:0], estimate{rate: link, busy: true}) // the measurement stays fresh
			s.Link, s.measured = link, link
		}
		return s.Rate
	}
	if held := run(0, false); held != uint64(ownLanding*link) {
		t.Errorf("never dropped: rate %d B/s with no queue, want %d (ownLanding of the measured link)", held, uint64(ownLanding*link))
	}
	if steered := run(15, false); steered < link {
		t.Errorf("dropped every 15 steps: rate %d B/s with no queue, want at least the link (%d): steered by the target, not held", steered, link)
	}
	if arrivals := run(0, true); arrivals == uint64(ownLanding*link) {
		t.Errorf("arrivals held under their link (%d B/s): they crossed the bottleneck already, their sender is remote", arrivals)
	}
}
