// dcf_test.go: the DCF contention model against Bianchi's saturation
// analysis (a pure-Go reference computed here), in simulated time.
package emu

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

// bianchi is Bianchi's saturation fixed point for n contenders sending
// size-byte packets, with the retry limit: per attempt j the counter is
// uniform in [0, W_j-1], W_j = min(2^j (CWmin+1), CWmax+1), and a frame
// has RetryLimit attempts, so by renewal a contender transmits in a slot
// with probability
//
//	tau(p) = sum_j p^j / sum_j p^j (W_j+1)/2,   p = 1 - (1-tau)^(n-1)
//
// and the throughput (IP payload, bit/s) is
//
//	S = Ps Ptr E[P] / ((1-Ptr) slot + Ptr Ps Ts + Ptr (1-Ps) Tc)
//
// with Ts and Tc the busy times of a success and a collision including the
// DIFS (EIFS after a collision) before the next countdown.
func bianchi(phy DCFPHY, c *dcfCore, n, size int) (s, p float64) {
	tau := func(p float64) float64 {
		num, den, pj := 0.0, 0.0, 1.0
		for j := 0; j < phy.RetryLimit; j++ {
			w := float64(min((phy.CWMin+1)<<j, phy.CWMax+1))
			num += pj
			den += pj * (w + 1) / 2
			pj *= p
		}
		return num / den
	}
	lo, hi := 0.0, 1.0
	for i := 0; i < 100; i++ {
		mid := (lo + hi) / 2
		if 1-math.Pow(1-tau(mid), float64(n-1)) > mid {
			lo = mid
		} else {
			hi = mid
		}
	}
	p = (lo + hi) / 2
	t := tau(p)
	ptr := 1 - math.Pow(1-t, float64(n))
	ps := float64(n) * t * math.Pow(1-t, float64(n-1)) / ptr
	air := c.frameAir(size).Seconds()
	ts := phy.DIFS.Seconds() + air + phy.SIFS.Seconds() + phy.ACK.Seconds()
	tc := phy.EIFS.Seconds() + air
	s = ps * ptr * float64(size*8) / ((1-ptr)*phy.Slot.Seconds() + ptr*ps*ts + ptr*(1-ps)*tc)
	return s, p
}

