// onoff_sim_test.go plays the model beside an on/off foreground (a video:
// a segment every 2 s at the link's rate, 40 % of the link in all) on the
// simulated bottleneck of sim_test.go: the background flow shares (a
// quarter of its target, the share rule) while the foreground is present
// (a packet in the last 500 ms, as the classifier's stamp), is held at 2
// packets from 100 ms into a segment to its end (the yield: a cwnd-limited
// foreground; LEDBAT++'s own window kept for the release), and between
// segments, with the rule or without it, takes the link's window
// (LinkWindow) once the foreground has been quiet for 150 ms.
package ledbat

import (
	"container/heap"
	"math"
	"math/rand"
	"sort"
	"testing"
)

// simulateOnOff runs one background flow beside segments of on seconds
// at the link's rate every period, for dur seconds, measured after warm;
// linkWindow: the quiet link's window is handed to LinkWindow. The
// outcome is share_sim_test.go's (its share and foreground p95).
func simulateOnOff(linkWindow bool, on, period, dur, warm float64) shareSim {
	const present, quiet, holdAfter = 0.5, 0.15, 0.1
	f := &simFlow{w: Window{Cwnd: 10, Ssthresh: SsthreshInfinite}}
	f.s = New(DefaultTargetUS, 0)
	var q simQueue
	lastDep, lastFG := 0.0, -10.0
	rng := rand.New(rand.NewSource(5))
	enqueue := func(now float64) float64 {
		dep := math.Max(now+simBase/2, lastDep) + 1/simPPS
		lastDep = dep
		return dep
	}
	send := func(now float64) {
		limit := int(f.w.Cwnd)
		if t := math.Mod(now, period); now-lastFG < 1/simPPS+1e-9 && t >= holdAfter && t < on {
			limit = MinCwnd
		}
		for f.inflight < limit {
			heap.Push(&q, simEvent{at: enqueue(now) + simBase/2 + simJitter*rng.Float64(), sent: now})
			f.inflight++
		}
	}
	var fgDelay []float64
	nextFG, now, fgPkts := 1.0, 0.0, 0
	send(0)
	for now < dur {
		if len(q) == 0 || nextFG < q[0].at {
			now = nextFG
			dep := enqueue(now)
			if now >= warm {
				fgDelay = append(fgDelay, dep-now-simBase/2-1/simPPS)
				fgPkts++
			}
			lastFG = now
			if nextFG += 1 / simPPS; math.Mod(nextFG, period) > on {
				nextFG += period - math.Mod(nextFG, period)
			}
			continue
		}
		e := heap.Pop(&q).(simEvent)
		now = e.at
		if now-lastFG < present {
			f.s.Share(DefaultTargetUS/ShareSlope, FlagShare)
		} else {
			f.s.Share(DefaultTargetUS, 0)
		}
		f.s.RTT(us(f.acknowledge(now, e.sent)), uint64(us(now)))
		if linkWindow && now-lastFG >= quiet {
			f.s.LinkWindow(&f.w, uint32(math.Round(simPPS*simBase)), DefaultTargetUS)
		}
		f.s.Ack(&f.w, 1, us(now), us(f.srtt), f.inflight+1 >= int(f.w.Cwnd))
		send(now)
	}
	sort.Float64s(fgDelay)
	idle := (dur-warm)*simPPS - float64(fgPkts)
	return shareSim{idleShare: sumBins(f.acked, warm, dur) / idle, fgP95: 1000 * fgDelay[len(fgDelay)*95/100]}
}

// TestBackToTheLinkBetweenSegments: beside a video's segments (0.8 s at
// the link's rate every 2 s), a flow that slow-starts to the link's window
// once the foreground is quiet takes at least 0.3 more of the capacity the
// segments leave than one that grows a packet a round trip back from where
// the segment left it. What it costs: each segment starts beside a window
// that fills the link, until the hold 100 ms in; this unresponsive
// foreground keeps that queue to its segment's end, so its queuing-delay
// p95 may rise, by at most half the base RTT.
func TestBackToTheLinkBetweenSegments(t *testing.T) {
	without := simulateOnOff(false, 0.8, 2, 62, 10)
	with := simulateOnOff(true, 0.8, 2, 62, 10)
	t.Logf("a packet a round trip: bg ÷ idle %.2f, foreground queue p95 %.1f ms", without.idleShare, without.fgP95)
	t.Logf("the link's window:     bg ÷ idle %.2f, foreground queue p95 %.1f ms (goal 0.90)", with.idleShare, with.fgP95)
	if with.idleShare < without.idleShare+0.3 || with.fgP95 > without.fgP95+1000*simBase/2 {
		t.Errorf("the link's window: %.2f of the idle capacity at a p95 of %.1f ms; without it %.2f at %.1f ms",
			with.idleShare, with.fgP95, without.idleShare, without.fgP95)
	}
}
