// stats.go: summary statistics for repeated measurements.
package testbed

import (
	"fmt"
	"math"
	"sort"
)

// Jain is Jain's fairness index (sum x)^2 / (k sum x^2) over x (1 = fair).
func Jain(x []float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	if len(x) == 0 || s2 == 0 {
		return 0
	}
	return s * s / (float64(len(x)) * s2)
}

// Summary is mean, p95 and a 95% confidence interval of the mean.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	CI95 float64 `json:"ci95"` // half-width: mean ± CI95 (Student's t)
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

// Summarize computes a Summary (zero for no values).
func Summarize(v []float64) Summary {
	if len(v) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	n := len(s)
	mean := sum / float64(n)
	var ss float64
	for _, x := range s {
		ss += (x - mean) * (x - mean)
	}
	r := Summary{N: n, Mean: mean, P50: Percentile(s, 50), P95: Percentile(s, 95), Min: s[0], Max: s[n-1]}
	if n > 1 {
		sd := math.Sqrt(ss / float64(n-1))
		r.CI95 = tCrit(n-1) * sd / math.Sqrt(float64(n))
	}
	return r
}

// Percentile of sorted values, linear interpolation between ranks.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// tCrit is the two-sided 95% Student's t critical value for df degrees of
// freedom.
func tCrit(df int) float64 {
	table := []float64{0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	switch {
	case df <= 0:
		return math.NaN()
	case df < len(table):
		return table[df]
	case df < 60:
		return 2.01
	case df < 120:
		return 1.99
	}
	return 1.96
}

// fewReps is the number of repetitions below which a confidence interval
// says little: results show the median and the range instead.
const fewReps = 5

// Spread is what the repetitions can honestly say: with few of them the
// median and the range (min, max), else the mean and its 95% interval.
func (s Summary) Spread() (center, lo, hi float64) {
	if s.N < fewReps {
		return s.P50, s.Min, s.Max
	}
	return s.Mean, s.Mean - s.CI95, s.Mean + s.CI95
}

// SpreadText formats Spread: "3.30 (1.20–5.40)" or "3.30 ± 0.20".
func (s Summary) SpreadText(format string) string {
	if s.N < fewReps {
		return fmt.Sprintf(format+" ("+format+"–"+format+")", s.P50, s.Min, s.Max)
	}
	return fmt.Sprintf(format+" ± "+format, s.Mean, s.CI95)
}

// SpreadName names what Spread shows for n repetitions.
func SpreadName(n int) string {
	if n < fewReps {
		return fmt.Sprintf("median (min-max) of %d", n)
	}
	return "mean ± 95% CI"
}

// Mean is the arithmetic mean of v (0 for none).
func Mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
