// yield_test.go: the episode's yield decision per direction (yieldOf, as
// stepInput applies it): beside a present, unharmed foreground both
// directions steer to the share target; the kernel's hold (a harmed
// foreground, an opening, a UDP-only foreground) holds both; the lab
// switch Arrivals holds arrivals beside any present foreground.
package bgudp

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/yield"
)

func TestYieldDecision(t *testing.T) {
	const policy = 10 * time.Millisecond
	share := yield.ShareTarget(policy)
	cases := []struct {
		name          string
		d             datapath.Direction
		held, present bool
		off           experiments.BgUDPOff
		wantHeld      bool
		wantTarget    time.Duration
	}{
		{"upload, foreground absent", datapath.Upload, false, false, experiments.BgUDPOff{}, false, policy},
		{"download, foreground absent", datapath.Download, false, false, experiments.BgUDPOff{}, false, policy},
		{"upload beside an unharmed foreground", datapath.Upload, false, true, experiments.BgUDPOff{}, false, share},
		{"download beside an unharmed foreground", datapath.Download, false, true, experiments.BgUDPOff{}, false, share},
		{"upload, kernel holds (harm, opening, UDP-only foreground)", datapath.Upload, true, true, experiments.BgUDPOff{}, true, share},
		{"download, kernel holds (harm, opening, UDP-only foreground)", datapath.Download, true, true, experiments.BgUDPOff{}, true, share},
		{"download, opening before the stamp", datapath.Download, true, false, experiments.BgUDPOff{}, true, policy},
		{"download beside an unharmed foreground, arrivals off", datapath.Download, false, true, experiments.BgUDPOff{Arrivals: true}, true, policy},
		{"download, foreground absent, arrivals off", datapath.Download, false, false, experiments.BgUDPOff{Arrivals: true}, false, policy},
		{"upload beside an unharmed foreground, arrivals off", datapath.Upload, false, true, experiments.BgUDPOff{Arrivals: true}, false, share},
	}
	for _, c := range cases {
		dp := &fakeDP{held: c.held, present: c.present}
		e := &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(policy)}}
		e.state.Rule.Off = c.off
		in := Input{Dt: e.state.Rule.Interval}
		var cls [2]datapath.BgClass
		e.stepInput(dp, &in, c.d, cls, cls, policy)
		if in.Held != c.wantHeld || e.state.Rule.Target != c.wantTarget || e.Sharing != (c.wantTarget == share) {
			t.Errorf("%s: held %v, target %v, sharing %v; want held %v, target %v",
				c.name, in.Held, e.state.Rule.Target, e.Sharing, c.wantHeld, c.wantTarget)
		}
	}
}

// Arrivals beside an unharmed foreground follow the rule at the share
// target: a queue above it cuts the rate, one below it grows it; held,
// the rate stays.
func TestArrivalsShareBesideForeground(t *testing.T) {
	const policy = 10 * time.Millisecond
	for _, off := range []bool{false, true} {
		dp := &fakeDP{present: true}
		e := &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(policy)}}
		e.state.Rule.Off.Arrivals = off
		e.state.Rate, e.state.Link = 500_000, 700_000
		var cls [2]datapath.BgClass
		step := func(q time.Duration) uint64 {
			in := Input{Signal: true, Queue: q, Raw: q, Offered: 500_000, Passed: 500_000, Dt: e.state.Rule.Interval}
			e.stepInput(dp, &in, datapath.Download, cls, cls, policy)
			return e.state.Step(in)
		}
		up := step(1 * time.Millisecond) // below the share target (2.5 ms), above none of the policy's
		down := step(6 * time.Millisecond)
		switch {
		case off && (up != 500_000 || down != 500_000):
			t.Errorf("arrivals held: rate %d then %d, want 500000 kept", up, down)
		case !off && (up <= 500_000 || down >= up):
			t.Errorf("arrivals sharing: rate %d at 1 ms then %d at 6 ms, want growth then a cut", up, down)
		}
	}
}

// A step in which arrivals came stamps the host's background download
// active (foreground downloads then read their receive side: their harm
// is told); with the arrivals' hold (the lab switch) it does not.
func TestArrivalsMarkForegroundReceiveSide(t *testing.T) {
	for _, off := range []bool{false, true} {
		dp := &fakeDP{}
		e := &episode{Episode: Episode{Ifindex: 1}, state: State{Rule: DefaultRule(10 * time.Millisecond)}}
		e.state.Rule.Off.Arrivals = off
		var prev, cur [2]datapath.BgClass
		in := Input{Dt: e.state.Rule.Interval}
		e.stepInput(dp, &in, datapath.Upload, prev, cur, e.state.Rule.Policy) // nothing arrived
		cur[datapath.Download].Bytes = 50_000
		e.stepInput(dp, &in, datapath.Upload, prev, cur, e.state.Rule.Policy)
		if want := map[bool]int{false: 1, true: 0}[off]; dp.marks != want {
			t.Errorf("arrivals held %v: %d stamps over a step without arrivals and one with, want %d", off, dp.marks, want)
		}
	}
}

