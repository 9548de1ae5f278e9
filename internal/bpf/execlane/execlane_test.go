package execlane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

// Loaded for one network namespace, the programs mark at exec the
// processes of that namespace running a rule's executable, and not those
// of another (another daemon's namespace): its processes take no entry.
func TestMarksOwnNamespaceOnly(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	var st syscall.Stat_t
	if err := syscall.Stat(ns.Path(), &st); err != nil {
		t.Fatal(err)
	}
	spec, err := LoadExeclane()
	if err != nil {
		t.Fatal(err)
	}
	cookies, err := ebpf.NewMap(spec.Maps["lanes_cookie"])
	if err != nil {
		t.Fatal(err)
	}
	defer cookies.Close()
	// sock_create attached to a cgroup of the test's own, which no socket uses
	group := testCgroup(t)
	l, err := Load(1, uint32(st.Ino), cookies, group)
	if err != nil {
		t.Skipf("exec lane programs do not load here: %v", err)
	}
	defer l.Close()
	exe := filepath.Join(t.TempDir(), "lanes-execlane")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skip("no /bin/sleep")
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var est syscall.Stat_t
	if err := syscall.Stat(exe, &est); err != nil {
		t.Fatal(err)
	}
	key := Key{Dev: KernelDev(unix.Major(est.Dev), unix.Minor(est.Dev)), Ino: est.Ino}
	if err := l.Set(map[Key]uint32{key: 2}); err != nil {
		t.Fatal(err)
	}
	elsewhere := run(t, exec.Command(exe, "30")) // this test's namespace
	own := run(t, ns.Command(exe, "30"))         // ip's exec here, sleep's there
	for name, pid := range map[string]int{"own": own, "elsewhere": elsewhere} {
		waitExec(t, pid, exe, name)
	}
	var lane uint32
	if err := l.objs.LanesTaskLane.Lookup(uint32(own), &lane); err != nil || lane != 2 {
		t.Errorf("the namespace's process %d: lane %d (%v), want 2", own, lane, err)
	}
	if err := l.objs.LanesTaskLane.Lookup(uint32(elsewhere), &lane); err == nil {
		t.Errorf("process %d of another namespace marked with lane %d", elsewhere, lane)
	}
}

// run starts cmd, killed at the test's end, and returns its pid.
func run(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// testCgroup is a cgroup v2 group of the test's own, removed at its end.
func testCgroup(t *testing.T) string {
	t.Helper()
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var fs unix.Statfs_t
		if unix.Statfs(root, &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		dir := filepath.Join(root, fmt.Sprintf("lanes-test-execlane-%d", os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
		return dir
	}
	t.Skip("no cgroup v2 mount")
	return ""
}

// waitExec waits until pid runs exe.
func waitExec(t *testing.T, pid int, exe, name string) {
	t.Helper()
	for deadline := time.Now().Add(testutil.Patience(5 * time.Second)); ; {
		if got, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); got == exe {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s process %d never ran %s", name, pid, exe)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
