// ledbat_test.go checks the model against the numbers the draft states:
// the gain formula, one packet of gain per RTT below the target, a decrease
// of at most half the window per RTT, slow-start exit at 3/4 of the target,
// and the slowdown schedule (2 RTTs after slow start, held 2 RTTs, then 9x
// its length). The BPF implementation is compared with this model in
// internal/bpf/ledbat.
package ledbat

import "testing"

func TestGainDiv(t *testing.T) {
	for _, c := range []struct{ target, base, want uint32 }{
		{25_000, 0, 16},      // no sample yet: the smallest gain
		{25_000, 1_000, 16},  // ceil(50) capped at 16
		{25_000, 5_000, 10},  // ceil(10)
		{25_000, 20_000, 3},  // ceil(2.5)
		{25_000, 25_000, 2},  // 2
		{25_000, 50_000, 1},  // 1
		{25_000, 400_000, 1}, // ceil(0.125) = 1
		{60_000, 40_000, 3},  // the draft's 60 ms target
	} {
		if got := GainDiv(c.target, c.base); got != c.want {
			t.Errorf("GainDiv(%d, %d) = %d, want %d", c.target, c.base, got, c.want)
		}
	}
}

// settle fills the current-delay filter with rtt: one sample per slot,
// each a slot after the last, so that every older sample has left it.
func settle(s *State, rtt uint32) {
	for i := 0; i < Filter; i++ {
		s.RTT(rtt, uint64(s.TSlot+s.BaseDelay()/SlotDiv))
	}
}

// avoiding returns a state in congestion avoidance with base 20 ms and the
// given current delay, slowdowns far away.
func avoiding(cur uint32) State {
	s := New(25_000, 0)
	s.RTT(20_000, 0)
	settle(&s, cur)
	s.Phase, s.Flags = Avoid, 0
	return s
}

// oneRTT acks a whole window, one packet per ack.
func oneRTT(s *State, w *Window) {
	for n := w.Cwnd; n > 0; n-- {
		s.Ack(w, 1, 2, 20_000, true)
	}
}

func TestAvoidGrowsByGainPerRTT(t *testing.T) {
	s := avoiding(20_000) // no queue
	w := Window{Cwnd: 100, Ssthresh: 50}
	for i := 0; i < 30; i++ {
		oneRTT(&s, &w)
	}
	// gain 1/3: 30 RTTs give 10 packets, less the fixed-point rounding
	if w.Cwnd < 108 || w.Cwnd > 110 {
		t.Errorf("cwnd after 30 RTTs at gain 1/3 = %d, want about 110", w.Cwnd)
	}
}

// roundTrips acks n windows, one packet per ack, at smoothed RTT srtt.
func roundTrips(s *State, w *Window, n int, srtt uint32) {
	for ; n > 0; n-- {
		for k := w.Cwnd; k > 0; k-- {
			s.Ack(w, 1, 2, srtt, true)
		}
	}
}

// TestKeepRate: beside a present foreground the other direction's queue
// rising from 0 to 4 base RTTs scales the window and ssthresh 5x (the rate
// kept), falling back 1x; at most 16 currents; an infinite ssthresh stays;
// nothing alone, nor with FlagRateUnkept.
func TestKeepRate(t *testing.T) {
	const base = 20_000
	for _, c := range []struct {
		name         string
		was, other   uint32
		flags        uint32
		alone        bool
		cwnd, ss     uint32
		wantW, wantS uint32
	}{
		{"rises 4 base RTTs", 0, 4 * base, 0, false, 100, 50, 500, 250},
		{"falls back", 4 * base, 0, 0, false, 500, 250, 100, 50},
		{"at most 16 currents", 0, 100 * base, 0, false, 10, SsthreshInfinite, 160, SsthreshInfinite},
		{"alone: the queue may be its own", 0, 4 * base, 0, true, 100, 50, 100, 50},
		{"the rule it replaced", 0, 4 * base, FlagRateUnkept, false, 100, 50, 100, 50},
	} {
		s := avoiding(base)
		s.Flags |= c.flags
		s.SOther = c.other
		w := Window{Cwnd: c.cwnd, Ssthresh: c.ss}
		KeepRate(&s, &w, c.was, !c.alone)
		if w.Cwnd != c.wantW || w.Ssthresh != c.wantS {
			t.Errorf("%s: window %+v, want cwnd %d ssthresh %d", c.name, w, c.wantW, c.wantS)
		}
	}
}

