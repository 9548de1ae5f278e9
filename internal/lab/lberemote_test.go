// lberemote_test.go checks lbe-remote's arithmetic without a testbed: the
// pairing of each method's run with the no-background
// run of the same link, direction and round (RTT inflation, FCT ratios).
package lab

import (
	"math"
	"testing"
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
