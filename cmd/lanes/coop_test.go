// Tests of `lanes coop table` (the defaults print the paper's caps) and of
// the estimator's state in `lanes coop status`.
package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/coop"
)

func TestCoopTablePaper(t *testing.T) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if rc := runMain(context.Background(), e, []string{"coop", "table"}); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	var caps []string
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] >= "5" && f[0] <= "8" && len(f[0]) == 1 {
			caps = append(caps, f[1])
		}
	}
	if strings.Join(caps, ",") != "69,57,49,43" {
		t.Errorf("caps %v, paper 69,57,49,43:\n%s", caps, out.String())
	}
	if rc := runMain(context.Background(), e, []string{"coop", "table", "--rate", "fast"}); rc != 2 {
		t.Errorf("bad rate: rc %d", rc)
	}
}

func TestEstimateText(t *testing.T) {
	if got := estimateText(nil); got != "" {
		t.Errorf("configured rate: %q", got)
	}
	es := &coop.EstimateStatus{Phase: "cruise", BestBits: 19.3e6, Trim: 0.98, Drained: true, GroupGoodputBits: 18.9e6, Inflation: 1.06}
	if got, want := estimateText(es), ": cruise, best 19.3 Mbit/s, trim 0.98, drained, last interval 18.9 Mbit/s at 1.06x RTT"; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
