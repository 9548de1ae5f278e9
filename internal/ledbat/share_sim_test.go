// share_sim_test.go plays the model beside a paced foreground on the
// simulated bottleneck of sim_test.go: a background flow at the share
// target (a quarter of its own) with and without the share rule
// (FlagShare*), its share of the capacity the foreground leaves idle and
// the queue the foreground's packets meet.
package ledbat

import (
	"container/heap"
	"math"
	"math/rand"
	"sort"
	"testing"
)

// shareSim is the outcome of simulateShare.
type shareSim struct {
	idleShare float64 // background packets ÷ the capacity the foreground left
	fgP50     float64 // the foreground packets' queuing delay, ms
	fgP95     float64
	slowdowns int
	downP95   float64 // the foreground's queuing-delay p95 over the first 300 ms of sharing, ms
}

// simulateShare runs one background flow beside a foreground paced at
// fgShare of the link, in bursts of burst packets, for dur seconds: at its
// own target (DefaultTargetUS) until from, then sharing (target, share rule
// flags); measured after warm seconds.
func simulateShare(target, flags uint32, fgShare float64, burst int, from, dur, warm float64) shareSim {
	f := &simFlow{w: Window{Cwnd: 10, Ssthresh: SsthreshInfinite}}
	f.s = New(DefaultTargetUS, 0)
	var q simQueue
	lastDep := 0.0
	rng := rand.New(rand.NewSource(3))
	enqueue := func(now float64) float64 {
		arr := now + simBase/2
		dep := math.Max(arr, lastDep) + 1/simPPS
		lastDep = dep
		return dep
	}
	send := func(now float64) {
		for f.inflight < int(f.w.Cwnd) {
			dep := enqueue(now)
			heap.Push(&q, simEvent{at: dep + simBase/2 + simJitter*rng.Float64(), sent: now})
			f.inflight++
		}
	}
	var fgDelay, downDelay []float64
	fgEvery := float64(burst) / (fgShare * simPPS)
	nextFG, now, fgPkts, slowdowns := 0.0, 0.0, 0, 0
	send(0)
	for now < dur {
		if len(q) == 0 || nextFG < q[0].at {
			now = nextFG
			for i := 0; i < burst; i++ {
				dep := enqueue(now)
				if now >= from && now < from+0.3 {
					downDelay = append(downDelay, dep-now-simBase/2-1/simPPS)
				}
				if now >= warm {
					fgDelay = append(fgDelay, dep-now-simBase/2-1/simPPS)
					fgPkts++
				}
			}
			nextFG += fgEvery
			continue
		}
		e := heap.Pop(&q).(simEvent)
		now = e.at
		if now >= from {
			f.s.Share(target, flags)
		}
		rtt := f.acknowledge(now, e.sent)
		f.s.RTT(us(rtt), uint64(us(now)))
		ph := f.s.Phase
		f.s.Ack(&f.w, 1, us(now), us(f.srtt), f.inflight+1 >= int(f.w.Cwnd))
		if ph == Avoid && f.s.Phase == Hold && now >= warm {
			slowdowns++
		}
		send(now)
	}
	sort.Float64s(fgDelay)
	sort.Float64s(downDelay)
	idle := (dur-warm)*simPPS - float64(fgPkts)
	return shareSim{idleShare: sumBins(f.acked, warm, dur) / idle,
		fgP50: 1000 * fgDelay[len(fgDelay)/2], fgP95: 1000 * fgDelay[len(fgDelay)*95/100], slowdowns: slowdowns,
		downP95: 1000 * downDelay[len(downDelay)*95/100]}
}

// TestShareBesidePacedForeground: beside a foreground paced at 40 % of the
// link (in bursts of 2 packets), at the share target (2.5 ms), the share
// rule (FlagShare) takes at least 5 points more of the idle capacity than
// LEDBAT++'s own decrease and slowdowns, for at most 2 ms more of the
// foreground's queuing-delay p95, and no periodic slowdown comes while it
// shares; over the first 300 ms of sharing (the flow at its own target
// until then: the way down) the foreground meets no more than 2 ms more of
// p95 queue. The growth in proportion to the distance below the target
// (FlagShareGrow) costs none of the share of the slope and the deferred
// slowdowns and no foreground p95: it takes the overshoot off the target.
// The parts alone are logged: what each costs the share.
func TestShareBesidePacedForeground(t *testing.T) {
	const share = DefaultTargetUS / 4
	rules := []struct {
		name  string
		flags uint32
	}{{"own decrease and slowdowns", 0}, {"slope", FlagShareSlope}, {"defer", FlagShareDefer},
		{"slope+defer", FlagShareSlope | FlagShareDefer}, {"slope+defer+grow", FlagShare}}
	got := map[uint32]shareSim{}
	for _, r := range rules {
		s := simulateShare(share, r.flags, 0.4, 2, 8, 60, 10)
		got[r.flags] = s
		t.Logf("%-28s bg ÷ idle %.2f (goal 0.90), foreground queue p50 %.1f ms, p95 %.1f ms, %d slowdowns in 50 s; first 300 ms of sharing: p95 %.1f ms",
			r.name, s.idleShare, s.fgP50, s.fgP95, s.slowdowns, s.downP95)
	}
	own, rule, nogrow := got[0], got[FlagShare], got[FlagShareSlope|FlagShareDefer]
	if rule.idleShare < nogrow.idleShare-0.01 || rule.fgP95 > nogrow.fgP95 {
		t.Errorf("the growth in proportion: %.2f of the idle capacity at a p95 of %.1f ms; without it %.2f at %.1f ms", rule.idleShare, rule.fgP95, nogrow.idleShare, nogrow.fgP95)
	}
	if rule.downP95 > own.downP95+2 {
		t.Errorf("the share rule's way down from the flow's own target: the foreground's p95 %.1f ms over the first 300 ms, LEDBAT++'s own %.1f ms", rule.downP95, own.downP95)
	}
	if rule.idleShare < own.idleShare+0.05 || rule.fgP95 > own.fgP95+2 || rule.slowdowns != 0 {
		t.Errorf("the share rule: %.2f of the idle capacity at a p95 of %.1f ms; LEDBAT++'s own: %.2f at %.1f ms", rule.idleShare, rule.fgP95, own.idleShare, own.fgP95)
	}
}