// TestRateUnkeptGrowsAsAlone, the rule KeepRate replaced (FlagRateUnkept):
// a round trip 5x the base with no queue of the flow's own (4 base RTTs of
// it the other direction's queue, which its ACKs wait in) needs a 5x window
// for the same rate and acks it 5x more slowly: 5^2 gains per round trip,
// so the rate (window / round trip) grows as alone, a gain per base RTT;
// with its own queue half the target, the part above the gain halved;
// alone (no other queue) the gain per round trip; at most 16^2 gains.
// Without the flag a gain per round trip whatever the other queue.
func TestRateUnkeptGrowsAsAlone(t *testing.T) {
	const base = 20_000 // avoiding's; target 25 ms: gain 1/3
	for _, c := range []struct {
		name      string
		qd, other uint32
		lo, hi    uint32 // cwnd after 30 round trips from 100
	}{
		{"srtt 5x base, no own queue: 25 x 1/3 per RTT", 0, 4 * base, 340, 350},
		{"own queue half the target: (1 + 24/2) x 1/3 per RTT", 12_500, 4 * (base + 12_500), 225, 230},
		{"alone", 10_000, 0, 108, 110},
		{"srtt 40x base: at most 16^2 gains per RTT", 0, 39 * base, 2500, 2560},
	} {
		s := avoiding(base + c.qd)
		s.Flags |= FlagRateUnkept
		s.SOther = c.other // its samples' other part for a while
		w := Window{Cwnd: 100, Ssthresh: 50}
		roundTrips(&s, &w, 30, base+c.qd+c.other)
		if w.Cwnd < c.lo || w.Cwnd > c.hi {
			t.Errorf("%s: cwnd %d, want %d-%d", c.name, w.Cwnd, c.lo, c.hi)
		}
	}
	// the rate: alone over the same time (150 base RTTs) the window grows
	// by 50 packets, its rate by 50 a base RTT; at 5x the round trip
	s := avoiding(base)
	s.Flags |= FlagRateUnkept
	s.SOther = 4 * base
	w := Window{Cwnd: 100, Ssthresh: 50}
	roundTrips(&s, &w, 30, 5*base)
	if gain := float64(w.Cwnd-100) / 5; gain < 45 || gain > 50 {
		t.Errorf("rate at 5x the round trip grew %.1f packets a base RTT over 150 base RTTs, alone 50", gain)
	}
	s = avoiding(base)
	s.SOther = 4 * base
	w = Window{Cwnd: 100, Ssthresh: 50}
	roundTrips(&s, &w, 30, 5*base)
	if w.Cwnd < 108 || w.Cwnd > 110 {
		t.Errorf("without the flag, 5x the round trip: cwnd %d after 30 round trips, want 108-110 (a gain each)", w.Cwnd)
	}
}

// TestDecreaseAboveTargetWhateverTheRoundTrip: above the target the window
// decreases by its own queuing delay as at srtt = base + qd, however long
// the round trip.
func TestDecreaseAboveTargetWhateverTheRoundTrip(t *testing.T) {
	const base, qd = 20_000, 30_000 // 1.2x the 25 ms target
	for _, srtt := range []uint32{base + qd, 5*base + qd} {
		s := avoiding(base + qd)
		s.SOther = srtt - base - qd
		w := Window{Cwnd: 100, Ssthresh: 50}
		roundTrips(&s, &w, 1, srtt)
		if w.Cwnd < 79 || w.Cwnd > 83 {
			t.Errorf("srtt %d us: cwnd after one RTT at 1.2x target = %d, want about 81", srtt, w.Cwnd)
		}
	}
}

func TestDecreaseProportionalAndCapped(t *testing.T) {
	s := avoiding(20_000 + 30_000) // 30 ms queue: 1.2x the target
	w := Window{Cwnd: 100, Ssthresh: 50}
	oneRTT(&s, &w)
	// per RTT: 1/3 - 100*(1.2-1) = -19.7
	if w.Cwnd < 79 || w.Cwnd > 83 {
		t.Errorf("cwnd after one RTT at 1.2x target = %d, want about 81", w.Cwnd)
	}
	s = avoiding(20_000 + 200_000) // 8x the target: the cap
	w = Window{Cwnd: 100, Ssthresh: 50}
	oneRTT(&s, &w)
	if w.Cwnd != 50 {
		t.Errorf("cwnd after one RTT far above target = %d, want 50 (W/2)", w.Cwnd)
	}
	for i := 0; i < 20; i++ {
		oneRTT(&s, &w)
	}
	if w.Cwnd != MinCwnd {
		t.Errorf("cwnd floor = %d, want %d", w.Cwnd, MinCwnd)
	}
}

