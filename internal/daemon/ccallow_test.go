// ccallow_test.go: the congestion controls users may ask for on a
// background socket follow the kernel's allow-list at each write of it
// and at a reload (N21).
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
	"time"

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
	a := newCCAllowBed(t)
	a.setList("reno bbr cubic")
	a.b.d.cmd.Process.Signal(syscall.SIGHUP)
	waitLong(t, "cubic allowed after the reload that read it", func() bool { return a.askCubic() == nil })
	a.setList("reno bbr")
	a.b.d.cmd.Process.Signal(syscall.SIGHUP)
	waitLong(t, "cubic refused after the reload that read it gone", func() bool { return errors.Is(a.askCubic(), unix.EPERM) })
	if got := a.cc(); !strings.HasPrefix(got, "lanes") {
		t.Errorf("the background socket runs %q", got)
	}
}

// TestAllowListFollowsSysctlLive (N21): the allow-list followed the
// sysctl at a reload only, so between an administrator's write and the
// next reload a name added stayed refused and a name removed stayed
// allowed. The daemon must read the list again at each write, without a
// reload. The list is global and only the initial namespace may write
// it, so the test changes its own copy bound over the daemon's view
// (newCCAllowBed) and then writes the real sysctl a name no kernel has:
// the kernel refuses that write (ENOENT) and the machine's list stays,
// but the write is seen as any write is (the cgroup/sysctl hook runs
// before the sysctl's handler). Each change must count within 2 s, well
// before the 5 s reading where cgroup/sysctl is missing; the time to
// the change is logged.
func TestAllowListFollowsSysctlLive(t *testing.T) {
	a := newCCAllowBed(t)
	const path = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		list string
		want error
	}{{"reno bbr cubic", nil}, {"reno bbr", unix.EPERM}, {"reno cubic bbr", nil}, {"bbr reno", unix.EPERM}} {
		a.setList(step.list)
		start := time.Now()
		if err := os.WriteFile(path, []byte("lanes-no-such-cc\n"), 0); !errors.Is(err, unix.ENOENT) {
			t.Fatalf("writing an unknown name to the sysctl: %v, want the kernel's ENOENT", err)
		}
		for err := a.askCubic(); !errors.Is(err, step.want); err = a.askCubic() {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("step %d: list %q: setsockopt(cubic) still %v 2 s after the write, want %v", i, step.list, err, step.want)
			}
			time.Sleep(time.Millisecond)
		}
		t.Logf("list %q: setsockopt(cubic) %v after %v", step.list, step.want, time.Since(start).Round(100*time.Microsecond))
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the machine's list changed: %q -> %q", before, after)
	}
	if got := a.cc(); !strings.HasPrefix(got, "lanes") {
		t.Errorf("the background socket runs %q", got)
	}
}

// ccAllowBed is a daemon whose allow-list is a file of the test's own
// (setList) and nobody's background TCP socket that asks for cubic.
type ccAllowBed struct {
	b        *attackBed
	setList  func(names string)
	askCubic func() error  // nobody's setsockopt(TCP_CONGESTION, "cubic")
	cc       func() string // the socket's congestion control
}

// newCCAllowBed starts the daemon with its allow-list "reno bbr" and waits
// until nobody's socket runs LEDBAT++ and is refused cubic.
func newCCAllowBed(t *testing.T) *ccAllowBed {
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil || !slices.Contains(strings.Fields(string(avail)), "cubic") {
		t.Skipf("no cubic here: %q %v", avail, err)
	}
	a := &ccAllowBed{}
	dir := t.TempDir()
	list := filepath.Join(dir, "allowed")
	a.setList = func(names string) {
		if err := os.WriteFile(list, []byte(names+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a.setList("reno bbr")
	wrapper := filepath.Join(dir, "lanes")
	script := fmt.Sprintf(`#!/bin/sh
exec unshare --mount --propagation private /bin/sh -c 'mount --bind "$0" /proc/sys/net/ipv4/tcp_allowed_congestion_control && exec "$@"' %q %q "$@"
`, list, lanesBin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := lanesBin
	lanesBin = wrapper
	a.b = newAttackBed(t, "")
	lanesBin = saved

	conn := a.b.dialAs(t, nobody, "tcp", "", 0)
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	a.cc = func() (name string) {
		raw.Control(func(fd uintptr) { name, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
		return name
	}
	a.askCubic = func() (err error) {
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
	if err := a.b.root.Register(f, lane.Background); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "nobody's socket on the background congestion control", func() bool {
		conn.Write([]byte("x"))
		return strings.HasPrefix(a.cc(), "lanes")
	})
	if err := a.askCubic(); !errors.Is(err, unix.EPERM) {
		t.Fatalf("nobody's setsockopt(cubic), cubic not in the list: %v, want EPERM", err)
	}
	return a
}
