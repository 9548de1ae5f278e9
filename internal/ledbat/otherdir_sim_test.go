// otherdir_sim_test.go plays one flow through the simulated bottleneck
// while its ACKs wait, now and then, behind the other direction's queue (a
// page's download beside an upload): what keeping the rate through that
// queue (KeepRate) gives against the rule it replaced (FlagRateUnkept: the
// growth scaled by m^2).
package ledbat

import (
	"container/heap"
	"math"
	"testing"
)

// ackQueue is the other direction's queue at t (s): 250 ms for 0.6 s every
// 3 s, filled and drained over 100 ms each.
func ackQueue(t float64) float64 {
	const peak, rise, hold, period = 0.250, 0.100, 0.600, 3.0
	switch p := math.Mod(t, period); {
	case p < rise:
		return peak * p / rise
	case p < rise+hold:
		return peak
	case p < 2*rise+hold:
		return peak * (2*rise + hold - p) / rise
	}
	return 0
}

// simulateOtherDir runs one flow for dur s at the share target beside a
// present foreground (the share rule on: the page loads' presence) and
// returns it and its own queue's largest delay after warm s. keep: the
// window keeps its rate through the ACKs' queue (else FlagRateUnkept).
func simulateOtherDir(keep bool, dur, warm float64) (*simFlow, float64) {
	f := &simFlow{w: Window{Cwnd: 10, Ssthresh: SsthreshInfinite}}
	f.s = New(10_000, 0)
	if !keep {
		f.s.Flags |= FlagRateUnkept
	}
	var q simQueue
	lastDep, lastAck, worst := 0.0, 0.0, 0.0
	send := func(now float64) {
		for f.inflight < int(f.w.Cwnd) {
			dep := math.Max(now+simBase/2, lastDep) + 1/simPPS
			lastDep = dep
			if now > warm {
				worst = math.Max(worst, dep-now-simBase/2)
			}
			// the ACKs' way is a FIFO: an ACK leaves its queue no sooner
			// than the one before it (compressed when the queue drains)
			ack := math.Max(dep+simBase/2+ackQueue(dep), lastAck+1e-6)
			lastAck = ack
			heap.Push(&q, simEvent{at: ack, sent: now, other: ack - dep - simBase/2})
			f.inflight++
		}
	}
	send(0)
	for len(q) > 0 && q[0].at < dur {
		e := heap.Pop(&q).(simEvent)
		now := e.at
		rtt := f.acknowledge(now, e.sent)
		other := e.other
		was := f.s.SOther
		f.s.Share(2_500, FlagShare)
		f.s.Delay(us(rtt-other), us(other), uint64(us(now)))
		KeepRate(&f.s, &f.w, was, true)
		f.s.Ack(&f.w, 1, us(now), us(f.srtt), f.inflight+1 >= int(f.w.Cwnd))
		send(now)
	}
	return f, worst
}

// TestKeepRateBehindTheOtherDirection: an upload whose ACKs wait 250 ms for
// 0.6 s of every 3 s keeps >= 0.9 of the link with its rate kept; the m^2
// growth it replaced loses most of each wait (< 0.85) and, its own queue
// showing a round trip late, overshoots: the rate kept leaves less than
// half that own queue, within twice the share target's flow's own target.
func TestKeepRateBehindTheOtherDirection(t *testing.T) {
	kept, qKept := simulateOtherDir(true, 40, 10)
	unkept, qUnkept := simulateOtherDir(false, 40, 10)
	k, u := kept.rate(10, 40)/simPPS, unkept.rate(10, 40)/simPPS
	t.Logf("share of the link: rate kept %.2f (own queue at most %.1f ms), m^2 growth %.2f (%.1f ms)",
		k, 1e3*qKept, u, 1e3*qUnkept)
	if k < 0.9 || u >= 0.85 {
		t.Errorf("share of the link: rate kept %.2f, want >= 0.90; m^2 growth %.2f, want < 0.85", k, u)
	}
	if qKept > 0.020 || qKept > qUnkept/2 {
		t.Errorf("own queue: rate kept %.1f ms, m^2 growth %.1f ms; want <= 20 ms and under half", 1e3*qKept, 1e3*qUnkept)
	}
}
