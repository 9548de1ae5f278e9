// report.go: readable output for latency results — a summary table with one
// row per tool and thread, and a histogram folded into coarse ranges (the
// 1 µs bins themselves are in --json or with full bins requested).
package latency

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints one summary row per result (and per thread when a
// result has several), in µs.
func WriteTable(w io.Writer, rs ...*Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tool\tthread\tpolicy\tsamples\tmin_us\tavg_us\tp50_us\tp99_us\tmax_us\toverflow\t")
	for _, r := range rs {
		rows := []ThreadResult{{Thread: -1, Stats: r.All}}
		if len(r.Threads) > 1 {
			rows = append(rows, r.Threads...)
		}
		for _, t := range rows {
			th := "all"
			if t.Thread >= 0 {
				th = fmt.Sprint(t.Thread)
			}
			pol := r.Policy
			if r.Policy == "fifo" || r.Policy == "rr" {
				pol = fmt.Sprintf("%s:%d", r.Policy, r.Priority)
			}
			s := t.Stats
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t%.1f\t%d\t\n", r.Tool, th, pol, s.Samples,
				s.MinUS, s.AvgUS, s.P50US, s.P99US, s.MaxUS, s.Overflow)
		}
	}
	tw.Flush()
}

// histRanges are the edges (µs) the readable histogram folds bins into.
var histRanges = []int{0, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 1000000}

// WriteHistogram prints s's histogram folded into ranges with a bar each;
// with full set it lists every non-empty 1 µs bin instead.
func WriteHistogram(w io.Writer, s Stats, full bool) {
	if full {
		for i, v := range s.Hist {
			if v > 0 {
				fmt.Fprintf(w, "%6d us %8d\n", i, v)
			}
		}
		fmt.Fprintf(w, "overflow  %8d (>= %d us)\n", s.Overflow, len(s.Hist))
		return
	}
	counts := make([]uint64, len(histRanges)-1)
	for i, v := range s.Hist {
		for k := len(histRanges) - 2; k >= 0; k-- {
			if i >= histRanges[k] {
				counts[k] += v
				break
			}
		}
	}
	var peak uint64 = 1
	for _, c := range counts {
		peak = max(peak, c)
	}
	peak = max(peak, s.Overflow)
	last := 0
	for k, c := range counts {
		if c > 0 {
			last = k
		}
	}
	for k := 0; k <= last; k++ {
		fmt.Fprintf(w, "%7d-%-7d us %8d %s\n", histRanges[k], histRanges[k+1], counts[k], bar(counts[k], peak))
	}
	if s.Overflow > 0 {
		fmt.Fprintf(w, "  overflow(>bound) %8d %s\n", s.Overflow, bar(s.Overflow, peak))
	}
}

func bar(v, peak uint64) string {
	n := int(40 * v / peak)
	if v > 0 && n == 0 {
		n = 1
	}
	return strings.Repeat("#", n)
}

// WriteDifference prints a's figures minus b's (e.g. lanes − cyclictest), in
// µs, for all threads together.
func WriteDifference(w io.Writer, a, b *Result) {
	x, y := a.All, b.All
	fmt.Fprintf(w, "difference (%s - %s): avg %+.1f us, p50 %+.0f us, p99 %+.0f us, max %+.1f us\n",
		a.Tool, b.Tool, x.AvgUS-y.AvgUS, x.P50US-y.P50US, x.P99US-y.P99US, x.MaxUS-y.MaxUS)
}
