// bgdirs_remote_test.go: directions apart. A background TCP or QUIC
// (quic-go) transfer in one direction beside an unlimited foreground TCP
// transfer in the other, at a remote bottleneck shaped both ways (A ── R ──
// B, R's TBF 10 Mbit/s toward B and 20 Mbit/s toward A, 600 KB each),
// default policy. Printed: the background's rate ÷ its rate alone on the
// same path (its direction's idle capacity), and the probe's p95 beside it
// against the same foreground alone; the goals (0.90, +5 ms) are in
// docs/background.md. Paired in one run with the rule directions apart
// replaced (the daemon's --directions-joined), on a fresh path each. The
// bounds held are loose: the foreground keeps at least half its rate, and,
// apart, the background keeps dirsMinShare (QUIC: dirsQUICMinShare) of its
// rate alone. The probe's p95 is printed, not judged: an unlimited
// foreground's own queue here is 10-200 ms from run to run (its windows'
// autotuning), which the p95 follows.
package daemon_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

const (
	dirsSettle  = 3 * time.Second
	dirsMeasure = 3 * time.Second
	dirsProbes  = 150 // every 20 ms: 3 s
	// dirsMinShare bounds the background's rate beside the foreground ÷
	// alone: the rule directions apart replaced held the download at
	// 0.07-0.08 and the upload at 0.02-0.18; apart they took 0.29-0.85
	// and 0.24-0.68 (goal 0.90)
	dirsMinShare = 0.15
	// dirsQUICMinShare bounds a quic-go transfer's the same way: with its
	// echoes' whole round trip as its queue (the rule directions apart
	// replaced: --directions-joined, or the lab's both-ways) the class
	// kept 0.00-0.01 of its rate alone beside a bulk flow the other way;
	// less that way's queue 0.20-0.25 (the lab, 500 ms buffers; quic-go
	// without lanes 0.54-0.55, its ACKs waiting in that queue too)
	dirsQUICMinShare = 0.05
)

// dirsCell is one pairing: the foreground alone, the background alone,
// then both.
type dirsCell struct {
	fgAlone, fgBeside, bgAlone, bgBeside float64
	p95Alone, p95Beside                  time.Duration
	lostAlone, lostBeside                int
	modes                                map[string]int
}

func TestBackgroundDirectionsApart(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	// paired: the rule directions apart replaced (the lab's switch) first
	t.Run("directions joined", func(t *testing.T) { directionsApart(t, false, "--directions-joined") })
	t.Run("directions apart", func(t *testing.T) { directionsApart(t, true) })
}

// directionsApart runs both pairings under a daemon of flags on a fresh
// path; judged: the background's share is held to its bounds.
func directionsApart(t *testing.T, judged bool, flags ...string) {
	sideBySide(t) // the pair side by side, a path each
	p, _ := remotePath(t, uplinkBottleneck)
	if out, err := p.R.Command("tc", "qdisc", "add", "dev", "r-a", "root", "tbf", "rate", "20mbit", "burst", "15k", "limit", "600k").CombinedOutput(); err != nil {
		t.Fatalf("tbf: %v %s", err, out)
	}
	srv := map[string]*iperfMeter{}
	for i, k := range []string{"bg up", "fg down", "bg down", "fg up", "fg down beside QUIC", "fg up beside QUIC"} {
		srv[k] = meteredIperfServer(t, p.B, 5301+i)
	}
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), flags...)
	t.Logf("capabilities: %v", status(t, sock).Capabilities)
	bgRun := []string{lanesBin, "run", "--socket", sock, "--lane", "background", "--"}
	client := func(prefix []string, port int, args ...string) *running {
		return startIperf(t, p.A, prefix, append([]string{"-c", p.AddrB.String(), "-p", fmt.Sprint(port)}, args...)...)
	}
	t.Run("background upload beside a foreground download", func(t *testing.T) {
		c := dirsPair(t, p, sock,
			func() *running { r := client(bgRun, 5301); return &running{srv["bg up"], r.stop} },
			func() *running { return client(nil, 5302, "-R") })
		c.judge(t, "upload", "download", judged, dirsMinShare)
	})
	t.Run("background download beside a foreground upload", func(t *testing.T) {
		c := dirsPair(t, p, sock,
			func() *running { return client(bgRun, 5303, "-R") },
			func() *running { r := client(nil, 5304); return &running{srv["fg up"], r.stop} })
		c.judge(t, "download", "upload", judged, dirsMinShare)
	})
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	t.Run("background QUIC upload beside a foreground download", func(t *testing.T) {
		c := dirsPair(t, p, sock, quicRunning(t, p, "up", bgRun),
			func() *running { return client(nil, 5305, "-R") })
		c.judge(t, "QUIC upload", "download", judged, dirsQUICMinShare)
	})
	t.Run("background QUIC download beside a foreground upload", func(t *testing.T) {
		c := dirsPair(t, p, sock, quicRunning(t, p, "down", bgRun),
			func() *running { r := client(nil, 5306); return &running{srv["fg up beside QUIC"], r.stop} })
		c.judge(t, "QUIC download", "upload", judged, dirsQUICMinShare)
	})
}

