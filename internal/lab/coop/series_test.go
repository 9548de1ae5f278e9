// series_test.go: table tests of the figures coop reports from a series of
// host samples: the median cap, the per-interval Jain index over the
// active hosts, and the growth of cumulative counters.
package coop

import (
	"math"
	"testing"
)

func TestMedianCap(t *testing.T) {
	s := &coopSeries{T: []float64{1, 2, 3}, Samples: [][]hostSample{
		{{Cap: 100}, {Cap: 100}},         // at or before from: left out
		{{Cap: 40}, {Cap: 0}, {Cap: 60}}, // 0: no cap, left out
		{{Cap: 50}, {Cap: 70}},
	}}
	for _, c := range []struct {
		from float64
		want uint32
	}{
		{0, 70}, // 40 50 60 70 100 100 -> index 3
		{1, 60}, // 40 50 60 70 -> index 2
		{2, 70}, // 50 70 -> index 1
		{3, 0},  // nothing after 3 s
		{10, 0}, // nothing at all
	} {
		if got := medianCap(s, c.from); got != c.want {
			t.Errorf("medianCap(from %v) = %d, want %d", c.from, got, c.want)
		}
	}
}

func TestActiveJain(t *testing.T) {
	s := &coopSeries{T: []float64{1, 2, 3, 4}, Samples: [][]hostSample{
		{{Bytes: 1}, {Bytes: 1}},
		{{Bytes: 2, Air: 1}, {Bytes: 1, Air: 1}}, // Jain 0.9 by bytes, 1 by air
		{{Bytes: 5, Air: 0}, {Bytes: 0, Air: 0}}, // one active host: 1; no air: skipped
		{{Bytes: 0}, {Bytes: 0}},                 // no host active: skipped
	}}
	for _, c := range []struct {
		name     string
		from, to float64
		bytes    func(hostSample) int64
		want     float64
	}{
		{"bytes, all", 0, 4, appBytes, (1 + 0.9 + 1) / 3},
		{"bytes, after 1 s", 1, 4, appBytes, (0.9 + 1) / 2},
		{"bytes, to 2 s", 1, 2, appBytes, 0.9},
		{"air", 1, 4, airBytes, 1},
		{"empty window", 4, 9, appBytes, 0},
	} {
		if got := activeJain(s, c.from, c.to, c.bytes); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: activeJain = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDelta(t *testing.T) {
	v := []uint64{10, 15, 30, 31}
	for _, c := range []struct {
		first, last int
		want        float64
	}{{0, 0, 10}, {0, 3, 31}, {1, 2, 20}, {2, 3, 16}, {3, 3, 1}} {
		if got := delta(v, c.first, c.last); got != c.want {
			t.Errorf("delta(%v, %d, %d) = %v, want %v", v, c.first, c.last, got, c.want)
		}
	}
	if got := delta([]float64{0.5, 2}, 1, 1); got != 1.5 {
		t.Errorf("float delta %v, want 1.5", got)
	}
}
