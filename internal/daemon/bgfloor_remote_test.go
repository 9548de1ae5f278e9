// bgfloor_remote_test.go: the yield's hold on a slow link. A ── R ── B,
// R's TBF 0.2 Mbit/s toward B holding 300 ms (7.5 KB), default policy: an
// interactive TCP upload (unlimited) beside a background TCP upload, which
// the foreground's harm (cwnd-limited) holds. Two segments a round trip
// are a third of this link; the hold is paced at a sixteenth of the
// interface's capacity estimate (cwndcap.h's hold_pace). Printed: the
// foreground's rate beside the background ÷ alone (goal 0.90), the
// background's share of the link, the probe's p95 against the foreground
// alone. Held: the foreground keeps half its rate alone.
package daemon_test

import (
	"fmt"
	"testing"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

const floorLinkBps = 0.2e6

func TestBackgroundHoldOnSlowLink(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p := testutil.NewRoutedPath(t)
	if out, err := p.R.Command("tc", "qdisc", "add", "dev", p.LinkRB, "root", "tbf", "rate", "200kbit", "burst", "3k", "limit", "7500").CombinedOutput(); err != nil {
		t.Fatalf("tbf: %v %s", err, out)
	}
	start(t, p.B, "lab", "helper", "echo", "--listen", ":7")
	bgSrv, fgSrv := meteredIperfServer(t, p.B, 5311), meteredIperfServer(t, p.B, 5312)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	client := func(prefix []string, port int) *running {
		return startIperf(t, p.A, prefix, "-c", p.AddrB.String(), "-p", fmt.Sprint(port))
	}
	bgRun := []string{lanesBin, "run", "--socket", sock, "--lane", "background", "--"}
	c := dirsPair(t, p, sock,
		func() *running { r := client(bgRun, 5311); return &running{bgSrv, r.stop} },
		func() *running { r := client(nil, 5312); return &running{fgSrv, r.stop} })
	t.Logf("foreground upload %.3f Mbit/s alone, %.3f beside the background: %.2f of its rate alone (goal >= 0.90)",
		c.fgAlone/1e6, c.fgBeside/1e6, c.fgBeside/c.fgAlone)
	t.Logf("background upload %.3f Mbit/s alone, %.3f beside the foreground: %.2f of the link (the hold's 2 segments a round trip: about 0.3)",
		c.bgAlone/1e6, c.bgBeside/1e6, c.bgBeside/floorLinkBps)
	t.Logf("probe p95 %v beside the foreground alone, %v beside both (%+v); lost %d / %d of %d",
		c.p95Alone, c.p95Beside, c.p95Beside-c.p95Alone, c.lostAlone, c.lostBeside, dirsProbes)
	t.Logf("the background's mode beside the foreground: %v", c.modes)
	if c.fgBeside < c.fgAlone/2 {
		testutil.TimingErrorf(t, "the foreground kept %.2f of its rate alone beside the held background", c.fgBeside/c.fgAlone)
	}
}
