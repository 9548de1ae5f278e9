// unit_test.go: pure-logic tests of the lab package (no root needed).
package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

func TestNiceEstimate(t *testing.T) {
	// The paper: w = 65 -> n = 7 halvings of 200 ms = 1.4 s.
	if d := NiceEstimate(65); d != 1400*time.Millisecond {
		t.Errorf("NiceEstimate(65) = %v, want 1.4 s", d)
	}
	if d := NiceEstimate(64); d != 1200*time.Millisecond {
		t.Errorf("NiceEstimate(64) = %v, want 1.2 s", d)
	}
}

func TestParseLBE(t *testing.T) {
	c := &LBEConfig{Lanes: "/bin/true"}
	if err := parseLBE(c, LBEMethods, "2,4", "1,400", "upload", 3); err != nil {
		t.Fatal(err)
	}
	if len(c.Methods) != 2 || c.Methods[1].Kind != "lanes" || c.SizesKB[1] != 400 || c.Reps != 3 {
		t.Errorf("config %+v", c)
	}
	for _, bad := range [][3]string{{"9", "1", "upload"}, {"1", "x", "upload"}, {"1", "1", "sideways"}} {
		if err := parseLBE(&LBEConfig{}, LBEMethods, bad[0], bad[1], bad[2], 1); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

func TestDrawPlots(t *testing.T) {
	cells := []LBECell{
		{Method: "2", Dir: "upload", SizeKB: 100, Time: testbed.Summary{N: 2, Mean: 1.6, P95: 1.7}},
		{Method: "2", Dir: "upload", SizeKB: 400, Time: testbed.Summary{N: 2, Mean: 5.8, P95: 6.1}},
		{Method: "4", Dir: "upload", SizeKB: 100, Time: testbed.Summary{N: 2, Mean: 0.9, P95: 1.0}},
		{Method: "4", Dir: "upload", SizeKB: 400, Time: testbed.Summary{N: 2, Mean: 2.9, P95: 3.0}},
	}
	r := &testbed.Result{Experiment: "lbe", Data: map[string]any{"cells": cells}}
	dir := t.TempDir()
	files, err := testbed.DrawPlots(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Fatalf("drew %v", files)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() < 500 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

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

// TestNamedTraceMissingIsAnError: a mistyped trace fails the run instead of
// silently becoming a fixed rate; the default W-CDMA traces are found.
func TestNamedTraceMissingIsAnError(t *testing.T) {
	if err := checkTraces(&LBEConfig{UpTrace: "TMobile-UMTS-driving.up", DownTrace: "TMobile-UMTS-driving.down"}); err != nil {
		t.Fatalf("default traces: %v", err)
	}
	if err := checkTraces(&LBEConfig{UpTrace: "TMobile-UMTS-drivng.up"}); err == nil {
		t.Fatal("a mistyped trace name passed")
	}
	if _, err := testbed.LoadTrace("/nonexistent/x.up"); err == nil {
		t.Fatal("a missing trace path loaded")
	}
}

// Two repetitions give a median and a range, not a 95% interval wider
// than the values; many give mean ± CI.
func TestSpreadFewAndMany(t *testing.T) {
	two := testbed.Summarize([]float64{1.5, 5.1})
	if got := two.SpreadText("%.2f"); got != "3.30 (1.50–5.10)" {
		t.Errorf("2 reps: %q", got)
	}
	if c, lo, hi := two.Spread(); c != 3.3 || lo != 1.5 || hi != 5.1 {
		t.Errorf("2 reps: %v %v %v", c, lo, hi)
	}
	many := testbed.Summarize([]float64{1, 2, 3, 4, 5, 6})
	if got := many.SpreadText("%.1f"); !strings.Contains(got, "3.5 ± ") {
		t.Errorf("6 reps: %q", got)
	}
	if testbed.SpreadName(2) != "median (min-max) of 2" || testbed.SpreadName(20) != "mean ± 95% CI" {
		t.Error(testbed.SpreadName(2), testbed.SpreadName(20))
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

func TestRegistry(t *testing.T) {
	for _, name := range []string{"lbe", "lbe-overhead", "lbe-feedback", "lbe-switch", "accuracy", "tun-probe"} {
		if _, ok := testbed.Lookup(name); !ok {
			t.Errorf("experiment %s not registered", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	testbed.Register(testbed.Experiment{Name: "lbe"})
}
