// merge.go: adding up the results of several rounds of one tool, so that a
// comparison can alternate the two tools in short rounds (a shared machine's
// load drifts; alternating exposes both tools to the same drift).
package latency

import "math"

// Merge adds up results of the same tool and settings, thread by thread.
// The first result gives the settings; nil results are skipped.
func Merge(rs ...*Result) *Result {
	var out *Result
	var threads []*hist
	var all *hist
	for _, r := range rs {
		if r == nil {
			continue
		}
		if out == nil {
			c := *r
			c.Threads = append([]ThreadResult(nil), r.Threads...)
			out, all = &c, statsHist(r.All)
			for _, t := range r.Threads {
				threads = append(threads, statsHist(t.Stats))
			}
			continue
		}
		all.merge(statsHist(r.All))
		for i, t := range r.Threads {
			if i < len(threads) {
				threads[i].merge(statsHist(t.Stats))
			}
		}
	}
	if out == nil {
		return nil
	}
	out.All = all.stats()
	for i, h := range threads {
		out.Threads[i].Stats = h.stats()
	}
	return out
}

// statsHist rebuilds the histogram behind s (exact sum and extremes, 1 µs
// bins, bound as wide as needed).
func statsHist(s Stats) *hist {
	h := &hist{bins: make([]uint64, len(s.Hist)), overflow: s.Overflow, n: s.Samples,
		min: math.MaxInt64, max: math.MinInt64, sum: s.AvgUS * 1e3 * float64(s.Samples)}
	copy(h.bins, s.Hist)
	if s.Samples > 0 {
		h.min, h.max = int64(math.Round(s.MinUS*1e3)), int64(math.Round(s.MaxUS*1e3))
	}
	return h
}
