// bgshare_remote_test.go: the background lane's share of what a steady
// foreground leaves idle, at the remote bottleneck of remote_test.go
// (A ── R ── B, R's TBF 10 Mbit/s holding 600 KB), default policy. The
// foreground is a TCP upload paced at 4 Mbit/s (iperf3 --fq-rate: the
// kernel's own pacing), the background an endless TCP upload under `lanes
// run --lane background`, the probe an irtt-like UDP echo every 20 ms
// (probeFast). Paired in one run: the probe and short foreground
// transfers with and without the background beside the paced stream.
// The figures are printed; the bounds are loose (a loaded 2-core
// machine), the goals are in docs/background.md. This path has no base
// delay, where 2 segments of window still fill the link: the rule's
// deciding figures are the lab's (lbe-remote's steady and churn steps, a
// 40 ms path).
package daemon_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// pacedForegroundBps is the foreground stream's rate: 40 % of the link.
const pacedForegroundBps = 4e6

// completionSizes are the short foreground transfers timed with and
// without the background.
var completionSizes = []int{10 << 10, 100 << 10, 400 << 10}

func TestBackgroundShareBesidePacedTCP(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, uplinkBottleneck)
	iperfServer(t, p)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	fg := p.A.Command("iperf3", "-c", p.AddrB.String(), "-p", "5201", "--fq-rate", fmt.Sprint(int(pacedForegroundBps)), "-t", "120")
	if err := fg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fg.Process.Kill(); _ = fg.Wait() })
	time.Sleep(2 * time.Second)

	fg0, t0 := laneBytes(t, sock, "interactive"), time.Now()
	alone, lostAlone := probeFast(t, p)
	fgRate := float64(laneBytes(t, sock, "interactive")-fg0) * 8 / time.Since(t0).Seconds()
	doneAlone := completions(t, p, base)

	bg, _ := bulk(t, p.A, base, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	time.Sleep(4 * time.Second)
	bg0, fg0, t0 := laneBytes(t, sock, "background"), laneBytes(t, sock, "interactive"), time.Now()
	modes := sampleModes(t, sock, 20, 100*time.Millisecond)
	beside, lostBeside := probeFast(t, p)
	secs := time.Since(t0).Seconds()
	bgRate := float64(laneBytes(t, sock, "background")-bg0) * 8 / secs
	fgBeside := float64(laneBytes(t, sock, "interactive")-fg0) * 8 / secs
	doneBeside := completions(t, p, base)
	st := status(t, sock)
	_ = bg.cmd.Process.Kill()
	_ = bg.cmd.Wait()

	idle := remoteLinkBps - fgRate
	share := bgRate / idle
	t.Logf("paced TCP foreground %.2f Mbit/s alone, %.2f beside background; background %.2f Mbit/s = %.2f of the idle %.2f Mbit/s (goal >= 0.90)",
		fgRate/1e6, fgBeside/1e6, bgRate/1e6, share, idle/1e6)
	t.Logf("probe p50/p95: foreground alone %v/%v, beside background %v/%v (p95 %+v, goal <= +5ms); lost %d / %d of %d",
		pct(alone, .5), pct(alone, .95), pct(beside, .5), pct(beside, .95), pct(beside, .95)-pct(alone, .95), lostAlone, lostBeside, fastProbes)
	for i, n := range completionSizes {
		r := doneBeside[i] / doneAlone[i]
		t.Logf("foreground %d KB completion, median of %d: %.1f ms without background, %.1f ms beside it (%.2fx, goal <= 1.10)",
			n>>10, completionReps, 1000*doneAlone[i], 1000*doneBeside[i], r)
	}
	t.Logf("sock_ops: yield %d; %s", st.Interfaces[0].Sockops["yield"], st.Components["background"])

	t.Logf("the background beside the paced stream, sampled every 100 ms (mode/cause): %v", modes)
	// The rule itself (this path cannot show it in rates: 2 segments of
	// window fill a link with no base delay): beside a paced TCP
	// foreground the background shares, and is held only by the
	// foreground's harm (its smoothed RTT 10 ms over its minimum: this
	// path's own queue, or a loaded machine's jitter) or an opening. The
	// stream's RTT samples tell its harm all along, so a hold for a
	// foreground present without samples (the rule for UDP) is wrong here.
	for k, n := range modes {
		if k != yield.ModeSharing && k != yield.ModeHeld+"/"+yield.CauseHarm && k != yield.ModeHeld+"/"+yield.CauseOpening {
			t.Errorf("beside a paced TCP foreground the background was %s in %d of 20 samples; want sharing, or held by harm or an opening: %v", k, n, modes)
		}
	}
	if lostBeside > 0 {
		t.Errorf("%d probes lost beside the background", lostBeside)
	}
	// Loose bounds: the goals are 0.90, +5 ms and 1.10x; the test fails
	// where the background ruins the foreground or is idled outright.
	if d := pct(beside, .95) - pct(alone, .95); d > 60*time.Millisecond {
		t.Errorf("probe p95 beside the background %+v over the foreground alone", d)
	}
	if share < 0.3 {
		testutil.TimingErrorf(t, "background %.2f of the idle capacity beside a paced foreground; want >= 0.3 here (goal 0.90)", share)
	}
	// (this path has no base delay: a 10 KB transfer takes 1-2 ms alone,
	// so any queue multiplies it; the ratios that matter are the lab's,
	// lbe-remote on a 40 ms path; the largest transfer is judged here)
	if r := doneBeside[len(doneBeside)-1] / doneAlone[len(doneAlone)-1]; r > 2 {
		testutil.TimingErrorf(t, "a %d KB foreground transfer took %.2fx as long beside the background", completionSizes[len(completionSizes)-1]>>10, r)
	}
}

// sampleModes reads the background component's mode on A's interface n
// times, every, and counts them by mode and, for a hold, its cause
// ("held/harm").
func sampleModes(t *testing.T, sock string, n int, every time.Duration) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		var d yield.Status
		if err := json.Unmarshal(status(t, sock).Details["background"], &d); err != nil {
			t.Fatalf("background component detail: %v", err)
		}
		for _, is := range d.Interfaces {
			k := is.Mode
			if is.Cause != "" {
				k += "/" + is.Cause
			}
			out[k]++
		}
		time.Sleep(every)
	}
	return out
}

// completionReps is how many times each size is timed (the median is kept).
const completionReps = 5

// completions times foreground POSTs of each completionSizes from A to B,
// each completionReps times, and returns the medians in seconds.
func completions(t *testing.T, p *testutil.Path, base string) []float64 {
	t.Helper()
	med := make([]float64, len(completionSizes))
	for i, n := range completionSizes {
		var s []float64
		for range completionReps {
			s = append(s, request(t, p.A, "post", base, n).Seconds)
			time.Sleep(200 * time.Millisecond)
		}
		slices.Sort(s)
		med[i] = s[len(s)/2]
	}
	return med
}
