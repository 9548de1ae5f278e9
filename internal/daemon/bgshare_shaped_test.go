// bgshare_shaped_test.go: the shaped-mode twin of bgshare_remote_test.go.
// A ── B over one veth with no TBF; the policy shapes A's interface
// (`uplink: 10mbit`), so lanes' HTB tree on the device is the bottleneck
// and orders the lanes itself (docs/datapath.md: prio 0/1/7, each leaf
// borrowing up to the root rate). The foreground is a TCP upload paced at
// 40 % of the rate, or a constant-rate UDP stream at 40 %; the measurement
// is bgshare_test.go's. Figures printed with their goals; loose bounds.
package daemon_test

import (
	"fmt"
	"testing"

	"github.com/lanes-net/lanes/internal/testutil"
)

// shapedLinkBps is shapedPolicy's uplink rate.
const shapedLinkBps = 10e6

// shapedPath is A ── B on one veth (a Path without a router: R is nil),
// B serving HTTP on :8080 (returned as base), echo on :7 and iperf3.
func shapedPath(t *testing.T) (*testutil.Path, string) {
	pair := testutil.NewVethPair(t)
	p := &testutil.Path{A: pair.A, B: pair.B, LinkA: pair.LinkA, AddrA: pair.AddrA, AddrB: pair.AddrB}
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	start(t, p.B, "lab", "helper", "echo", "--listen", ":7")
	iperfServer(t, p)
	return p, fmt.Sprintf("http://%s:8080", p.AddrB)
}

// udpForeground is iperf3's constant-rate UDP upload to B at 40 % of the
// rate (in the interactive lane: the tree's default class).
func udpForeground(p *testutil.Path) []string {
	return []string{"iperf3", "-c", p.AddrB.String(), "-p", "5201", "-u", "-b", fmt.Sprint(int(pacedForegroundBps)), "-l", "1200", "-t", "120"}
}

// yieldOffPolicy turns the foreground-aware yield off: background TCP
// keeps LEDBAT++'s own target and HTB priority alone orders the lanes.
const yieldOffPolicy = "background:\n  yield: false\n"

// TestBackgroundShareShaped measures each foreground with the default
// policy's yield and, paired in the same run, with the yield off (what
// HTB's priority gives without it: the yield exists for remote
// bottlenecks).
func TestBackgroundShareShaped(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	for _, c := range []struct {
		name string
		fg   func(*testutil.Path) []string
	}{{"paced TCP", pacedForeground}, {"UDP", udpForeground}} {
		for _, y := range []struct{ name, policy string }{{"yield", ""}, {"no yield", yieldOffPolicy}} {
			t.Run(c.name+", "+y.name, func(t *testing.T) {
				sideBySide(t) // a path of its own
				p, base := shapedPath(t)
				_, sock := startDaemon(t, p.A, shapedPolicy(p.LinkA)+y.policy)
				r := measureShare(t, p, base, sock, shapedLinkBps, c.fg(p))
				r.log(t, c.name+" ("+y.name+")")
				r.judge(t, 0.3)
			})
		}
	}
}
