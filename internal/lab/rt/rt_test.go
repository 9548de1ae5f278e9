// rt_test.go: the rt table's rows from the tester's statistics, in ms,
// and a skipped configuration (no root).
package rt

import (
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/latency"
)

func TestRTTable(t *testing.T) {
	p := rtParams{period: 30 * time.Millisecond, cpuLoad: 2, netRate: 5000}
	runs := []rtRun{
		{Key: "a", Name: "default", PaperMS: "18.5", Result: &latency.Result{All: latency.Stats{Samples: 2000, AvgUS: 55.25, P50US: 40, P99US: 1234.5, MaxUS: 18512}}},
		{Key: "b", Name: "full preemption", PaperMS: "2.1", Skipped: "no PREEMPT_DYNAMIC"},
		{Key: "ct", Name: "cyclictest", Result: &latency.Result{All: latency.Stats{Samples: 7, MaxUS: 0.4}}},
	}
	tb := rtTable(p, runs)
	if !strings.Contains(tb.Title, "30ms period, 2 busy workers + 5000 pps") {
		t.Errorf("title %q", tb.Title)
	}
	want := [][]string{
		{"(a) default", "18.5", "18.512", "1.234", "0.040", "0.055", "2000"},
		{"(b) full preemption", "2.1", "not run", "", "", "", ""},
		{"cyclictest", "", "0.000", "0.000", "0.000", "0.000", "7"},
	}
	if len(tb.Rows) != len(want) {
		t.Fatalf("rows %q", tb.Rows)
	}
	for i := range want {
		if strings.Join(tb.Rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d: %q, want %q", i, tb.Rows[i], want[i])
		}
		if len(tb.Rows[i]) != len(tb.Columns) {
			t.Errorf("row %d has %d cells for %d columns", i, len(tb.Rows[i]), len(tb.Columns))
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"short", 10, "short"}, {"exactly10!", 10, "exactly10!"}, {"longer than ten", 10, "longer tha..."}, {"", 0, ""}} {
		if got := truncate(c.s, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
