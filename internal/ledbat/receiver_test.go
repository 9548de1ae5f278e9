// receiver_test.go: rLEDBAT's receive-side step (Receiver, the twin of
// rledbat.h's rledbat_packet) against the model's own rules, and on a
// simulated downlink bottleneck stepped at the daemon's sampling intervals.
package ledbat

import (
	"math"
	"testing"
)

const mss = 1448

func TestReceiverLeavesUntimedSocketsAlone(t *testing.T) {
	var r Receiver
	var joins uint32
	for i := range 5 {
		st := r.Step(RecvSample{NowUS: uint64(i) * 1000, RcvNxt: uint32(i) * 100, AdvMSS: mss}, 15000, &joins)
		if st.Timed {
			t.Fatalf("step %d: timed without an RTT sample", i)
		}
	}
	if r.Wnd != RecvInitWnd || joins != 0 {
		t.Fatalf("wnd %d joins %d; want %d, 0", r.Wnd, joins, RecvInitWnd)
	}
}

// TestReceiverSlowStart: gain 1 at a base delay above 2x the target, so
// each segment received opens the window by one, as LEDBAT++'s slow start.
func TestReceiverSlowStart(t *testing.T) {
	var r Receiver
	var joins uint32
	now := uint64(1_000_000)
	r.Step(RecvSample{NowUS: now, RcvNxt: 0, AdvMSS: mss, RTTUS: 40000}, 15000, &joins)
	if joins != 1 {
		t.Fatalf("a new download did not count itself: joins %d", joins)
	}
	st := r.Step(RecvSample{NowUS: now + 40000, RcvNxt: 10*mss + 100, AdvMSS: mss, RTTUS: 40000}, 15000, &joins)
	if !st.Timed || r.Wnd != 20 || r.Rem != 100 {
		t.Fatalf("after 10 segments: wnd %d rem %d timed %v; want 20, 100, true", r.Wnd, r.Rem, st.Timed)
	}
	// The model itself, from the same state, gives the same window.
	m := New(15000, now)
	m.RTT(40000, now)
	w := Window{Cwnd: RecvInitWnd, Ssthresh: SsthreshInfinite}
	m.Ack(&w, 10, uint32(now+40000), 40000, true)
	if w.Cwnd != r.Wnd {
		t.Fatalf("model cwnd %d, receiver wnd %d", w.Cwnd, r.Wnd)
	}
}

// TestReceiverDecreaseAboveTarget: a queuing delay above the target
// shrinks the window and ssthresh follows it.
func TestReceiverDecreaseAboveTarget(t *testing.T) {
	var r Receiver
	now := uint64(1_000_000)
	nxt := uint32(0)
	r.Step(RecvSample{NowUS: now, AdvMSS: mss, RTTUS: 40000}, 15000, nil)
	// slow start to 100 packets at the base delay
	for r.L.Phase == SlowStart && r.Wnd < 100 {
		now += 10000
		nxt += 10 * mss
		r.Step(RecvSample{NowUS: now, RcvNxt: nxt, AdvMSS: mss, RTTUS: 40000}, 15000, nil)
	}
	// queue of 60 ms: 4x the target, for long enough that the current
	// delay (the minimum over about one base RTT) sees it
	var before uint32
	for i := range 15 {
		now += 10000
		nxt += 10 * mss
		r.Step(RecvSample{NowUS: now, RcvNxt: nxt, AdvMSS: mss, RTTUS: 100000 + uint32(i)}, 15000, nil)
		if before == 0 && r.L.CurrentDelay() >= 100000 { // slow start has ended
			before = r.Wnd
		}
	}
	if before == 0 || r.Wnd >= before || r.Ssthresh > r.Wnd {
		t.Fatalf("window %d -> %d, ssthresh %d: want a decrease with ssthresh following", before, r.Wnd, r.Ssthresh)
	}
}

// TestReceiverLossOncePerRTT: out-of-order segments halve the window at
// most once per RTT.
func TestReceiverLossOncePerRTT(t *testing.T) {
	r := Receiver{}
	now := uint64(1_000_000)
	r.Step(RecvSample{NowUS: now, AdvMSS: mss, RTTUS: 40000}, 15000, nil)
	r.Wnd = 80
	st := r.Step(RecvSample{NowUS: now + 1000, AdvMSS: mss, RTTUS: 40000, OOO: 1}, 15000, nil)
	if !st.Loss || r.Wnd != 40 || r.Ssthresh != 40 {
		t.Fatalf("first loss: %+v wnd %d ssthresh %d; want 40/40", st, r.Wnd, r.Ssthresh)
	}
	st = r.Step(RecvSample{NowUS: now + 20000, AdvMSS: mss, RTTUS: 40000, OOO: 3}, 15000, nil)
	if st.Loss || r.Wnd != 40 {
		t.Fatalf("second loss within the RTT halved again: wnd %d", r.Wnd)
	}
	st = r.Step(RecvSample{NowUS: now + 50000, AdvMSS: mss, RTTUS: 40000, OOO: 4}, 15000, nil)
	if !st.Loss || r.Wnd != 20 {
		t.Fatalf("loss one RTT later: wnd %d; want 20", r.Wnd)
	}
}

