// share_test.go: the rule beside a present foreground, on a fluid
// bottleneck a paced foreground shares, probed through delaySignal as
// the episode does; the probe's samples carry the bursts of a paced QUIC
// sender (up to 10 packets) on top of the fluid queue.
package bgudp

import (
	"math/rand"
	"net/netip"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/yield"
)

// shareRun plays a loss-based sender (its rate cut by 0.7 at a step the
// policer dropped in, grown by 2 % of the link per step otherwise) beside
// a foreground at 40 % of a 10 Mbit/s link for 600 steps, the class at
// the share target; it returns the class's share of the idle capacity
// and the queue's mean over the last 400 steps.
func shareRun(off experiments.BgUDPOff) (share float64, meanQ time.Duration) {
	const link = 1.25e6
	fg := 0.4 * link
	s := &State{Rule: DefaultRule(10 * time.Millisecond)}
	s.Rule.Off = off
	s.Rule.Target = yield.ShareTarget(s.Rule.Policy)
	sig := newDelaySignal(s.Rule.Target)
	rng := rand.New(rand.NewSource(1))
	dt := s.Rule.Interval
	offer, queue := 0.3*link, 0.0
	var carried, q float64
	for i := range 600 {
		pass := offer
		if s.Rate != 0 {
			pass = min(offer, float64(s.Rate))
		}
		queue += (pass + fg - link) * dt.Seconds()
		sent := pass
		if queue < 0 {
			sent, queue = pass+queue/dt.Seconds(), 0
		}
		qd := time.Duration(queue / link * float64(time.Second))
		burst := time.Duration(0)
		if rng.Intn(2) == 0 { // half the samples meet one of the class's bursts
			burst = time.Duration(rng.Int63n(int64(8 * time.Millisecond * time.Duration(pass) / time.Duration(link-fg))))
		}
		in := Input{Offered: uint64(offer), Passed: uint64(pass), Dt: dt}
		sig.step(map[netip.AddrPort]peerResult{testPeer: {rtt: 40*time.Millisecond + qd + burst}}, &in)
		s.Step(in)
		if pass < offer {
			offer *= 0.7
		} else {
			offer += 0.02 * link
		}
		if i >= 200 {
			carried, q = carried+sent/(link-fg)/400, q+float64(qd)/400
		}
	}
	return carried, time.Duration(q)
}

// Beside a foreground the decrease keeps the slope it has above the
// policy's target: bursts that lift single samples a few ms above the
// share target cut the rate by a few per cent, not by a quarter.
func TestShareSlopeBesideForeground(t *testing.T) {
	share, q := shareRun(experiments.BgUDPOff{})
	share0, q0 := shareRun(experiments.BgUDPOff{Slope: true})
	t.Logf("class's share of the idle capacity: %.2f (queue mean %v); at the share target's slope %.2f (%v)", share, q, share0, q0)
	if share < share0+0.1 {
		t.Errorf("the share with the policy's slope %.2f, at the share target's %.2f: want 0.1 more", share, share0)
	}
	if q > yield.ShareTarget(10*time.Millisecond) {
		t.Errorf("queue mean %v above the share target", q)
	}
}