func TestSlowStartExitsAtThreeQuartersOfTarget(t *testing.T) {
	s := New(20_000, 0)
	w := Window{Cwnd: 10, Ssthresh: SsthreshInfinite}
	s.RTT(10_000, 0)
	s.Ack(&w, 16, 1, 10_000, true) // gain 1/4: +4
	if s.Phase != SlowStart || w.Cwnd != 14 {
		t.Fatalf("slow start: phase %v cwnd %d, want slow-start 14", s.Phase, w.Cwnd)
	}
	settle(&s, 10_000+15_000) // queuing delay exactly 3/4 target: stay
	s.Ack(&w, 4, 3, 10_000, true)
	if s.Phase != SlowStart {
		t.Fatalf("left slow start at exactly 3/4 of target")
	}
	settle(&s, 10_000+15_001)
	s.Ack(&w, 4, 1000, 10_000, true)
	if s.Phase != Avoid || w.Ssthresh != w.Cwnd || s.TNext != 1000+2*10_000 {
		t.Fatalf("after qd > 3/4 target: phase %v cwnd %d ssthresh %d next %d", s.Phase, w.Cwnd, w.Ssthresh, s.TNext)
	}
}

func TestSlowdownSchedule(t *testing.T) {
	const srtt = 10_000
	s := New(25_000, 0)
	s.RTT(srtt, 0)
	w := Window{Cwnd: 40, Ssthresh: 40}
	s.Ack(&w, 1, 0, srtt, true) // cwnd >= ssthresh: slow start ends at t=0
	if s.Phase != Avoid || s.TNext != 2*srtt {
		t.Fatalf("first slowdown at %d (phase %v), want %d", s.TNext, s.Phase, 2*srtt)
	}
	settle(&s, srtt+10_000) // its own queue stands: the base not seen since
	s.Ack(&w, 1, 2*srtt, srtt, true)
	if s.Phase != Hold || w.Cwnd != MinCwnd || w.Ssthresh != 40 {
		t.Fatalf("slowdown: phase %v cwnd %d ssthresh %d", s.Phase, w.Cwnd, w.Ssthresh)
	}
	s.Ack(&w, 1, 4*srtt-1, srtt, true)
	if s.Phase != Hold || w.Cwnd != MinCwnd {
		t.Fatalf("hold ended before 2 RTTs")
	}
	now := uint32(4 * srtt)
	for s.Phase != Avoid {
		s.Ack(&w, 1, now, srtt, true)
		now += 100
	}
	took := now - 100 - 2*srtt
	if w.Cwnd != 40 || s.TNext != now-100+9*took {
		t.Errorf("after restart: cwnd %d (want 40), next slowdown %d, want %d (9 x %d)", w.Cwnd, s.TNext, now-100+9*took, took)
	}
}

func TestSlowdownNowOnlyInAvoid(t *testing.T) {
	s := New(25_000, 0)
	s.RTT(10_000, 0)
	s.SlowdownNow(5)
	if s.Flags&FlagScheduled != 0 {
		t.Fatal("a flow in slow start was scheduled to slow down")
	}
	w := Window{Cwnd: 40, Ssthresh: 40}
	s.Ack(&w, 1, 10, 10_000, true) // ends slow start, first slowdown at 2 RTTs
	s.SlowdownNow(11)
	s.Ack(&w, 1, 12, 10_000, true)
	if s.Phase != Hold || w.Cwnd != MinCwnd || s.TSlowdown != 12 {
		t.Fatalf("after SlowdownNow: phase %v cwnd %d slowdown at %d", s.Phase, w.Cwnd, s.TSlowdown)
	}
}