// saturate runs the model with n always-backlogged contenders for the
// given number of rounds: payload rate (bit/s), collision probability per
// attempt, and each contender's delivered frames.
func saturate(t *testing.T, n, rounds, size int) (rate, p float64, per []float64, st DCFStats) {
	t.Helper()
	c, err := newDCFCore(DCFConfig{Rate: 20e6, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	heads := make([]int, n)
	for i := range heads {
		c.add()
		heads[i] = size
	}
	per = make([]float64, n)
	for k := 0; k < rounds; k++ {
		r := c.round(heads)
		if r.winner >= 0 {
			per[r.winner]++
		}
	}
	st = c.stats
	rate = float64(st.Successes) * float64(size*8) / st.Elapsed.Seconds()
	p = float64(st.Collided) / float64(st.Collided+st.Successes)
	return rate, p, per, st
}

// TestDCFBianchi: the model's saturation throughput and collision
// probability agree with Bianchi's fixed point. Bianchi's decoupling
// assumption (every attempt collides with the same p) is an approximation
// itself, best for larger n; the tolerances are 2 % on throughput and
// 0.03 (absolute) on p.
func TestDCFBianchi(t *testing.T) {
	var prevP float64
	for _, n := range []int{1, 2, 5, 10, 20} {
		rate, p, _, st := saturate(t, n, 300000, CalibrationPacket)
		c, _ := newDCFCore(DCFConfig{Rate: 20e6})
		want, wantP := bianchi(OFDM, c, n, CalibrationPacket)
		t.Logf("n=%2d model %6.3f Mbit/s p=%.3f | Bianchi %6.3f Mbit/s p=%.3f | ratio %.4f, air lost %.1f %%, retry drops %d",
			n, rate/1e6, p, want/1e6, wantP, rate/want, 100*st.AirLost.Seconds()/st.Elapsed.Seconds(), st.RetryDrops)
		if math.Abs(rate/want-1) > 0.02 {
			t.Errorf("n=%d: throughput %.3f Mbit/s, Bianchi %.3f", n, rate/1e6, want/1e6)
		}
		if math.Abs(p-wantP) > 0.03 {
			t.Errorf("n=%d: collision probability %.3f, Bianchi %.3f", n, p, wantP)
		}
		if n > 1 && p <= prevP {
			t.Errorf("n=%d: collision probability %.3f not above %.3f at fewer contenders", n, p, prevP)
		}
		prevP = p
	}
}

// TestDCFCalibration: one backlogged station alone gets the configured
// rate of 1500-byte packets; a rate DCF's overhead cannot carry is refused.
func TestDCFCalibration(t *testing.T) {
	rate, p, _, _ := saturate(t, 1, 200000, CalibrationPacket)
	if math.Abs(rate/20e6-1) > 0.005 || p != 0 {
		t.Errorf("one station: %.3f Mbit/s, p %.3f; want 20 Mbit/s, 0", rate/1e6, p)
	}
	c, _ := newDCFCore(DCFConfig{Rate: 20e6})
	if r := c.phyRate; r < 25e6 || r > 32e6 {
		t.Errorf("PHY rate %.2f Mbit/s for 20 Mbit/s of payload", r/1e6)
	}
	if _, err := newDCFCore(DCFConfig{Rate: 100e6}); err == nil {
		t.Error("100 Mbit/s accepted: one station's overhead alone exceeds 1500 B per 120 µs")
	}
	// Small frames cost the same overhead: 40-byte ACKs move far less.
	small, _, _, _ := saturate(t, 1, 50000, 40)
	if small > 2e6 {
		t.Errorf("40-byte frames: %.2f Mbit/s, want the overhead to dominate", small/1e6)
	}
}

// TestDCFFairness: saturated contenders get equal shares over a long run.
func TestDCFFairness(t *testing.T) {
	for _, n := range []int{2, 10} {
		_, _, per, _ := saturate(t, n, 200000, CalibrationPacket)
		if j := jain(per); j < 0.999 {
			t.Errorf("n=%d: Jain %.4f over %v", n, j, per)
		}
	}
}

// TestDCFBackoffRules: counters freeze across rounds, collisions double CW
// up to CWmax, the retry limit drops the frame and resets CW, a success
// resets CW.
func TestDCFBackoffRules(t *testing.T) {
	c, _ := newDCFCore(DCFConfig{Rate: 20e6})
	a, b := c.add(), c.add()
	c.st[a].counter, c.st[b].counter = 3, 5
	r := c.round([]int{1500, 1500})
	if r.winner != a || c.st[b].counter != 2 || c.st[a].counter != -1 {
		t.Fatalf("round: winner %d, counters %+v", r.winner, c.st)
	}
	if want := OFDM.DIFS + 3*OFDM.Slot + c.frameAir(1500) + OFDM.SIFS + OFDM.ACK; r.dur != want {
		t.Errorf("success took %v, want %v", r.dur, want)
	}
	// b alone: it spends what is left of its counter.
	r = c.round([]int{0, 1500})
	if r.winner != b || r.dur != OFDM.DIFS+2*OFDM.Slot+c.frameAir(1500)+OFDM.SIFS+OFDM.ACK {
		t.Errorf("b alone: winner %d, %v", r.winner, r.dur)
	}
	for k := 1; k <= OFDM.RetryLimit; k++ {
		c.st[a].counter, c.st[b].counter = 0, 0
		r = c.round([]int{1500, 100})
		if r.winner != -1 {
			t.Fatalf("attempt %d: winner %d", k, r.winner)
		}
		if k < OFDM.RetryLimit {
			if want := min((OFDM.CWMin+1)<<k-1, OFDM.CWMax); c.st[a].cw != want || len(r.dropped) != 0 {
				t.Errorf("after %d collisions CW %d, dropped %v; want %d", k, c.st[a].cw, r.dropped, want)
			}
			if want := c.frameAir(1500); k > 1 && r.dur != OFDM.EIFS+want {
				t.Errorf("collision %d took %v, want EIFS + the longest frame %v", k, r.dur, OFDM.EIFS+want)
			}
		} else if len(r.dropped) != 2 || c.st[a].cw != OFDM.CWMin || c.st[a].retry != 0 {
			t.Errorf("retry limit: dropped %v, state %+v", r.dropped, c.st[a])
		}
	}
	if c.stats.RetryDrops != 2 || c.stats.Collisions != uint64(OFDM.RetryLimit) {
		t.Errorf("stats %+v", c.stats)
	}
}

func TestDCFIdle(t *testing.T) {
	c, _ := newDCFCore(DCFConfig{Rate: 20e6})
	c.add()
	c.idle(time.Second)
	if c.stats.Idle != time.Second || c.stats.Elapsed != time.Second {
		t.Errorf("stats %+v", c.stats)
	}
}

// jain is Jain's fairness index (1 = equal shares).
func jain(x []float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s, s2 = s+v, s2+v*v
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(x)) * s2)
}

