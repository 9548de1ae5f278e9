// stats_test.go: table tests of the statistics every experiment reports
// with: Jain's index, percentiles, Student's t, summaries and spreads.
package testbed

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 || math.IsNaN(a) && math.IsNaN(b) }

func TestJain(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		want float64
	}{
		{[]float64{1, 1, 1, 1}, 1},
		{[]float64{1, 0, 0, 0}, 0.25},
		{[]float64{2, 1}, 0.9},
		{[]float64{3, 1, 0}, 16.0 / 30},
		{[]float64{5}, 1},
		{nil, 0},
		{[]float64{0, 0}, 0},
	} {
		if got := Jain(c.x); !near(got, c.want) {
			t.Errorf("Jain(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	for _, c := range []struct {
		sorted []float64
		p      float64
		want   float64
	}{
		{nil, 50, 0},
		{[]float64{7}, 95, 7},
		{[]float64{0, 10}, 95, 9.5},
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{10, 20, 30, 40, 50}, 25, 20},
		{[]float64{10, 20, 30, 40, 50}, 99, 49.6},
	} {
		if got := Percentile(c.sorted, c.p); !near(got, c.want) {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.sorted, c.p, got, c.want)
		}
	}
}

func TestTCrit(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
	}{
		{0, math.NaN()}, {-1, math.NaN()}, {1, 12.706}, {4, 2.776}, {10, 2.228},
		{30, 2.042}, {31, 2.01}, {59, 2.01}, {60, 1.99}, {119, 1.99}, {120, 1.96}, {1000, 1.96},
	} {
		if got := tCrit(c.df); !near(got, c.want) {
			t.Errorf("tCrit(%d) = %v, want %v", c.df, got, c.want)
		}
	}
}

func TestSummarizeCases(t *testing.T) {
	in := []float64{5, 1, 4, 2, 3}
	for _, c := range []struct {
		name string
		v    []float64
		want Summary
	}{
		{"none", nil, Summary{}},
		{"one: no interval", []float64{2.5}, Summary{N: 1, Mean: 2.5, P50: 2.5, P95: 2.5, Min: 2.5, Max: 2.5}},
		// sd = 1, t(1) = 12.706: CI = 12.706 * 1 / sqrt(2)
		{"two", []float64{3, 1.5858}, Summary{N: 2, Mean: 2.2929, P50: 2.2929, P95: 2.92929, CI95: 12.706 * 1.0000 / math.Sqrt2, Min: 1.5858, Max: 3}},
		// unsorted input: sorted for the percentiles, left as it was
		{"five", in, Summary{N: 5, Mean: 3, P50: 3, P95: 4.8, CI95: 2.776 * math.Sqrt(2.5) / math.Sqrt(5), Min: 1, Max: 5}},
		{"equal values: zero interval", []float64{4, 4, 4, 4, 4, 4}, Summary{N: 6, Mean: 4, P50: 4, P95: 4, Min: 4, Max: 4}},
	} {
		got := Summarize(c.v)
		w := c.want
		if got.N != w.N || math.Abs(got.Mean-w.Mean) > 1e-4 || math.Abs(got.P50-w.P50) > 1e-4 ||
			math.Abs(got.P95-w.P95) > 1e-4 || math.Abs(got.CI95-w.CI95) > 1e-3 || got.Min != w.Min || got.Max != w.Max {
			t.Errorf("%s: Summarize(%v) = %+v, want %+v", c.name, c.v, got, w)
		}
	}
	if in[0] != 5 || in[4] != 3 {
		t.Errorf("Summarize reordered its input: %v", in)
	}
}

func TestSpread(t *testing.T) {
	for _, c := range []struct {
		s             Summary
		c, lo, hi     float64
		text, textFmt string
	}{
		// four repetitions: the median and the range
		{Summary{N: 4, Mean: 3, P50: 2.5, CI95: 9, Min: 1, Max: 6}, 2.5, 1, 6, "2.5 (1.0–6.0)", "%.1f"},
		// five: the mean and its interval
		{Summary{N: 5, Mean: 3, P50: 2.5, CI95: 0.5, Min: 1, Max: 6}, 3, 2.5, 3.5, "3.00 ± 0.50", "%.2f"},
		{Summary{}, 0, 0, 0, "0 (0–0)", "%.0f"},
	} {
		center, lo, hi := c.s.Spread()
		if center != c.c || lo != c.lo || hi != c.hi {
			t.Errorf("%+v: Spread = %v %v %v, want %v %v %v", c.s, center, lo, hi, c.c, c.lo, c.hi)
		}
		if got := c.s.SpreadText(c.textFmt); got != c.text {
			t.Errorf("%+v: SpreadText = %q, want %q", c.s, got, c.text)
		}
	}
	for n, want := range map[int]string{0: "median (min-max) of 0", 4: "median (min-max) of 4", 5: "mean ± 95% CI"} {
		if got := SpreadName(n); got != want {
			t.Errorf("SpreadName(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestMean(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{2}, 2}, {[]float64{1, 2, 3, 4}, 2.5}, {[]float64{-1, 1}, 0}} {
		if got := Mean(c.v); !near(got, c.want) {
			t.Errorf("Mean(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}
