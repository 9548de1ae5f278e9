// cooppattern_test.go: the per-host pattern tells a share that recurs with
// the round from one that swings at random.
package coop

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// TestPatternRecurring: four hosts whose shares swing by 10 % with a
// period of 7 steps (phases a quarter apart, so every step's mean is the
// same) recur at 7 steps and are opposite at 4; CV = 0.1/sqrt(2).
func TestPatternRecurring(t *testing.T) {
	const steps = 210
	rows := make([][]float64, steps)
	for k := range rows {
		for h := 0; h < 4; h++ {
			rows[k] = append(rows[k], 1000*(1+0.1*math.Sin(2*math.Pi*float64(k)/7+float64(h)*math.Pi/2)))
		}
	}
	p := pattern(rows)
	if math.Abs(p.CV-0.1/math.Sqrt2) > 1e-3 {
		t.Errorf("CV %.4f, want %.4f", p.CV, 0.1/math.Sqrt2)
	}
	if want := float64(steps-7) / steps; math.Abs(p.ACFLong-want) > 0.01 {
		t.Errorf("acf at 7 steps %.3f, want %.3f", p.ACFLong, want)
	}
	if want := math.Cos(2*math.Pi*4/7) * float64(steps-4) / steps; math.Abs(p.ACFShort-want) > 0.01 {
		t.Errorf("acf at 4 steps %.3f, want %.3f", p.ACFShort, want)
	}
}

// TestPatternRandom: shares drawn independently per step have no pattern
// (autocorrelation near 0), the same CV; an idle host is left out.
func TestPatternRandom(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	rows := make([][]float64, 400)
	for k := range rows {
		for h := 0; h < 8; h++ {
			rows[k] = append(rows[k], 1000*(1+0.2*(r.Float64()-0.5)))
		}
		rows[k] = append(rows[k], 0) // a host that carried nothing
	}
	p := pattern(rows)
	if math.Abs(p.ACFShort) > 0.05 || math.Abs(p.ACFLong) > 0.05 {
		t.Errorf("acf 4/7 %+.3f/%+.3f, want about 0", p.ACFShort, p.ACFLong)
	}
	if want := 0.2 / math.Sqrt(12); math.Abs(p.CV-want) > 0.005 {
		t.Errorf("CV %.4f, want about %.4f", p.CV, want)
	}
	if p := pattern(nil); p != (hostPattern{}) {
		t.Errorf("no steps: %+v", p)
	}
}

// TestSeriesStatsPattern: the run's stats carry the pattern of the hosts'
// air bytes over the measured steps (not the readers' counts).
func TestSeriesStatsPattern(t *testing.T) {
	s := &coopSeries{Step: 200 * time.Millisecond}
	for k := 1; k <= 100; k++ {
		s.T = append(s.T, float64(k)*0.2)
		up := k%7 < 3 // host 0 ahead 3 steps of every 7, host 1 behind
		a0, a1 := int64(20_000), int64(20_000)
		if up {
			a0, a1 = 24_000, 16_000
		}
		s.Samples = append(s.Samples, []hostSample{{Bytes: 20_000, Air: a0}, {Bytes: 20_000, Air: a1}})
	}
	st := s.stats([]int{0, 1}, 0, 100)
	if st.ACF7 < 0.9 || st.ACF4 > -0.3 || st.HostCV < 0.09 || st.HostCV > 0.11 {
		t.Errorf("pattern: CV %.3f, acf 4/7 %+.2f/%+.2f", st.HostCV, st.ACF4, st.ACF7)
	}
}
