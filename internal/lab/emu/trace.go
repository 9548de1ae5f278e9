// trace.go: mahimahi packet-delivery traces (mm-link format).
//
// A trace is one line per opportunity to deliver one 1,500-byte packet, as
// milliseconds since the trace start; several opportunities in one
// millisecond repeat the timestamp; when the trace ends it repeats from the
// start with a period equal to its last timestamp (mahimahi's rule; a trace
// that ends at 0 ms, e.g. the single line "0", is given a period of 1 ms).
package emu

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// OpportunityBytes is what one trace line lets through (mahimahi uses the
// MTU; our TUNs carry bare IP packets, so 1,500 bytes).
const OpportunityBytes = 1500

// Trace is a parsed mahimahi trace.
type Trace struct {
	Name   string
	MS     []uint64 // opportunity times in ms, non-decreasing
	Period uint64   // repeat period in ms (>= 1)
}

// ParseTrace reads a trace file.
func ParseTrace(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	defer f.Close()
	t := &Trace{Name: path}
	sc := bufio.NewScanner(f)
	line := 0
	var last uint64
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a millisecond count: %q", path, line, s)
		}
		if v < last {
			return nil, fmt.Errorf("%s:%d: timestamps go backwards (%d after %d)", path, line, v, last)
		}
		last = v
		t.MS = append(t.MS, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	if len(t.MS) == 0 {
		return nil, fmt.Errorf("%s: empty trace", path)
	}
	t.Period = last
	if t.Period == 0 {
		t.Period = 1
	}
	return t, nil
}

// FixedTrace returns a trace with n opportunities every ms (n=1: 12 Mbit/s).
func FixedTrace(n int) *Trace {
	t := &Trace{Name: fmt.Sprintf("fixed-%d-per-ms", n), Period: 1}
	for i := 0; i < n; i++ {
		t.MS = append(t.MS, 1)
	}
	return t
}

// MeanRate is the trace's average rate in bits/s.
func (t *Trace) MeanRate() float64 {
	return float64(len(t.MS)) * OpportunityBytes * 8 / (float64(t.Period) / 1000)
}

// at returns the absolute offset (from the trace start) of opportunity i.
func (t *Trace) at(i uint64) time.Duration {
	n := uint64(len(t.MS))
	ms := (i/n)*t.Period + t.MS[i%n]
	return time.Duration(ms) * time.Millisecond
}

// firstAtOrAfter returns the index of the first opportunity at or after
// offset d.
func (t *Trace) firstAtOrAfter(d time.Duration) uint64 {
	if d < 0 {
		d = 0
	}
	ms := uint64((d + time.Millisecond - 1) / time.Millisecond)
	n := uint64(len(t.MS))
	cycle := ms / t.Period
	rem := ms % t.Period
	// A timestamp equal to the period ends a cycle at the same instant the
	// next one starts: look for it in the previous cycle first.
	if cycle > 0 && rem == 0 {
		j := sort.Search(len(t.MS), func(k int) bool { return t.MS[k] >= t.Period })
		if j < len(t.MS) {
			return (cycle-1)*n + uint64(j)
		}
	}
	j := sort.Search(len(t.MS), func(k int) bool { return t.MS[k] >= rem })
	if j == len(t.MS) {
		return (cycle + 1) * n
	}
	return cycle*n + uint64(j)
}

// Count returns the number of opportunities with offset in [from, to).
func (t *Trace) Count(from, to time.Duration) uint64 {
	return t.firstAtOrAfter(to) - t.firstAtOrAfter(from)
}
