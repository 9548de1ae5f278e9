// feedback_test.go: lbe-feedback's reported delay and background shares
// from the meter's bins (no root).
package lbe

import (
	"math"
	"testing"
	"time"
)

func TestFeedbackDelay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name   string
		first  time.Duration // after t0; <0: no foreground packet
		bins   [][2]uint64   // [background, other]
		delay  time.Duration
		shares []float64
	}{
		// the foreground starts 50 ms in; bin 2 (200-300 ms) is the first
		// below 10% background: 300 - 50 ms
		{"yields in bin 2", 50 * time.Millisecond, [][2]uint64{{100, 0}, {80, 20}, {5, 95}, {0, 100}},
			250 * time.Millisecond, []float64{1, 0.8, 0.05, 0}},
		// exactly 10% is not below it; an empty bin has no share
		{"never below 10%", 0, [][2]uint64{{10, 90}, {0, 0}, {50, 50}},
			-1, []float64{0.1, -1, 0.5}},
		// a bin with only background is no yield, however small
		{"background alone", 0, [][2]uint64{{1, 0}, {0, 10}},
			200 * time.Millisecond, []float64{1, 0}},
		{"no foreground packet", -1, [][2]uint64{{0, 0}, {1, 99}}, -1, []float64{-1, 0.01}},
		{"no bins", 0, nil, -1, nil},
	} {
		m := &flowMeter{t0: t0, bins: c.bins}
		if c.first >= 0 {
			m.first = t0.Add(c.first)
		}
		d, sh := m.feedbackDelay()
		if d != c.delay {
			t.Errorf("%s: delay %v, want %v", c.name, d, c.delay)
		}
		if len(sh) != len(c.shares) {
			t.Errorf("%s: shares %v, want %v", c.name, sh, c.shares)
			continue
		}
		for i := range sh {
			if math.Abs(sh[i]-c.shares[i]) > 1e-12 {
				t.Errorf("%s: share %d = %v, want %v", c.name, i, sh[i], c.shares[i])
			}
		}
	}
}
