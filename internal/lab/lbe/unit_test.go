// unit_test.go: pure-logic tests of the lbe experiments' flags, traces and figures (no root).
package lbe

import (
	"os"
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

// The paper's published points are named as the paper's methods, not as
// the methods of this lab they are coloured like.
func TestPaperPointsNamedAsThePapers(t *testing.T) {
	cells := []LBECell{
		{Method: "3", Dir: "download", SizeKB: 400, Time: testbed.Summary{N: 2, P50: 4.1, Min: 4, Max: 4.2}},
		{Method: "4", Dir: "download", SizeKB: 400, Time: testbed.Summary{N: 2, P50: 3.7, Min: 3.6, Max: 3.8}},
	}
	figs, err := plotLBE(&testbed.Result{Experiment: "lbe", Data: map[string]any{"cells": cells}})
	if err != nil {
		t.Fatal(err)
	}
	var papers []string
	for _, s := range figs[0].Fig.Panels[0].Series {
		if s.NoLine {
			papers = append(papers, s.Name)
		}
	}
	want := []string{"paper: LW-LBE (fig. 6)", "paper: task-based LBE (fig. 6)"}
	if strings.Join(papers, "; ") != strings.Join(want, "; ") {
		t.Errorf("the paper's points are named %q, want %q", papers, want)
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

func TestVariableLinkIsAnEmulatedLink(t *testing.T) {
	c := &RemoteConfig{QueueTime: 500 * time.Millisecond}
	if err := parseRemote(c, "fixed,variable", "upload", "upload", "10", "none,full", "tcp"); err != nil {
		t.Fatalf("--links fixed,variable: %v", err)
	}
	up, down, err := c.remoteLinks(variableLink)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		dir  string
		mean float64
	}{{"up", up.Trace.MeanRate()}, {"down", down.Trace.MeanRate()}} {
		if l.mean < 1.5e6 || l.mean > 16e6 {
			t.Errorf("%s: mean %.2f Mbit/s outside 1.5-16", l.dir, l.mean/1e6)
		}
	}
	if up.Trace.MeanRate() == down.Trace.MeanRate() {
		t.Error("both directions follow one sequence")
	}
	if want := int(up.Trace.MeanRate() / 8 / 2); up.QueueBytes != want {
		t.Errorf("uplink buffer %d bytes, want 500 ms at its mean rate (%d)", up.QueueBytes, want)
	}
}