// restarted returns a state in a restart after a slowdown from cwnd 40,
// base 20 ms, the given current delay; join: the slowdown made room for a
// new flow.
func restarted(t *testing.T, cur uint32, join bool) (State, Window) {
	t.Helper()
	const srtt = 20_000
	s := avoiding(20_000 + 10_000) // a queue over a quarter of the target: the base not seen
	w := Window{Cwnd: 40, Ssthresh: 40}
	if join {
		s.SlowdownNow(10)
	} else {
		s.TNext, s.Flags = 10, FlagScheduled
	}
	s.Ack(&w, 1, 10, srtt, true)
	s.Ack(&w, 1, 10+2*srtt, srtt, true) // the hold ends
	if s.Phase != Restart {
		t.Fatalf("phase %v after the hold, want restart", s.Phase)
	}
	settle(&s, cur)
	return s, w
}

func TestRestartEndsOnlyAboveTarget(t *testing.T) {
	s, w := restarted(t, 20_000+20_000, false) // qd 20 ms: above 3/4, below the target
	if w.Ssthresh != 40 {
		t.Fatalf("ssthresh %d after a periodic slowdown, want 40", w.Ssthresh)
	}
	s.Ack(&w, 6, 100_000, 20_000, true) // gain 1/3: +2
	if s.Phase != Restart || w.Cwnd != 4 {
		t.Fatalf("restart at qd 20 ms (target 25): phase %v cwnd %d, want restart, 4", s.Phase, w.Cwnd)
	}
	settle(&s, 20_000+25_001)
	s.Ack(&w, 4, 100_001, 20_000, true)
	if s.Phase != Avoid || w.Ssthresh != 4 {
		t.Fatalf("restart above the target: phase %v ssthresh %d, want avoid, 4", s.Phase, w.Ssthresh)
	}
}

func TestJoinSlowdownHalvesAndIgnoresDelay(t *testing.T) {
	s, w := restarted(t, 20_000+200_000, true) // far above the target
	if w.Ssthresh != 20 {
		t.Fatalf("ssthresh %d after a join slowdown from 40, want 20", w.Ssthresh)
	}
	for now := uint32(100_000); s.Phase == Restart; now += 100 {
		s.Ack(&w, 1, now, 20_000, true)
	}
	if w.Cwnd != 20 || s.Flags&FlagJoin != 0 {
		t.Errorf("join restart ended at cwnd %d (flags %d), want 20 and the join flag cleared", w.Cwnd, s.Flags)
	}
}

func TestDecreaseLowersSsthresh(t *testing.T) {
	s := avoiding(20_000 + 30_000)
	w := Window{Cwnd: 100, Ssthresh: 100}
	oneRTT(&s, &w)
	if w.Ssthresh != w.Cwnd || w.Cwnd >= 100 {
		t.Errorf("after a decrease: cwnd %d ssthresh %d, want ssthresh = cwnd < 100", w.Cwnd, w.Ssthresh)
	}
}

// TestCurrentDelaySpansABaseRTT: with dense ACKs (one every 100 us) the
// current delay is the minimum over about one base RTT (4 slots of base/3,
// the newest one partial),
// not over the last 4 samples: one low sample among high ones holds it down
// for at least 3 slots (one base RTT) and has left it 5 slots later.
func TestCurrentDelaySpansABaseRTT(t *testing.T) {
	const base, high, low = 40_000, 50_000, 41_000
	s := New(25_000, 0)
	s.RTT(base, 0)
	now := uint64(100)
	for ; now < 200_000; now += 100 {
		s.RTT(high, now)
	}
	if c := s.CurrentDelay(); c != high {
		t.Fatalf("current delay %d, want %d", c, high)
	}
	t0 := now
	s.RTT(low, t0)
	for now = t0 + 100; now < t0+5*base/SlotDiv; now += 100 {
		s.RTT(high, now)
		if c := s.CurrentDelay(); now <= t0+3*base/SlotDiv && c != low {
			t.Fatalf("%d us after the low sample: current delay %d, want %d", now-t0, c, low)
		}
	}
	if c := s.CurrentDelay(); c != high {
		t.Errorf("5 slots after the low sample: current delay %d, want %d", c, high)
	}
}

