// bgslow_remote_test.go: the background QUIC/UDP class on a slow link,
// default policy: A ── R ── B with R's TBF 0.5 Mbit/s holding 200 ms of
// it (12.5 KB) toward the bottleneck's side, a quic-go bulk transfer in
// the background lane up and down, and the UDP echo probe every 50 ms.
// The class's floor, its yield's rate and its probes take at most 1/16
// of its link estimate (bgudp's floorShare), so the probe's p95 stays
// within 25 ms plus two packet times (48 ms at 0.5 Mbit/s) over idle
// and none is lost, where a floor of 200 kbit/s was 40 % of the link.
package daemon_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

const slowLinkBps = 0.5e6

func slowRemote(t *testing.T, dir string) {
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
	limit := fmt.Sprint(int(slowLinkBps / 8 * 0.2)) // 200 ms of the link
	if out, err := p.R.Command("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", "500kbit", "burst", "3000", "limit", limit).CombinedOutput(); err != nil {
		t.Fatalf("tbf: %v %s", err, out)
	}
	start(t, p.B, "lab", "helper", "echo", "--listen", ":7")
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	idle, _ := probeAll(t, p)
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String())
		}
	}()
	q := startQUICBulk(t, p, dir, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	time.Sleep(6 * time.Second)
	b0, s0, t0 := q.bytes.Load(), tbfSent(t, p, dev), time.Now()
	on, lost := probeAll(t, p)
	secs := time.Since(t0).Seconds()
	share := float64(q.bytes.Load()-b0) * 8 / secs / slowLinkBps
	busy := (tbfSent(t, p, dev) - s0) * 8 / secs / slowLinkBps
	st := status(t, sock)
	t.Logf("background-udp: %s", st.Components["background-udp"])
	probeCost(t, st)
	const packetTimes = 2 * 1500 * 8 * time.Second / time.Duration(slowLinkBps)
	infl := pct(on, .95) - pct(idle, .95)
	t.Logf("QUIC %sload on 0.5 Mbit/s, 200 ms buffer: probe p50/p95 idle %v/%v, with the background %v/%v (+%v, goal <= %v); lost %d of %d (goal 0); background %.2f of the link, the bottleneck busy %.2f",
		dir, pct(idle, .5), pct(idle, .95), pct(on, .5), pct(on, .95), infl, 25*time.Millisecond+packetTimes, lost, probeN, share, busy)
	if lost > 0 {
		testutil.TimingErrorf(t, "%d probes lost", lost)
	}
	// loose for a loaded 2-core machine: the whole buffer is 200 ms
	if infl > 100*time.Millisecond {
		testutil.TimingErrorf(t, "probe p95 +%v over idle", infl)
	}
	if share < 0.05 {
		t.Errorf("background %.2f of the link: held near nothing", share)
	}
}

func TestBackgroundQUICSlowLinkUploadRemote(t *testing.T) { slowRemote(t, "up") }

func TestBackgroundQUICSlowLinkDownloadRemote(t *testing.T) { slowRemote(t, "down") }