func TestReceiverJoinSlowsOthers(t *testing.T) {
	var joins uint32
	var a, b Receiver
	now := uint64(1_000_000)
	a.Step(RecvSample{NowUS: now, AdvMSS: mss, RTTUS: 40000}, 15000, &joins)
	a.L.Phase = Avoid // in congestion avoidance
	b.Step(RecvSample{NowUS: now + 1000, AdvMSS: mss, RTTUS: 40000}, 15000, &joins)
	if joins != 2 {
		t.Fatalf("joins %d; want 2", joins)
	}
	a.Step(RecvSample{NowUS: now + 2000, AdvMSS: mss, RTTUS: 40000}, 15000, &joins)
	if a.L.Flags&FlagJoin == 0 || a.L.TNext != uint32(now+2000) {
		t.Fatalf("the elder did not schedule a join slowdown: flags %x next %d", a.L.Flags, a.L.TNext)
	}
}

func TestRecvClamp(t *testing.T) {
	for _, c := range []struct {
		wnd, cap uint32
		yield    bool
		want     uint32
	}{
		{10, 0, false, 10 * mss},
		{10, 5000, false, 5000},
		{10, 50000, false, 10 * mss},
		{10, 0, true, 2 * mss},
		{10, 1000, true, 1000},
		{1, 0, true, mss},
	} {
		if got := RecvClamp(c.wnd, mss, c.cap, c.yield); got != c.want {
			t.Errorf("RecvClamp(%d, cap %d, yield %v) = %d; want %d", c.wnd, c.cap, c.yield, got, c.want)
		}
	}
	if got := RecvClamp(4, RecvMinMSS, 0, false); got != 4*RecvMinMSS {
		t.Errorf("min MSS: %d", got)
	}
}

// simRecv runs a receiver stepped every stepMS against a fluid downlink
// bottleneck (pps packets/s, base RTT baseMS, an unbounded FIFO) whose
// sender keeps as much in flight as the advertised window allows; the
// window's right edge is never retracted (in flight only drains). It
// returns the mean queuing delay (ms) and the link's utilisation over the
// second half of dur seconds.
func simRecv(target uint32, pps, baseMS float64, stepMS, dur int) (qdMS, util float64) {
	var r Receiver
	var joins uint32
	inflight, clamp := 0.0, float64(RecvInitWnd)
	delivered, nextRTT := 0.0, 0
	var rtt uint32
	var qsum, dsum float64
	var n int
	for ms := 0; ms < dur*1000; ms++ {
		q := math.Max(0, inflight-pps*baseMS/1000)
		rttMS := baseMS + q/pps*1000
		if ms >= nextRTT { // the kernel's estimate moves about once per RTT
			rtt = uint32(rttMS * 1000)
			nextRTT = ms + int(rttMS)
		}
		d := inflight / rttMS // packets delivered this ms
		delivered += d
		inflight -= d
		if inflight < clamp { // the sender fills the window
			inflight = clamp
		}
		if ms%stepMS == 0 {
			r.Step(RecvSample{NowUS: uint64(ms+1) * 1000, RcvNxt: uint32(delivered * mss), AdvMSS: mss, RTTUS: rtt}, target, &joins)
			clamp = float64(r.Wnd)
		}
		if ms >= dur*500 {
			qsum += q / pps * 1000
			dsum += d
			n++
		}
	}
	return qsum / float64(n), dsum / float64(n) * 1000 / pps
}

// TestReceiverOnBottleneck: stepped per 10 ms (about the BPF path's
// per-segment rate at this RTT's granularity) or per 50/100 ms (the
// daemon's sampling), the window keeps the downlink's queue near the
// target and most of the link busy.
func TestReceiverOnBottleneck(t *testing.T) {
	for _, step := range []int{10, 50, 100} {
		qd, util := simRecv(15000, 863, 40, step, 60)
		t.Logf("step %d ms: queuing delay %.1f ms, link %.0f%%", step, qd, 100*util)
		if qd > 30 || util < 0.7 {
			t.Errorf("step %d ms: queuing delay %.1f ms (target 15), link %.0f%%; want <= 30 ms and >= 70%%", step, qd, 100*util)
		}
	}
}
