// lberemote_test.go checks lbe-remote's arithmetic without a testbed: the
// pairing of each method's run with the no-background
// run of the same link, direction and round (RTT inflation, FCT ratios),
// and its figures.
package lbe

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
)

func TestSummarizeRemotePairs(t *testing.T) {
	tr := func(sec ...float64) []RemoteTrial {
		var out []RemoteTrial
		for _, s := range sec {
			out = append(out, RemoteTrial{Dir: "download", SizeKB: 100, Seconds: s})
		}
		return out
	}
	runs := []RemoteRun{
		{Link: "fixed", BGDir: "upload", Method: "none", Round: 0, ProbeMs: []float64{40, 40, 42}, Trials: tr(1)},
		{Link: "fixed", BGDir: "upload", Method: "none", Round: 1, ProbeMs: []float64{50, 50, 50}, Trials: tr(2)},
		{Link: "fixed", BGDir: "upload", Method: "full", Round: 0, ProbeMs: []float64{60, 60, 62}, Trials: tr(1.2), Jain: 0.9},
		{Link: "fixed", BGDir: "upload", Method: "full", Round: 1, ProbeMs: []float64{70, 70, 70}, Trials: tr(2.2), Jain: 1},
	}
	cells := summarizeRemote(runs)
	if len(cells) != 2 || cells[0].Method != "none" || cells[1].Method != "full" {
		t.Fatalf("cells %+v", cells)
	}
	f := cells[1]
	if math.Abs(f.Infl50-20) > 1e-9 || math.Abs(f.Jain-0.95) > 1e-9 {
		t.Errorf("inflation p50 %v (want 20), Jain %v (want 0.95)", f.Infl50, f.Jain)
	}
	// ratios paired per round: (1.2/1 + 2.2/2) / 2 = 1.15
	if r := f.FCTRatio["download 100 KB"]; math.Abs(r-1.15) > 1e-9 {
		t.Errorf("FCT ratio %v, want 1.15", r)
	}
}

// plotRemote draws, from the stored runs, the completion-time ratios and the
// probe percentiles per background direction and one throughput timeline
// per link and direction, and results.md links them.
func TestRemotePlotsLinked(t *testing.T) {
	trials := []RemoteTrial{{Dir: "download", SizeKB: 10, Seconds: 0.1}, {Dir: "upload", SizeKB: 100, Seconds: 0.5}}
	tl := map[string][]float64{"capacity": {10, 10, 10}, "bg": {9, 5, 4}, "bg2": {0, 4, 5}, "fg": {0, 1, 0}}
	var runs []RemoteRun
	for _, m := range []string{"none", "cubic", "full"} {
		r := RemoteRun{Link: "fixed", BGDir: "upload", Method: m, ProbeMs: []float64{40, 45, 60}, Trials: trials}
		if m != "none" {
			r.Timeline, r.JainFrom = tl, 1
		}
		runs = append(runs, r)
	}
	res := &testbed.Result{Experiment: "lbe-remote", Started: time.Now(), Data: map[string]any{"runs": runs}}
	dir, err := testbed.WriteResult(t.TempDir(), res)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fct-bg-upload", "rtt-bg-upload", "timeline-fixed-upload"} {
		if st, err := os.Stat(filepath.Join(dir, name+".png")); err != nil || st.Size() < 500 {
			t.Errorf("%s.png: %v", name, err)
		}
		if !strings.Contains(string(md), "("+name+".png)") {
			t.Errorf("results.md does not link %s.png", name)
		}
	}
}

// The background's share alone is reported beside its ratio to the CUBIC
// background's of the same link, direction and round (paired per round).
func TestSummarizeRemoteAloneVsCubic(t *testing.T) {
	runs := []RemoteRun{
		{Link: "fixed", BGDir: "upload", Method: "cubic", Round: 0, BGAlone: 1.0},
		{Link: "fixed", BGDir: "upload", Method: "cubic", Round: 1, BGAlone: 0.8},
		{Link: "fixed", BGDir: "upload", Method: "full", Round: 0, BGAlone: 0.9},
		{Link: "fixed", BGDir: "upload", Method: "full", Round: 1, BGAlone: 0.8},
		{Link: "fixed", BGDir: "download", Method: "full", Round: 0, BGAlone: 0.7},
	}
	cells := summarizeRemote(runs)
	got := map[string]float64{}
	for _, c := range cells {
		got[c.BGDir+" "+c.Method] = c.AloneVsCubic
	}
	// (0.9/1.0 + 0.8/0.8) / 2 = 0.95; no CUBIC run for the download: 0
	if math.Abs(got["upload full"]-0.95) > 1e-9 || math.Abs(got["upload cubic"]-1) > 1e-9 || got["download full"] != 0 {
		t.Errorf("alone ÷ CUBIC %v, want upload full 0.95, upload cubic 1, download full 0", got)
	}
}

