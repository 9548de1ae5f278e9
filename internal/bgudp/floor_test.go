// floor_test.go: the class's floor and its probes scale with the link
// estimate (rule.go's FloorShare, episode.go's probeRoom).
package bgudp

import (
	"net/netip"
	"testing"
	"time"
)

func TestFloorScalesWithLink(t *testing.T) {
	const link = 62_500 // bytes/s: 0.5 Mbit/s
	s := State{Rule: DefaultRule(10 * time.Millisecond), Rate: link, Link: link}
	s.ests = []estimate{{rate: link, busy: true}}
	for range 200 { // a queue far above the target, step after step
		s.Step(Input{Signal: true, Queue: time.Second, Raw: time.Second, Base: 10 * time.Millisecond,
			Offered: link, Passed: link, Dt: 50 * time.Millisecond})
	}
	if want := uint64(link / FloorShare); s.Rate != want {
		t.Errorf("rate %d B/s after a standing queue on a %d B/s link, want the floor %d (1/%d)", s.Rate, link, want, FloorShare)
	}
	if s.Blind() > link/FloorShare {
		t.Errorf("blind: %d B/s, want at most 1/%d of the link", s.Rate, FloorShare)
	}
	fast := State{Rule: DefaultRule(10 * time.Millisecond), Link: 1_250_000}
	if fast.Floor() != fast.Rule.Floor {
		t.Errorf("a 10 Mbit/s link's floor %d, want the rule's %d", fast.Floor(), fast.Rule.Floor)
	}
	if b := s.ProbeBudget(0); b != link/FloorShare {
		t.Errorf("probe budget %d B/s, want %d", b, link/FloorShare)
	}
}

func TestProbeRoomBoundsProbes(t *testing.T) {
	const budget, dt = 3906, 50 * time.Millisecond // 1/16 of 0.5 Mbit/s
	vn := probeSize(netip.MustParseAddrPort("192.0.2.1:443"))
	run := func(moved uint64) (probes uint64) {
		r := newProbeRoom()
		var bytes uint64
		for range 200 { // 10 s, a version probe and its reply whenever allowed
			if r.allows(vn, bytes) {
				bytes += uint64(vn)
			}
			r.refill(budget, dt, bytes, moved)
		}
		return bytes
	}
	bulk := run(1 << 20)
	if hi := uint64(budget*10 + probeDepth + vn); bulk > hi {
		t.Errorf("probes took %d bytes in 10 s at a %d B/s budget, want at most %d", bulk, budget, hi)
	}
	if bulk < budget*10/2 {
		t.Errorf("probes took %d bytes in 10 s at a %d B/s budget: starved", bulk, budget)
	}
}

// The class's probes never send more than the class moved (issue 62, N5):
// a one-byte datagram every 50 ms buys no version probe of 1,228 bytes
// until the class has moved that much; in every step the probes' bytes
// stay within the class's and the one echo's credit it starts with, and
// over the run within the class's.
func TestProbesNeverExceedWhatTheFlowSent(t *testing.T) {
	const budget, dt = 1 << 20, 50 * time.Millisecond
	const trickle = 29 // bytes per step: a one-byte datagram every 50 ms
	vn := probeSize(netip.MustParseAddrPort("192.0.2.1:443"))
	r := newProbeRoom()
	var probes, flow uint64
	for range 200 {
		if r.allows(vn, probes) {
			probes += uint64(vn)
		}
		flow += trickle
		r.refill(budget, dt, probes, trickle)
		if probes > flow+probeStartCredit {
			t.Fatalf("probes took %d bytes beside a class that moved %d (%.1f×)",
				probes, flow, float64(probes)/float64(flow))
		}
	}
	if probes > flow {
		t.Errorf("probes took %d bytes over a class that moved %d", probes, flow)
	}
	t.Logf("probe bytes per byte the flow sent: %.2f", float64(probes)/float64(flow))
}

// Shaped arrivals grow no further than arrivalsHeadroom of their measured
// link: above it the remote queue grows, which a lowered rate drains only
// by the difference.
func TestShapedArrivalsStayUnderTheLink(t *testing.T) {
	const link = 750_000 // bytes/s
	s := State{Rule: DefaultRule(10 * time.Millisecond), Rate: link / 2, Link: link, measured: link}
	s.ests = []estimate{{rate: link, busy: true}}
	for range 30 { // no queue: the rate grows
		s.Step(Input{Signal: true, Base: 10 * time.Millisecond, Offered: s.Rate, Passed: s.Rate,
			Arrived: true, Shaped: true, Dt: 50 * time.Millisecond})
	}
	if hi := uint64(arrivalsHeadroom*link) + 1; s.Rate > hi {
		t.Errorf("shaped arrivals at %d B/s on a measured %d B/s link, want at most %d", s.Rate, link, hi)
	}
	if s.Rate < link*9/10 {
		t.Errorf("shaped arrivals at %d B/s on a measured %d B/s link: held too low", s.Rate, link)
	}
}
