// bgmatrix_remote_test.go: the background matrix (bgmatrix_test.go) on
// its two paths, one daemon each, default policy:
//
//   - remote: A ── R ── B with R's TBF 10 Mbit/s holding 600 KB on both
//     of its links (the uplink's queue toward B, the downlink's toward A),
//     every transport up and down;
//   - shaped: A ── B on one veth, `uplink: 10mbit` on A (lanes' tree on
//     the device is the bottleneck), uploads: TCP, QUIC and UDP (an app's
//     CUBIC is the remote path's: in the tree HTB's priority orders the
//     lanes whatever the congestion control).
//
// About 1.7 minutes for each direction of the remote path (side by side,
// a path each) and 1.5 for the shaped one. The last log line of each is
// the matrix as a table.
package daemon_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestBackgroundMatrixRemote(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	for _, dir := range []string{"up", "down"} { // each on a path of its own
		t.Run(dir, func(t *testing.T) {
			sideBySide(t)
			p, base := remotePath(t, uplinkBottleneck)
			deepBottleneck(t, p, "r-a")
			start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
			dirs := []string{dir}
			b := newBed(t, p, base, remoteLinkBps, 5202, dirs, mxBackgrounds)
			var d *proc
			d, b.sock = startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
			defer func() {
				if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
					t.Log(d.out.String())
				}
			}()
			mxTable(t, b, mxRun(t, b, dirs, mxBackgrounds))
		})
	}
}

func TestBackgroundMatrixShaped(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := shapedPath(t) // (its own iperf3 server on B's 5201)
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	var bgs []mxBackground
	for _, bg := range mxBackgrounds {
		if !strings.Contains(bg.name, "CUBIC") {
			bgs = append(bgs, bg)
		}
	}
	dirs := []string{"up"}
	b := newBed(t, p, base, shapedLinkBps, 5202, dirs, bgs)
	_, b.sock = startDaemon(t, p.A, shapedPolicy(p.LinkA))
	mxTable(t, b, mxRun(t, b, dirs, bgs))
}
