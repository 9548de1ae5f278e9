// cgmove_test.go: moving a process in a lane keeps it inside the host cgroup
// it runs in (a systemd scope here), and stopping the daemon gives it back.
package daemon_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func procCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("pid %d: no cgroup v2 line", pid)
	return ""
}

// TestAttackMoveLeavesScope: move-pid and `lanes run` took a process out of
// its systemd scope (cgroup.kill on the scope no longer reached it), and on
// stop moved it to the root cgroup. Fix: a lane group nested in the
// process's own cgroup, whose processes go back to it on stop.
func TestAttackMoveLeavesScope(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	if os.Getenv("LANES_CG_HELPER") != "" {
		t.Skip("helper")
	}
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("no cgroup v2 mount")
	}
	b := newAttackBed(t, "")
	scopeRel := "/" + testutil.UniqueName("lanes-test-") + ".scope"
	scope := makeScope(t, root, scopeRel)
	// A helper in the scope that connects to B when told, and a sleeper,
	// both moved to the background lane.
	exe := copyTestBinary(t)
	helper := b.p.A.Command(exe, "-test.run=^TestCgroupHelper$")
	helper.Env = append(os.Environ(), fmt.Sprintf("LANES_CG_HELPER=%s:8080", b.p.AddrB))
	stdin, _ := helper.StdinPipe()
	stdout, _ := helper.StdoutPipe()
	startInScope(t, b, helper, scope, scopeRel, lane.Background)
	startInScope(t, b, b.p.A.Command("sleep", "1000"), scope, scopeRel, lane.Background)
	// The nested group is a lane: the helper's new connection is background.
	fmt.Fprintln(stdin, "connect")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var cookie uint64
	if _, serr := fmt.Sscanf(line, "cookie=%d", &cookie); err != nil || serr != nil {
		t.Fatalf("helper: %q %v %v", line, err, serr)
	}
	if got, err := b.root.SocketLanes([]uint64{cookie}); err != nil || got[cookie] != lane.Background {
		t.Errorf("connection from the nested group: lane %v, want background (%v)", got[cookie], err)
	}
	// Killing the scope (as systemctl stop does) still reaches a moved process.
	killScope(t, scope)
	if err := helper.Wait(); err == nil {
		t.Error("helper survived cgroup.kill of its scope")
	}
	// On stop a moved process goes back to its scope (the sleeper was
	// killed too: start another).
	sleeper := b.p.A.Command("sleep", "1000")
	startInScope(t, b, sleeper, scope, scopeRel, lane.Interactive)
	pid := sleeper.Process.Pid
	b.d.stop(t, syscall.SIGTERM)
	if cg := procCgroup(t, pid); cg != scopeRel {
		t.Errorf("after the daemon stopped, pid %d is in %s, want back in %s", pid, cg, scopeRel)
	}
	if left, _ := filepath.Glob(filepath.Join(scope, "lanes.*")); len(left) != 0 {
		t.Errorf("lane groups left in the scope: %v", left)
	}
}

// makeScope creates a cgroup at root+rel standing in for a systemd scope,
// removed with its lane groups (after a cgroup.kill) when the test ends.
func makeScope(t *testing.T, root, rel string) string {
	t.Helper()
	scope := filepath.Join(root, rel)
	if err := os.Mkdir(scope, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(scope, "cgroup.kill"), []byte("1"), 0)
		for _, d := range []string{"background", "interactive", "realtime"} {
			matches, _ := filepath.Glob(filepath.Join(scope, "lanes.*."+d))
			for _, m := range matches {
				unix.Rmdir(m)
			}
		}
		for i := 0; unix.Rmdir(scope) == unix.EBUSY && i < 100; i++ {
			syscall.Nanosleep(&syscall.Timespec{Nsec: 20e6}, nil)
		}
	})
	return scope
}

// startInScope starts cmd (killed when the test ends), puts it in the scope
// and moves it to lane l through the daemon, which must nest the lane's
// group inside the scope.
func startInScope(t *testing.T, b *attackBed, cmd *exec.Cmd, scope, scopeRel string, l lane.Lane) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(scope, "cgroup.procs"), []byte(fmt.Sprint(pid)), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.root.Move(pid, l, true); err != nil {
		t.Fatal(err)
	}
	if cg := procCgroup(t, pid); !strings.HasPrefix(cg, scopeRel+"/lanes.") || !strings.HasSuffix(cg, "."+l.String()) {
		t.Fatalf("pid %d moved to %s: out of its scope %s", pid, cg, scopeRel)
	}
}

// TestCgroupHelper is TestAttackMoveLeavesScope's helper: on a line on
// stdin it connects to LANES_CG_HELPER and prints the socket's cookie, then
// waits.
func TestCgroupHelper(t *testing.T) {
	addr := os.Getenv("LANES_CG_HELPER")
	if addr == "" {
		t.Skip("only run by TestAttackMoveLeavesScope")
	}
	r := bufio.NewReader(os.Stdin)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := c.(*net.TCPConn).SyscallConn()
	var cookie uint64
	raw.Control(func(fd uintptr) { cookie, _ = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE) })
	fmt.Printf("cookie=%d\n", cookie)
	r.ReadString('\n')
}

// killScope kills every process of the cgroup subtree at scope, as systemd
// stops a unit: through cgroup.kill (5.14+), else by signalling each pid
// of each cgroup.procs below it (before 5.14, where there is no
// cgroup.kill).
func killScope(t *testing.T, scope string) {
	t.Helper()
	kill := filepath.Join(scope, "cgroup.kill")
	if _, err := os.Stat(kill); err == nil {
		if err := os.WriteFile(kill, []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	err := filepath.WalkDir(scope, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.Name() != "cgroup.procs" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
