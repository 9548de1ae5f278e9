// cooppattern.go: whether the hosts' shares of the medium swing per step
// at random or in a pattern that recurs with the RTT.
//
// Jain's index per 200 ms says how unequal the hosts' bytes are within a
// step, not why. Each run reads the why from each host's deviation
// from the step's mean: a host whose data keeps one place in every round
// (a window-limited sender, ACK-clocked where its data arrived) deviates
// the same way one round later, so its deviation's autocorrelation at the
// lag of a round or a few rounds is high (+0.4 to +0.9 at 4 and 7 steps for
// 16 downloads through 280 ms rounds), where noise gives about 0. The
// per-host coefficient of variation over the steps is the swing itself:
// 1/(1 + CV^2) is the index the hosts' average swing alone would give.
// Both are computed over each host's air bytes (coopair.go).
package coop

import (
	"math"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// Lags (in steps of the recorder) of the pattern's autocorrelation: 800 ms
// and 1.4 s at the 200 ms step, about 3 and 5 rounds of the lab's 280 ms.
const (
	patternLagShort = 4
	patternLagLong  = 7
)

// hostPattern is the per-host pattern over a run's steady steps.
type hostPattern struct {
	CV       float64 // Mean over hosts of the per-step coefficient of variation
	ACFShort float64 // Mean over hosts of the autocorrelation at patternLagShort
	ACFLong  float64 // ... at patternLagLong
}

// pattern computes hostPattern over steps[k][host] (bytes per step);
// hosts that carried nothing are left out.
func pattern(steps [][]float64) hostPattern {
	var p hostPattern
	if len(steps) == 0 {
		return p
	}
	devs := relativeDeviations(steps)
	n := 0
	for h := range steps[0] {
		col := column(steps, h)
		m := testbed.Mean(col)
		if m <= 0 {
			continue
		}
		n++
		p.CV += stddev(col, m) / m
		p.ACFShort += autocorr(devs[h], patternLagShort)
		p.ACFLong += autocorr(devs[h], patternLagLong)
	}
	if n > 0 {
		p.CV, p.ACFShort, p.ACFLong = p.CV/float64(n), p.ACFShort/float64(n), p.ACFLong/float64(n)
	}
	return p
}

// relativeDeviations returns, per host, its deviation from each step's
// Mean over the hosts, relative to that mean (0 for an empty step).
func relativeDeviations(steps [][]float64) [][]float64 {
	devs := make([][]float64, len(steps[0]))
	for _, row := range steps {
		m := testbed.Mean(row)
		for h, v := range row {
			d := 0.0
			if m > 0 {
				d = (v - m) / m
			}
			devs[h] = append(devs[h], d)
		}
	}
	return devs
}

// column is host h's values over the steps.
func column(steps [][]float64, h int) []float64 {
	c := make([]float64, len(steps))
	for k, row := range steps {
		c[k] = row[h]
	}
	return c
}

// stddev is the population standard deviation of v around m.
func stddev(v []float64, m float64) float64 {
	s := 0.0
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return math.Sqrt(s / float64(len(v)))
}

// autocorr is v's autocorrelation at lag (0 when v is constant or shorter
// than the lag).
func autocorr(v []float64, lag int) float64 {
	if len(v) <= lag {
		return 0
	}
	m := testbed.Mean(v)
	var c0, c float64
	for i, x := range v {
		c0 += (x - m) * (x - m)
		if i+lag < len(v) {
			c += (x - m) * (v[i+lag] - m)
		}
	}
	if c0 == 0 {
		return 0
	}
	return c / c0
}
