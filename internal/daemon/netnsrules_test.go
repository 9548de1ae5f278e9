// netnsrules_test.go: a daemon's process rules stay in its network namespace.
package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

// A daemon's exe: rule reaches the processes of its own network namespace
// only: a process of another daemon's namespace running the executable
// keeps its cgroup, its socket's lane there, and is not tracked; one of the
// daemon's own namespace moves, at the daemon's start (the /proc scan) and
// at its exec (the process events); `lanes move --cgroup` moves the
// cgroup's processes of its own namespace only. Before, the first daemon
// moved the other namespace's processes into its own lane groups.
func TestExeRuleOwnNamespaceOnly(t *testing.T) {
	testutil.RequireRoot(t)
	p1, p2 := testutil.NewVethPair(t), testutil.NewVethPair(t)
	// a copy of lanes at a path of this test's own: no other test runs it
	exe := filepath.Join(t.TempDir(), "lanes-nsrule")
	copyFile(t, lanesBin, exe)
	_, sock2 := startDaemon(t, p2.A, devicePolicy(p2.LinkA))
	serve := func(ns *testutil.NetNS, port int) int {
		return startBin(t, ns, exe, "lab", "helper", "serve", "--listen", fmt.Sprintf(":%d", port)).cmd.Process.Pid
	}
	// every helper starts in this test's cgroup (ip netns exec keeps it)
	home := procCgroupOf(t, os.Getpid())
	other := serve(p2.A, 9101) // started first: the scan reaches it before the own one
	otherLane := listenLane(t, p2.A, sock2, 9101)
	own := serve(p1.A, 9101)
	_, sock1 := startDaemon(t, p1.A, devicePolicy(p1.LinkA)+"rules:\n  - {name: nsrule, lane: background, exe: "+exe+"}\n")
	moved := func(pid int) bool {
		cg := procCgroupOf(t, pid)
		return cg != home && strings.Contains(cg, "background")
	}
	waitFor(t, "the scan: the own namespace's process in background, the engine ready", func() bool {
		return moved(own) && !strings.HasPrefix(status(t, sock1).Components["tasks"], ",")
	})
	// exec: the other namespace's process first, then the own one
	other2 := serve(p2.A, 9102)
	own2 := serve(p1.A, 9102)
	waitFor(t, "the exec: the own namespace's second process in background", func() bool { return moved(own2) })
	for _, pid := range []int{other, other2} {
		if now := procCgroupOf(t, pid); now != home {
			t.Errorf("pid %d of the other namespace moved from %s to %s", pid, home, now)
		}
	}
	if now := listenLane(t, p2.A, sock2, 9101); now != otherLane {
		t.Errorf("the other namespace's socket: lane %v, was %v", now, otherLane)
	}
	if tasks := status(t, sock1).Components["tasks"]; !strings.Contains(tasks, " 2 processes tracked") {
		t.Errorf("status tasks %q, want its own namespace's 2 processes", tasks)
	}
	cgroupOfBoth(t, p1.A, sock1, other)
}

// cgroupOfBoth: `lanes move --cgroup` of a cgroup holding a process of the
// daemon's namespace and one (other) of another moves the first only.
func cgroupOfBoth(t *testing.T, ns *testutil.NetNS, sock string, other int) {
	t.Helper()
	root := cgroup2Root(t)
	dir := filepath.Join(root, fmt.Sprintf("lanes-test-nsrule-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	own := ns.Command("sleep", "30")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(fmt.Sprint(other)), 0)
		_ = own.Process.Kill()
		_ = own.Wait()
		removeCgroupTree(t, dir)
	})
	for _, pid := range []int{other, own.Process.Pid} {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("nsenter", "--net="+ns.Path(), lanesBin, "move", "--socket", sock, "--lane", "background", "--cgroup", dir).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "1 process(es) -> background") {
		t.Errorf("lanes move --cgroup of a cgroup with a process of each namespace: %v %s, want 1 moved", err, out)
	}
	want := "/" + filepath.Base(dir)
	if now := procCgroupOf(t, other); now != want {
		t.Errorf("lanes move --cgroup took pid %d of the other namespace from %s to %s", other, want, now)
	}
	if now := procCgroupOf(t, own.Process.Pid); !strings.HasPrefix(now, want+"/") {
		t.Errorf("lanes move --cgroup left its own namespace's pid %d in %s", own.Process.Pid, now)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// procCgroupOf is pid's cgroup v2 path.
func procCgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if cg, ok := strings.CutPrefix(line, "0::"); ok {
			return cg
		}
	}
	t.Fatalf("pid %d: no cgroup v2 line in %q", pid, b)
	return ""
}

// listenLane is the lane the daemon at sock gives ns's socket listening on
// TCP port.
func listenLane(t *testing.T, ns *testutil.NetNS, sock string, port int) client.Lane {
	t.Helper()
	var cookie uint64
	ns.Do(t, func() error {
		return tcpmon.DumpSockets(unix.IPPROTO_TCP, func(s *tcpmon.Sock) {
			if int(s.Src.Port()) == port && s.State == 10 {
				cookie = s.Cookie
			}
		})
	})
	if cookie == 0 {
		t.Fatalf("no socket listening on port %d", port)
	}
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lanes, err := c.SocketLanes([]uint64{cookie})
	if err != nil {
		t.Fatal(err)
	}
	return lanes[cookie]
}

// cgroup2Root is a cgroup v2 mount: the machine's, else one of the test's
// own (a host with cgroup v1 only at /sys/fs/cgroup), unmounted at its end.
func cgroup2Root(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return dir
		}
	}
	dir := t.TempDir()
	if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mount cgroup2: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