// Shaped arrivals beside a foreground that keeps the bottleneck's queue
// standing (a paced download at 40 % of the link, its bursts 1 ms of
// queue) measure the link from every lane's arrivals: the class fills
// the room the foreground leaves. Measured from its own arrivals (the
// lab's own-link), each window read the class's own rate as the link and
// the arrivals' headroom held it under that, down to the floor.
func TestArrivalsBesideAStandingQueueMeasureEveryLane(t *testing.T) {
	const link, fg = 1_250_000.0, 500_000.0 // bytes/s
	for _, own := range []bool{false, true} {
		s := State{Rule: DefaultRule(10 * time.Millisecond)}
		s.Rule.Target = 2500 * time.Microsecond // sharing: a quarter of the policy's
		s.Rate = 300_000
		var queue, used float64 // bytes; the class's share of the room over the second half
		for i := range 400 {
			dt := s.Rule.Interval.Seconds()
			a := float64(s.Rate) // a sender that keeps the shaper busy
			queue = max(0, queue+(fg+a-link)*dt)
			carried := min(link, fg+a)
			qd := time.Duration((queue/link)*float64(time.Second)) + time.Millisecond
			in := Input{Signal: true, Queue: qd, Raw: qd, Base: 20 * time.Millisecond, Offered: uint64(a), Passed: uint64(a),
				Arrived: true, Shaped: true, Dt: s.Rule.Interval}
			in.AllLanes = uint64(carried)
			s.Rule.Off.OwnLink = own
			s.Step(in)
			if i >= 200 {
				used += (carried - fg) / (link - fg) / 200
			}
		}
		t.Logf("own-link %v: the class used %.2f of the room, link estimated %d B/s, rate %d", own, used, s.Link, s.Rate)
		if !own && used < 0.9 {
			t.Errorf("shaped arrivals beside a standing queue used %.2f of the room the foreground left, want >= 0.90", used)
		}
	}
}

// Shaped arrivals beside a constant-rate foreground (a UDP call at 40 %
// of the link) stay within the room it leaves: the bound is the measured
// link less the other lanes' arrivals. Bounded only by 0.95 of the whole
// link, the class grew past the room after every decrease and the queue
// stood over the target in 95 of 200 steps; within the room, only as the
// measurement ages out (2 s) and the class finds the link again: 22.
func TestArrivalsStayInTheRoomBesideACall(t *testing.T) {
	room := func(whole bool) (used float64, over int) {
		const link, fg = 1_250_000.0, 500_000.0 // bytes/s
		s := State{Rule: DefaultRule(10 * time.Millisecond)}
		s.Rule.Target = 2500 * time.Microsecond // sharing: a quarter of the policy's
		s.Rule.Off.Room = whole
		s.Rate = 300_000
		var queue float64
		for i := range 400 {
			dt := s.Rule.Interval.Seconds()
			a := float64(s.Rate) // a sender that keeps the shaper busy
			queue = max(0, queue+(fg+a-link)*dt)
			carried := min(link, fg+a)
			qd := time.Duration(queue / link * float64(time.Second))
			s.Step(Input{Signal: true, Queue: qd, Raw: qd, Base: 20 * time.Millisecond, Offered: uint64(a), Passed: uint64(a),
				AllLanes: uint64(carried), Arrived: true, Shaped: true, Dt: s.Rule.Interval})
			if i >= 200 {
				used += (carried - fg) / (link - fg) / 200
				if qd > s.Rule.Target {
					over++ // the second half's steps over the target
				}
			}
		}
		return used, over
	}
	used, over := room(false)
	usedWhole, overWhole := room(true)
	t.Logf("the room: %.2f of it, %d of 200 steps over the target; the whole link: %.2f, %d", used, over, usedWhole, overWhole)
	if used < 0.9 || over*3 > overWhole {
		t.Errorf("beside a call: %.2f of the room, %d steps over the target (the whole link's bound: %d); want >= 0.90 and under a third",
			used, over, overWhole)
	}
}
