// bgshare_remote_test.go: the background lane's share of what a steady
// foreground leaves idle, at the remote bottleneck of remote_test.go
// (A ── R ── B, R's TBF 10 Mbit/s holding 600 KB), default policy. The
// foreground is a TCP upload paced at 4 Mbit/s (iperf3 --fq-rate: the
// kernel's own pacing); the measurement is bgshare_test.go's. The figures
// are printed; the bounds are loose (a loaded 2-core machine), the goals
// are in docs/background.md. This path has no base delay, where 2
// segments of window still fill the link: the rule's deciding figures are
// the lab's (lbe-remote's steady and churn steps, a 40 ms path).
package daemon_test

import (
	"fmt"
	"testing"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// pacedForegroundBps is the foreground stream's rate: 40 % of the link.
const pacedForegroundBps = 4e6

// pacedForeground is iperf3's TCP upload to B paced at pacedForegroundBps.
func pacedForeground(p *testutil.Path) []string {
	return []string{"iperf3", "-c", p.AddrB.String(), "-p", "5201", "--fq-rate", fmt.Sprint(int(pacedForegroundBps)), "-t", "120"}
}

func TestBackgroundShareBesidePacedTCP(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, uplinkBottleneck)
	iperfServer(t, p)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	r := measureShare(t, p, base, sock, remoteLinkBps, pacedForeground(p))
	r.log(t, "paced TCP")
	// The rule itself (this path cannot show it in rates: 2 segments of
	// window fill a link with no base delay): beside a paced TCP
	// foreground the background shares, and is held only by the
	// foreground's harm (its smoothed RTT 10 ms over its minimum: this
	// path's own queue, or a loaded machine's jitter) or an opening. The
	// stream's RTT samples tell its harm all along, so a hold for a
	// foreground present without samples (the rule for UDP) is wrong here.
	for k, n := range r.modes {
		if k != yield.ModeSharing && k != yield.ModeHeld+"/"+yield.CauseHarm && k != yield.ModeHeld+"/"+yield.CauseOpening {
			t.Errorf("beside a paced TCP foreground the background was %s in %d of 20 samples; want sharing, or held by harm or an opening: %v", k, n, r.modes)
		}
	}
	r.judge(t, 0.3)
}