// A stored run prints its tables again from its runs: the completion
// ratios beside the times, the capacity of the alone window (from the
// timeline) beside the share, the idle capacity beside the steady step's
// ratio, a row per steady foreground kind, each paired with the
// no-background run's step of the same kind (the background's bytes ÷ the
// capacity that foreground left idle alone), the daemon's background
// state in each steady step.
func TestRemoteTablesFromStoredRun(t *testing.T) {
	c := RemoteConfig{FGDirs: []string{"download"}, SizesKB: []int{10}, Warmup: 4 * time.Second, SteadyFor: time.Second, SteadyShare: 0.4,
		SteadyFG: []string{SteadyTCP, SteadyUDP}}
	tl := map[string][]float64{"capacity": {1, 1, 8, 12, 100}}
	held := &RemoteSignal{Samples: 10, States: map[string]float64{"sharing": 0.3, "held: harm": 0.7}}
	runs := []RemoteRun{
		{Link: "fixed", BGDir: "upload", Method: "none", Trials: []RemoteTrial{{Dir: "download", SizeKB: 10, Seconds: 0.5}},
			Steady: []RemoteSteady{{Kind: SteadyTCP, ProbeMs: []float64{45}, FG: 0.4}, {Kind: SteadyUDP, ProbeMs: []float64{30}}}},
		{Link: "fixed", BGDir: "upload", Method: "full", Transport: "tcp", BGAlone: 0.5, AloneFrom: 1, AloneTo: 2, Timeline: tl,
			Trials: []RemoteTrial{{Dir: "download", SizeKB: 10, Seconds: 0.6}}, ChurnIdle: 0.5,
			Steady: []RemoteSteady{{Kind: SteadyTCP, Idle: 0.9, IdleMbps: 6, FG: 0.3, ProbeMs: []float64{50}, Signal: held},
				{Kind: SteadyUDP, Idle: 0.3, IdleMbps: 5.5, ProbeMs: []float64{32}, ProbeLost: 1,
					Signal: &RemoteSignal{Samples: 10, States: map[string]float64{"held: harm": 1}}}}},
	}
	res := &testbed.Result{Experiment: "lbe-remote", Started: time.Now(), Params: map[string]any{"config": c}, Data: map[string]any{"runs": runs}}
	dir, err := testbed.WriteResult(t.TempDir(), res)
	if err != nil {
		t.Fatal(err)
	}
	back, err := testbed.ReadResult(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := testbed.RedoTables(back); err != nil {
		t.Fatal(err)
	}
	if len(back.Tables) != 5 {
		t.Fatalf("%d tables, want 5", len(back.Tables))
	}
	want := []string{
		"fixed upload - none - (0.50 s) 0",
		"fixed upload tcp full 1.20 (0.60 s) 0",
	}
	for i, w := range want {
		if got := strings.Join(back.Tables[1].Rows[i], " "); got != w {
			t.Errorf("completion row %d: %q, want %q", i, got, w)
		}
	}
	// the alone window [1 s, 2 s) holds the bins at 1.0 and 1.5 s: 10 Mbit/s
	if got := back.Tables[2].Rows[0][4:7]; strings.Join(got, " ") != "10.0 5.0 50%" {
		t.Errorf("share row: %q, want capacity 10.0, bg 5.0 Mbit/s, 50%%", got)
	}
	steady := []string{
		"fixed upload - none TCP paced at 40% - - - - 40% 45.0 0.0 0 of 1 - -",
		"fixed upload - none UDP at 40% - - - - 0% 30.0 0.0 0 of 1 - ",
		// the foreground 0.3 of the window beside the background, 0.4
		// alone: 0.9 of 0.7 is 1.05 of the 0.6 it left idle alone
		"fixed upload tcp full TCP paced at 40% 0.90 6.0 1.05 0.75 30% 50.0 5.0 0 of 1 - 0.50",
		"fixed upload tcp full UDP at 40% 0.30 5.5 - - 0% 32.0 2.0 1 of 2 - ",
	}
	for i, w := range steady {
		if got := strings.Join(back.Tables[3].Rows[i], " "); got != w {
			t.Errorf("steady row %d: %q, want %q", i, got, w)
		}
	}
	signal := []string{
		"fixed | upload | tcp | full | tcp | held: harm 70%, sharing 30% | - | - | -",
		"fixed | upload | tcp | full | udp | held: harm 100% | - |  | ",
	}
	for i, w := range signal {
		if got := strings.Join(back.Tables[4].Rows[i], " | "); got != w {
			t.Errorf("signal row %d: %q, want %q", i, got, w)
		}
	}
}

// The steady foreground's pace on a trace is the share of the link's
// capacity over the step, not of the whole trace's mean, unless asked:
// a trace at 2 opportunities per ms for 20 s, then 1 per ms.
func TestSteadyRateOfStep(t *testing.T) {
	tr := &emu.Trace{Name: "two-rates", Period: 40000}
	for ms := uint64(1); ms <= 40000; ms++ {
		tr.MS = append(tr.MS, ms)
		if ms <= 20000 {
			tr.MS = append(tr.MS, ms)
		}
	}
	l := emu.NewLink(emu.LinkConfig{Trace: tr}, func([]byte, any) {})
	c := RemoteConfig{SteadyShare: 0.4, SteadyFor: 7 * time.Second, SteadyOf: SteadyOfStep}
	perMS := float64(emu.OpportunityBytes) * 1000 // bytes/s of one opportunity per ms
	for _, x := range []struct {
		of   string
		at   time.Duration
		want float64
	}{
		{SteadyOfStep, 5 * time.Second, 0.4 * 2 * perMS},
		{SteadyOfStep, 25 * time.Second, 0.4 * perMS},
		{"", 25 * time.Second, 0.4 * 1.5 * perMS},
	} {
		c.SteadyOf = x.of
		if got := float64(c.steadyRate(l, x.at)); math.Abs(got-x.want) > x.want*0.01 {
			t.Errorf("steady-of %q at %v: %.0f bytes/s, want %.0f", x.of, x.at, got, x.want)
		}
	}
}
