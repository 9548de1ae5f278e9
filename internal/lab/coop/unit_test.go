// unit_test.go: pure-logic tests of the coop experiments' figures and defaults (no root).
package coop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// The coop result draws one cwnd figure per N and mode (the lanes one with
// the cap), and results.md links them.
func TestCoopPlotsLinked(t *testing.T) {
	series := func(capped bool) *coopSeries {
		s := &coopSeries{Step: 200 * time.Millisecond}
		for k := 1; k <= 20; k++ {
			row := []hostSample{{Cwnd: uint32(10 * k)}, {Cwnd: uint32(8 * k)}}
			if capped {
				row[0].Cap, row[1].Cap = 80, 80
			}
			s.T = append(s.T, float64(k)*0.2)
			s.Samples = append(s.Samples, row)
		}
		return s
	}
	r := &testbed.Result{Experiment: "coop", Started: time.Now(), Data: []coopRun{
		{N: 2, Mode: "tcp", Series: series(false)}, {N: 2, Mode: "lanes", Series: series(true)}}}
	dir, err := testbed.WriteResult(t.TempDir(), r)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cwnd-n2-tcp", "cwnd-n2-lanes"} {
		if st, err := os.Stat(filepath.Join(dir, name+".png")); err != nil || st.Size() < 500 {
			t.Errorf("%s.png: %v", name, err)
		}
		if !strings.Contains(string(md), "("+name+".png)") {
			t.Errorf("results.md does not link %s.png:\n%s", name, md)
		}
	}
	figs, err := plotCoop(r)
	if err != nil || len(figs) != 2 || len(figs[1].Fig.Panels[0].Series) != 3 {
		t.Errorf("figures %+v, %v: want 2, the lanes one with 2 hosts and the cap", figs, err)
	}
}

// The coop result gets a figure against N with the paper's caps beside the
// applied ones.
func TestCoopVersusN(t *testing.T) {
	var runs []coopRun
	for _, n := range []int{2, 5, 8} {
		runs = append(runs, coopRun{N: n, Mode: "tcp", Stats: coopStats{TotalMbit: 19, JainRun: 0.5}},
			coopRun{N: n, Mode: "lanes", Stats: coopStats{TotalMbit: 18, JainRun: 0.97}, Cap: uint32(300 / n)})
	}
	f := coopVersusN(runs)
	if f == nil || len(f.Panels) != 3 {
		t.Fatalf("figure %+v", f)
	}
	caps := f.Panels[2].Series
	if len(caps) != 2 || caps[1].Name != "paper, table 2" || len(caps[1].X) != 2 || caps[1].Y[1] != 43 {
		t.Errorf("cap panel: %+v", caps)
	}
	if err := f.Save(filepath.Join(t.TempDir(), "versus-n.png")); err != nil {
		t.Fatal(err)
	}
	if coopVersusN(runs[:2]) != nil {
		t.Error("a single N drew a figure against N")
	}
}

// TestCoopAPRateDefault: without --ap-rate the daemons get the AP rate on
// the fifo medium (the paper's known rate) and estimate it on dcf, where
// contention leaves less than one station's rate; an explicit flag wins.
func TestCoopAPRateDefault(t *testing.T) {
	for _, tc := range []struct {
		medium, flag string
		want         float64
	}{
		{MediumFIFO, "", 20e6},
		{MediumDCF, "", 0},
		{MediumDCF, "15mbit", 15e6},
		{MediumFIFO, "estimate", 0},
	} {
		c := coopCommon{rate: "20mbit", rtt: 256 * time.Millisecond, bufBDP: 0.5, headroom: "120kbit",
			lanes: "lanes", medium: tc.medium, apRate: tc.flag}
		b, err := c.bed(2, func(int) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(b.Coop.APRate); got != tc.want || float64(b.Coop.APDownlinkRate) != tc.want {
			t.Errorf("medium %s --ap-rate %q: ap_rate %v, ap_downlink_rate %v, want %v",
				tc.medium, tc.flag, got, b.Coop.APDownlinkRate, tc.want)
		}
	}
}
