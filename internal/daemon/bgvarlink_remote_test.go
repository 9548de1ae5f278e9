// bgvarlink_remote_test.go: the background lane alone on a variable-rate
// link, default policy: A ── R ── B with R's TBF stepping every 500 ms
// through a seeded sequence between 1.5 and 16 Mbit/s (600 KB of buffer
// at every rate; testutil.StartVariableLink), a TCP or QUIC bulk transfer
// in the background lane up or down, and the UDP echo probe every 50 ms.
// Each test logs the background's bytes ÷ the link's mean capacity over
// the measured window (the time-weighted mean of the rates set; the
// sequence restarts where the window begins, so every run measures the
// same rates) and the probe's p95 over idle on the same link, against
// the goals (>= 0.90, <= +25 ms); it fails only where a loaded 2-core
// machine cannot explain it: a lost probe, or a figure past the transport's bound: TCP under
// half the mean capacity or +100 ms at p95; QUIC under a fifth or +200 ms
// (its class follows the link's steps up too slowly for its share goal
// and leaves 130-200 ms of queue for 300 ms at each fall: 0.28-0.53 at
// +4 to +84 ms, docs/results/background.md; 200 ms still fails a class
// that fills the 600 KB buffer, 300 ms at the top rate).
package daemon_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lab/varlink"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// varLinkSeed is the rate sequence's seed in every variable-link test (the
// lab's variable link's), so a change is judged on the same steps before
// and after.
const varLinkSeed = varlink.Seed

// varLinkProbes is the probe's count while the background runs: 6 s, a
// dozen of the link's steps.
const varLinkProbes = 120

// backgroundFlow starts the background transfer kind in dir under the
// daemon at sock and returns its byte count so far (stream bytes; 0 where
// the transfer counts none, and the bottleneck's bytes are the measure).
type backgroundFlow func(t *testing.T, p *testutil.Path, sock, dir string) func() float64

func tcpBackground(t *testing.T, p *testutil.Path, sock, dir string) func() float64 {
	base := fmt.Sprintf("http://%s:8080", p.AddrB)
	if dir == "up" {
		bulk(t, p.A, base, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
		return func() float64 { return float64(laneBytes(t, sock, "background")) }
	}
	start(t, p.A, "run", "--socket", sock, "--lane", "background", "--",
		lanesBin, "lab", "helper", "get", "--url", base, "--bytes", "2000000000")
	return func() float64 { return 0 }
}

func quicBackground(t *testing.T, p *testutil.Path, sock, dir string) func() float64 {
	q := startQUICBulk(t, p, dir, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	return func() float64 { return float64(q.bytes.Load()) }
}

// varLinkBounds are the figures past which a variable-link test fails:
// the least share of the mean capacity, the most p95 over idle.
type varLinkBounds struct {
	share float64
	p95   time.Duration
}

var (
	tcpVarLink  = varLinkBounds{share: 0.5, p95: 100 * time.Millisecond}
	quicVarLink = varLinkBounds{share: 0.2, p95: 200 * time.Millisecond}
)

func varLinkRemote(t *testing.T, what, dir string, flow backgroundFlow, bound varLinkBounds) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p := testutil.NewRoutedPath(t)
	dev := "r-a"
	if dir == "up" {
		dev = p.LinkRB
	}
	link := testutil.StartVariableLink(t, p.R, dev, varLinkSeed)
	start(t, p.B, "lab", "helper", "echo", "--listen", ":7")
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	idle, _ := probeAll(t, p)
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String()) // the controllers' steps
			for _, s := range link.Steps() {
				t.Logf("link step %s %.2f Mbit/s", s.At.Format("15:04:05.000"), s.Bps/1e6)
			}
		}
	}()
	bytes := flow(t, p, sock, dir)
	time.Sleep(4 * time.Second)
	if err := link.Restart(); err != nil { // every run measures the same rates
		t.Fatal(err)
	}
	b0, s0, t0 := bytes(), tbfSent(t, p, dev), time.Now()
	on := probe(t, p, varLinkProbes)
	b1, s1, t1 := bytes(), tbfSent(t, p, dev), time.Now()
	lost := varLinkProbes - len(on)
	capacity := link.MeanBps(t0, t1) * t1.Sub(t0).Seconds() / 8
	busy := (s1 - s0) / capacity
	share := busy // a download's bytes are the bottleneck's
	if b1 > b0 {
		share = (b1 - b0) / capacity
	}
	st := status(t, sock)
	t.Logf("account: %+v", st.Interfaces[0].Account)
	t.Logf("background: %s; background-udp: %s", st.Components["background"], st.Components["background-udp"])
	infl := pct(on, .95) - pct(idle, .95)
	t.Logf("%s %sload alone on the variable link (seed %d, mean %.2f Mbit/s over %.1f s): %.2f of the mean capacity, the bottleneck busy %.2f (goal >= 0.90); probe p50/p95 idle %v/%v, with the background %v/%v (+%v, goal <= +25ms); lost %d of %d",
		what, dir, varLinkSeed, link.MeanBps(t0, t1)/1e6, t1.Sub(t0).Seconds(), share, busy,
		pct(idle, .5), pct(idle, .95), pct(on, .5), pct(on, .95), infl, lost, varLinkProbes)
	if lost > 0 {
		testutil.TimingErrorf(t, "%d probes lost", lost)
	}
	if infl > bound.p95 {
		testutil.TimingErrorf(t, "probe p95 +%v over idle", infl)
	}
	switch {
	case share < 0.05:
		t.Errorf("background %.2f of the mean capacity: held near nothing", share)
	case share < bound.share:
		testutil.TimingErrorf(t, "background %.2f of the mean capacity, want >= %.2f", share, bound.share)
	}
}

func TestBackgroundTCPUploadVariableLinkRemote(t *testing.T) {
	varLinkRemote(t, "TCP", "up", tcpBackground, tcpVarLink)
}

func TestBackgroundQUICUploadVariableLinkRemote(t *testing.T) {
	varLinkRemote(t, "QUIC", "up", quicBackground, quicVarLink)
}

func TestBackgroundTCPDownloadVariableLinkRemote(t *testing.T) {
	if err := sockops.HaveWindowClamp(); err != nil {
		t.Skipf("rLEDBAT in sock_ops needs TCP_WINDOW_CLAMP from bpf_setsockopt: %v", err)
	}
	varLinkRemote(t, "TCP", "down", tcpBackground, tcpVarLink)
}

func TestBackgroundQUICDownloadVariableLinkRemote(t *testing.T) {
	varLinkRemote(t, "QUIC", "down", quicBackground, quicVarLink)
}
