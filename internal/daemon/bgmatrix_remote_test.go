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
// About 3.5 and 1.5 minutes. The last log line is the matrix as a table.
package daemon_test

import (
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestBackgroundMatrixRemote(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, uplinkBottleneck)
	deepBottleneck(t, p, "r-a")
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	b := &mxBed{p: p, base: base, link: remoteLinkBps, fgPort: "5201", bgServer: "5202",
		fgUp: meteredIperfServer(t, p.B, 5201), bgUp: meteredIperfServer(t, p.B, 5202), fgDown: meteredIperfServer(t, p.A, 5201)}
	_, b.sock = startDaemon(t, p.A, string(policy.DefaultYAML()))
	mxTable(t, b, mxRun(t, b, []string{"up", "down"}, mxBackgrounds))
}

func TestBackgroundMatrixShaped(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := shapedPath(t) // iperf3 on B's 5201 too: metered here on 5202 and 5203
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	b := &mxBed{p: p, base: base, link: shapedLinkBps, fgPort: "5202", bgServer: "5203",
		fgUp: meteredIperfServer(t, p.B, 5202), bgUp: meteredIperfServer(t, p.B, 5203)}
	_, b.sock = startDaemon(t, p.A, shapedPolicy(p.LinkA))
	var bgs []mxBackground
	for _, bg := range mxBackgrounds {
		if !strings.Contains(bg.name, "CUBIC") {
			bgs = append(bgs, bg)
		}
	}
	mxTable(t, b, mxRun(t, b, []string{"up"}, bgs))
}
