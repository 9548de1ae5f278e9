// ccallow_test.go: the congestion controls users may ask for on a
// background socket follow the kernel's allow-list at a reload (N21).
package daemon_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestReloadRereadsCCAllowList (audit N21): the allow-list
// (net.ipv4.tcp_allowed_congestion_control) was copied at start, so a
// name the administrator added stayed refused to users' background
// sockets, and a name removed stayed allowed (and then ran at the move
// back) until a restart. The daemon here reads a list of the test's own,
// bound over the sysctl in its mount namespace (the real one is the
// machine's); a reload must make its change count, both ways.
func TestReloadRereadsCCAllowList(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil || !slices.Contains(strings.Fields(string(avail)), "cubic") {
		t.Skipf("no cubic here: %q %v", avail, err)
	}
	dir := t.TempDir()
	list := filepath.Join(dir, "allowed")
	setList := func(names string) {
		if err := os.WriteFile(list, []byte(names+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setList("reno bbr")
	wrapper := filepath.Join(dir, "lanes")
	script := fmt.Sprintf(`#!/bin/sh
exec unshare --mount --propagation private /bin/sh -c 'mount --bind "$0" /proc/sys/net/ipv4/tcp_allowed_congestion_control && exec "$@"' %q %q "$@"
`, list, lanesBin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := lanesBin
	lanesBin = wrapper
	b := newAttackBed(t, "")
	lanesBin = saved

	conn := b.dialAs(t, nobody, "tcp", "", 0)
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	cc := func() (name string) {
		raw.Control(func(fd uintptr) { name, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
		return name
	}
	askCubic := func() (err error) {
		testutil.AsUser(t, nobody, nobody, nil, func() error {
			raw.Control(func(fd uintptr) { err = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic") })
			return nil
		})
		return err
	}
	f, err := client.FlowOf(conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.root.Register(f, lane.Background); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "nobody's socket on the background congestion control", func() bool {
		conn.Write([]byte("x"))
		return strings.HasPrefix(cc(), "lanes")
	})
	if err := askCubic(); !errors.Is(err, unix.EPERM) {
		t.Fatalf("nobody's setsockopt(cubic), cubic not in the list: %v, want EPERM", err)
	}
	setList("reno bbr cubic")
	b.d.cmd.Process.Signal(syscall.SIGHUP)
	waitLong(t, "cubic allowed after the reload that read it", func() bool { return askCubic() == nil })
	setList("reno bbr")
	b.d.cmd.Process.Signal(syscall.SIGHUP)
	waitLong(t, "cubic refused after the reload that read it gone", func() bool { return errors.Is(askCubic(), unix.EPERM) })
	if got := cc(); !strings.HasPrefix(got, "lanes") {
		t.Errorf("the background socket runs %q", got)
	}
}