// TestDCFMedium: links on a medium are served by its contention, with the
// model's schedule whatever the goroutine's wake-ups: three stations and
// the AP, every queue full from the start, deliver every frame (but those
// dropped at the retry limit), in the order and the simulated time that the
// model alone gives for the same seed; the AP is one contender among four.
func TestDCFMedium(t *testing.T) {
	const per = 60
	sizes := []int{1500, 1500, 1500, 200} // the AP's queue holds small frames
	m, err := NewDCF(DCFConfig{Rate: 20e6, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	links, order := drainDCFLinks(t, m, sizes, per)
	got := m.Stats()
	want, model := modelDCFRounds(sizes, per)
	got.Idle, got.Elapsed = 0, got.Elapsed-got.Idle // an idle stretch since the end may be counted
	if got != model {
		t.Errorf("medium %+v\nmodel  %+v", got, model)
	}
	if len(order) != len(want) {
		t.Fatalf("%d delivered, model %d", len(order), len(want))
	}
	share := make([]int, len(sizes))
	for k := range order {
		if order[k] != want[k] {
			t.Fatalf("delivery %d from %d, model %d", k, order[k], want[k])
		}
		if k < len(order)/2 {
			share[order[k]]++
		}
	}
	for i, n := range share {
		if n < len(order)/2/len(sizes)/2 {
			t.Errorf("contender %d had %d of the first %d frames: %v", i, n, len(order)/2, share)
		}
		s := links[i].Stats()
		if s.OutPackets+s.DropRetry != per || s.DropTail != 1 {
			t.Errorf("link %d: %+v", i, s)
		}
	}
	t.Logf("shares of the first half %v, %+v", share, got)
}

// drainDCFLinks fills one link per size on medium m with per frames of
// that size (checking the queue limit), runs them until every frame was
// sent or dropped, and returns the links and the order in which their
// frames were delivered (the link's index).
func drainDCFLinks(t *testing.T, m *DCF, sizes []int, per int) ([]*Link, []int) {
	var mu sync.Mutex
	var order []int
	links := make([]*Link, len(sizes))
	for i := range links {
		links[i] = NewLink(LinkConfig{Air: m, QueuePackets: per}, func([]byte, any) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
		for k := 0; k < per; k++ {
			if !links[i].Enqueue(make([]byte, sizes[i]), nil) {
				t.Fatal("enqueue refused")
			}
		}
		if links[i].Enqueue(make([]byte, 1), nil) {
			t.Fatal("queue limit not kept")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range links {
		wg.Add(1)
		go func() { defer wg.Done(); l.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(time.Minute) // ~0.2 s of air; generous for a loaded machine
	for {
		// the medium counts a success before its link hands the frame
		// on: done when every counted success has been delivered too
		st := m.Stats()
		mu.Lock()
		delivered := uint64(len(order))
		mu.Unlock()
		if st.Successes+st.RetryDrops == uint64(per*len(sizes)) && delivered == st.Successes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after a minute: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	return links, append([]int(nil), order...)
}

// modelDCFRounds plays the same rounds in the model alone: the winners in
// order, and the model's statistics.
func modelDCFRounds(sizes []int, per int) ([]int, DCFStats) {
	c, _ := newDCFCore(DCFConfig{Rate: 20e6, Seed: 5})
	left := make([]int, len(sizes))
	var want []int
	for i := range sizes {
		c.add()
		left[i] = per
	}
	heads := make([]int, len(sizes))
	for c.stats.Successes+c.stats.RetryDrops < uint64(per*len(sizes)) {
		for i := range heads {
			heads[i] = 0
			if left[i] > 0 {
				heads[i] = sizes[i]
			}
		}
		r := c.round(heads)
		if r.winner >= 0 {
			left[r.winner]--
			want = append(want, r.winner)
		}
		for _, i := range r.dropped {
			left[i]--
		}
	}
	return want, c.stats
}
