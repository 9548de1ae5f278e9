// spread_test.go: how a summary states its spread for few and many repetitions.
package testbed

import (
	"strings"
	"testing"
)

// Two repetitions give a median and a range, not a 95% interval wider
// than the values; many give mean ± CI.
func TestSpreadFewAndMany(t *testing.T) {
	two := Summarize([]float64{1.5, 5.1})
	if got := two.SpreadText("%.2f"); got != "3.30 (1.50–5.10)" {
		t.Errorf("2 reps: %q", got)
	}
	if c, lo, hi := two.Spread(); c != 3.3 || lo != 1.5 || hi != 5.1 {
		t.Errorf("2 reps: %v %v %v", c, lo, hi)
	}
	many := Summarize([]float64{1, 2, 3, 4, 5, 6})
	if got := many.SpreadText("%.1f"); !strings.Contains(got, "3.5 ± ") {
		t.Errorf("6 reps: %q", got)
	}
	if SpreadName(2) != "median (min-max) of 2" || SpreadName(20) != "mean ± 95% CI" {
		t.Error(SpreadName(2), SpreadName(20))
	}
}
