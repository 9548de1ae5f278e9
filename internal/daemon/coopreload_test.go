// coopreload_test.go: a reload that leaves the coop section alone keeps
// the coop controller and its UDP socket (N10).
package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lanes-net/lanes/internal/testutil"
)

// TestReloadKeepsUnchangedCoop (audit N10): every SIGHUP restarted coop, closing and
// binding its UDP port again, so a process binding the port in a 1 ms loop
// won it at a reload. Fix: a reload keeps coop (the same socket) unless its
// section, interface or key changed.
func TestReloadKeepsUnchangedCoop(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	coop := fmt.Sprintf("coop:\n  enabled: true\n  port: 7431\n  interval: 100ms\n  state_file: %q\n",
		filepath.Join(t.TempDir(), "coop.json"))
	d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA)+coop)
	socketOf := func() string { // the inode of the socket bound to 7431 (0x1D07)
		var inode string
		waitLong(t, "coop's UDP socket", func() bool {
			p.A.Do(t, func() error {
				for _, f := range []string{"/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"} {
					b, _ := os.ReadFile(f)
					for _, line := range strings.Split(string(b), "\n") {
						if fs := strings.Fields(line); len(fs) > 9 && strings.HasSuffix(fs[1], ":1D07") {
							inode = fs[9]
						}
					}
				}
				return nil
			})
			return inode != ""
		})
		return inode
	}
	before := socketOf()
	const done = "policy reloaded"
	n := strings.Count(d.out.String(), done)
	os.WriteFile(filepath.Join(filepath.Dir(sock), "policy.yaml"),
		[]byte(devicePolicy(p.LinkA)+"dscp:\n  ef_realtime: true\n"+coop), 0o600)
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitLong(t, "the reload", func() bool { return strings.Count(d.out.String(), done) > n })
	// "policy reloaded" ends the policy's part; the components are kept or
	// restarted after it, each saying which, so the test waits for coop's word.
	waitLong(t, "the reload's word on coop", func() bool {
		return strings.Contains(d.out.String(), "reload: coop section")
	})
	if !strings.Contains(d.out.String(), "coop section unchanged") {
		t.Errorf("the reload restarted coop though its section was unchanged:\n%s", d.out.String())
	}
	if after := socketOf(); after != before {
		t.Errorf("coop's UDP socket after a reload that left its section alone: inode %s, was %s (restarted)", after, before)
	}
}