// quicRunning starts a quic-go bulk transfer in dir under prefix (the
// background lane) when called.
func quicRunning(t *testing.T, p *testutil.Path, dir string, prefix []string) func() *running {
	return func() *running {
		q := startQUICBulk(t, p, dir, prefix...)
		return &running{meter: quicMeter{q, time.Now()}, stop: q.stop}
	}
}

// dirsPair measures the foreground alone (rate, probe), the background
// alone (rate: its direction's idle capacity), then both.
func dirsPair(t *testing.T, p *testutil.Path, sock string, bg, fg func() *running) dirsCell {
	t.Helper()
	var c dirsCell
	f := fg()
	time.Sleep(dirsSettle)
	f0, g0 := f.read()
	d, lost := probeFastN(t, p, dirsProbes, time.Second)
	f1, g1 := f.read()
	f.stop()
	c.fgAlone, c.p95Alone, c.lostAlone = rate(f0, g0, f1, g1), pctOr(d), lost
	time.Sleep(2 * time.Second)

	b := bg()
	defer b.stop()
	time.Sleep(dirsSettle)
	c.bgAlone = rateOver(b, dirsMeasure)
	f = fg()
	defer f.stop()
	time.Sleep(dirsSettle)
	c.modes = sampleDirModes(t, sock, 10, 100*time.Millisecond)
	b0, s0 := b.read()
	f0, g0 = f.read()
	d, c.lostBeside = probeFastN(t, p, dirsProbes, time.Second)
	b1, s1 := b.read()
	f1, g1 = f.read()
	c.bgBeside, c.fgBeside, c.p95Beside = rate(b0, s0, b1, s1), rate(f0, g0, f1, g1), pctOr(d)
	return c
}

func rate(b0, s0, b1, s1 float64) float64 {
	if s1 <= s0 {
		return 0
	}
	return (b1 - b0) * 8 / (s1 - s0)
}

// pctOr is the p95 of d, an hour where every probe was lost.
func pctOr(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return time.Hour
	}
	return pct(d, .95)
}

func (c dirsCell) judge(t *testing.T, bgDir, fgDir string, shareJudged bool, minShare float64) {
	t.Helper()
	share := c.bgBeside / c.bgAlone
	t.Logf("background %s %.2f Mbit/s alone, %.2f beside the foreground %s: %.2f of its direction's idle capacity (goal >= 0.90)",
		bgDir, c.bgAlone/1e6, c.bgBeside/1e6, fgDir, share)
	t.Logf("foreground %s %.2f Mbit/s alone, %.2f beside the background; probe p95 %v alone, %v beside (%+v, goal <= +5ms); lost %d / %d of %d",
		fgDir, c.fgAlone/1e6, c.fgBeside/1e6, c.p95Alone, c.p95Beside, c.p95Beside-c.p95Alone, c.lostAlone, c.lostBeside, dirsProbes)
	t.Logf("the background's mode beside the foreground, sampled every 100 ms: %v", c.modes)
	if c.fgBeside < c.fgAlone/2 {
		testutil.TimingErrorf(t, "the foreground %s kept %.2f of its rate alone beside the background", fgDir, c.fgBeside/c.fgAlone)
	}
	if shareJudged && (c.bgAlone <= 0 || share < minShare) {
		testutil.TimingErrorf(t, "background %s at %.2f of its rate alone beside the foreground; want >= %.2f here (goal 0.90)", bgDir, share, minShare)
	}
}

// sampleDirModes is sampleModes with the harmed directions: "held/harm/up".
func sampleDirModes(t *testing.T, sock string, n int, every time.Duration) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		var d yield.Status
		if err := json.Unmarshal(status(t, sock).Details["background"], &d); err != nil {
			t.Fatalf("background component detail: %v", err)
		}
		for _, is := range d.Interfaces {
			k := strings.Join(append([]string{is.Mode, is.Cause}, is.Harmed...), "/")
			out[strings.TrimSuffix(k, "/")]++
			if is.Cause != "" {
				out[is.Signal]++ // the last hold's reading, in words
			}
		}
		time.Sleep(every)
	}
	return out
}
