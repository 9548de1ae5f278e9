package execlane

import (
	"bufio"
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
	// a copy of sh that says so once it runs its script: the exec's
	// tracepoint, which marks, runs after /proc/PID/exe names the new
	// executable (begin_new_exec) and before the program's first
	// instruction, so only a word from the program says it was read
	exe := filepath.Join(t.TempDir(), "lanes-execlane")
	b, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
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
	const script = "echo ready; read -r line"                              // a builtin: no child to outlive the test
	elsewhere := runReady(t, exec.Command(exe, "-c", script), "elsewhere") // this test's namespace
	own := runReady(t, ns.Command(exe, "-c", script), "own")               // ip's exec here, sh's there
	var lane uint32
	if err := l.objs.LanesTaskLane.Lookup(uint32(own), &lane); err != nil || lane != 2 {
		t.Errorf("the namespace's process %d: lane %d (%v), want 2", own, lane, err)
	}
	if err := l.objs.LanesTaskLane.Lookup(uint32(elsewhere), &lane); err == nil {
		t.Errorf("process %d of another namespace marked with lane %d", elsewhere, lane)
	}
}

// runReady starts cmd, killed at the test's end, waits for the first
// line it writes and returns its pid. Its stdin stays open until then.
func runReady(t *testing.T, cmd *exec.Cmd, name string) int {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe() // open until the end: the script waits on it
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = in.Close(); _ = cmd.Wait() })
	line := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(out).ReadString('\n')
		line <- err
	}()
	select {
	case err := <-line:
		if err != nil {
			t.Fatalf("%s process %d: %v", name, cmd.Process.Pid, err)
		}
	case <-time.After(testutil.Patience(5 * time.Second)):
		t.Fatalf("%s process %d never said it ran", name, cmd.Process.Pid)
	}
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