// TestBurstsBehindTheOtherDirection: a download whose ACKs wait behind a
// bulk upload's 500 ms queue gets its data in bursts a round trip (540 ms)
// apart, each queueing behind itself for 60 ms and draining before the
// next: no standing queue. The filter spans the round trip the flow's clock
// runs at (base + the other direction's queue), so every burst's first
// packet holds the current delay at the base; over one base RTT the filter
// would read the burst's own tail as 20-60 ms of queue.
func TestBurstsBehindTheOtherDirection(t *testing.T) {
	const base, other, rtt, burst = 40_000, 500_000, 540_000, 100 // us, us, us, packets
	s := New(10_000, 0)
	now := uint64(1)
	for b := 0; b < 40; b++ {
		for i := range burst {
			s.Delay(base+uint32(i)*600, other, now+uint64(i)*600) // 0.6 ms a packet at 20 Mbit/s
			if qd := s.QueuingDelay(); b >= 10 && qd > 0 {
				t.Fatalf("burst %d, packet %d: queuing delay %d us, want none (sother %d us)", b, i, qd, s.SOther)
			}
		}
		now += rtt
	}
}

// TestCurrentDelaySparseSamples: samples further apart than a slot (the
// receive side's smoothed RTT, the daemon's 50 ms steps) each start a slot,
// so the current delay is the minimum of the last 4 samples.
func TestCurrentDelaySparseSamples(t *testing.T) {
	s := New(25_000, 0)
	want := []uint32{60_000, 50_000, 50_000, 50_000, 50_000, 70_000}
	for i, r := range []uint32{60_000, 50_000, 70_000, 80_000, 90_000, 90_000} {
		s.RTT(r, uint64(i+1)*100_000)
		if c := s.CurrentDelay(); c != want[i] {
			t.Errorf("after sample %d: current delay %d, want %d", i, c, want[i])
		}
	}
}

// TestBurstyDeliveryIsNotQueue: every base RTT one ACK sees the base delay
// plus 5 ms and the others 40 ms above it (a link delivering in bursts, no
// standing queue): the window keeps growing, where a filter over the last
// 4 samples (40 ms of queue, above the 25 ms target) would halve it.
func TestBurstyDeliveryIsNotQueue(t *testing.T) {
	const base = 40_000
	s := New(25_000, 0)
	s.RTT(base, 0)
	s.Phase, s.Flags = Avoid, 0
	w := Window{Cwnd: 50, Ssthresh: 50}
	now := uint64(1)
	for rtt := 0; rtt < 20; rtt++ {
		for i := 0; i < 50; i++ {
			d := uint32(base + 40_000)
			if i == 0 {
				d = base + 5_000
			}
			now += base / 50
			s.RTT(d, now)
			s.Ack(&w, 1, uint32(now), base, true)
		}
	}
	if w.Cwnd <= 50 {
		t.Errorf("cwnd %d after 20 RTTs of bursty delivery, want it grown above 50", w.Cwnd)
	}
}

// TestSlowdownSkippedWhereSharingSawTheBase: a periodic slowdown due while
// sharing waits until sharing ends (FlagShareDefer); where the queue came
// down to a quarter of the share target meanwhile (a foreground's pause,
// the yield's hold), the base was measured and the slowdown is skipped,
// the next due 9 holds later. Without that sample it comes as before.
func TestSlowdownSkippedWhereSharingSawTheBase(t *testing.T) {
	const srtt, base = 20_000, 20_000
	for _, drained := range []bool{false, true} {
		s := avoiding(base + 10_000)
		w := Window{Cwnd: 40, Ssthresh: 40}
		s.Share(25_000/ShareSlope, FlagShare)
		s.TNext, s.Flags = 1_000, s.Flags|FlagScheduled
		if drained {
			settle(&s, base) // the queue drained: the base seen
		}
		s.Ack(&w, 1, 500, srtt, true)
		settle(&s, base+3_000) // a queue over a quarter of either target
		s.Ack(&w, 1, 2_000, srtt, true)
		if s.Phase != Avoid {
			t.Fatalf("drained %v: phase %v while sharing, want avoid (deferred)", drained, s.Phase)
		}
		s.Share(25_000, 0) // the foreground left
		s.Ack(&w, 1, 3_000, srtt, true)
		switch {
		case drained && (s.Phase != Avoid || s.TNext != 2_000+SlowdownSpacing*HoldRTTs*srtt):
			t.Errorf("base seen while sharing: phase %v, next slowdown %d; want avoid, %d", s.Phase, s.TNext, 2_000+SlowdownSpacing*HoldRTTs*srtt)
		case !drained && (s.Phase != Hold || w.Cwnd != MinCwnd):
			t.Errorf("base not seen: phase %v cwnd %d after sharing ended; want the deferred slowdown", s.Phase, w.Cwnd)
		}
	}
}
