// summary_test.go: table tests of how lbe turns trials into the reported
// cells (grouping, order, failed trials) and of lbe-remote's percentile.
package lbe

import (
	"math"
	"testing"
)

func TestSummarizeLBE(t *testing.T) {
	trials := []LBETrial{
		{Method: "4", Dir: "upload", SizeKB: 400, Seconds: 3, CPUms: 30},
		{Method: "2", Dir: "upload", SizeKB: 100, Seconds: 2, CPUms: 10, DaemonMs: 0, SoftirqMs: 4},
		{Method: "2", Dir: "upload", SizeKB: 100, Seconds: 4, CPUms: 20, SoftirqMs: 6},
		{Method: "2", Dir: "upload", SizeKB: 100, Error: "timeout", Seconds: 99},
		{Method: "4", Dir: "download", SizeKB: 400, Seconds: 1, DaemonMs: 2},
		{Method: "4", Dir: "upload", SizeKB: 100, Seconds: 1.5},
	}
	cells := SummarizeLBE(trials)
	// ordered by direction, then size, then method
	want := []struct {
		m, d       string
		size, n    int
		mean, errs float64
	}{
		{"4", "download", 400, 1, 1, 0},
		{"2", "upload", 100, 2, 3, 1},
		{"4", "upload", 100, 1, 1.5, 0},
		{"4", "upload", 400, 1, 3, 0},
	}
	if len(cells) != len(want) {
		t.Fatalf("%d cells, want %d: %+v", len(cells), len(want), cells)
	}
	for i, w := range want {
		c := cells[i]
		if c.Method != w.m || c.Dir != w.d || c.SizeKB != w.size || c.Time.N != w.n || c.Time.Mean != w.mean || float64(c.Errors) != w.errs {
			t.Errorf("cell %d: %s %s %d KB n=%d mean=%v errors=%d, want %+v", i, c.Method, c.Dir, c.SizeKB, c.Time.N, c.Time.Mean, c.Errors, w)
		}
	}
	// the failed trial counts as an error, not as a time: CPU and softirq
	// are the two good trials' (10, 20 ms; 4, 6 ms)
	if c := cells[1]; c.CPU.Mean != 15 || c.Sirq.Mean != 5 || c.Time.Max != 4 {
		t.Errorf("method 2 upload 100 KB: CPU %+v softirq %+v time %+v", c.CPU, c.Sirq, c.Time)
	}
	if c := cells[0]; c.Daemon.Mean != 2 {
		t.Errorf("daemon CPU %+v, want mean 2", c.Daemon)
	}
	if got := SummarizeLBE(nil); len(got) != 0 {
		t.Errorf("no trials: %+v", got)
	}
	// a cell whose every trial failed has errors and an empty time
	if got := SummarizeLBE([]LBETrial{{Method: "1", Dir: "upload", SizeKB: 8, Error: "x"}}); len(got) != 1 || got[0].Errors != 1 || got[0].Time.N != 0 {
		t.Errorf("all failed: %+v", got)
	}
}

// pctl is the lower nearest rank (no interpolation) of unsorted values.
func TestPctl(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		p    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]float64{3}, 0.99, 3},
		{[]float64{4, 1, 3, 2}, 0.5, 2},
		{[]float64{4, 1, 3, 2}, 0.95, 3},
		{[]float64{4, 1, 3, 2}, 1, 4},
		{[]float64{4, 1, 3, 2}, 0, 1},
	} {
		if got := pctl(c.v, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("pctl(%v, %v) = %v, want %v", c.v, c.p, got, c.want)
		}
	}
}
