package android

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestAndroidFormLoads: the Android-form netnscookie, loaded as NetBpfLoad
// loads it, runs in the kernel: attached to a test cgroup, it records the
// cookie of the namespace a probe socket is created in, the cookie
// SO_NETNS_COOKIE (5.14+) gives.
func TestAndroidFormLoads(t *testing.T) {
	testutil.RequireRoot(t)
	o, err := Load("objects/netnscookie.o", Locations[0])
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	checkCookie(t, o)
}

// TestAndroidFormPinned: the OEM path. The loader's objects pinned where
// it pins them (here under a bpffs of the test's own), opened by path as a
// daemon on Android would, and run.
func TestAndroidFormPinned(t *testing.T) {
	checkCookie(t, pinnedObject(t, "objects/netnscookie.o"))
}

// checkCookie attaches o's program to a test cgroup, creates the probe
// socket in a child started there (clone3 CLONE_INTO_CGROUP) and compares
// the cookie the program stored with the child's SO_NETNS_COOKIE.
func checkCookie(t *testing.T, o *Objects) {
	t.Helper()
	cg := testCgroup(t)
	prog := o.Programs["cgroupsockcreate/record_netns_cookie"]
	if prog == nil {
		t.Fatalf("no program record_netns_cookie among %v", o.Programs)
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cg, Attach: ebpf.AttachCGroupInetSockCreate, Program: prog})
	if err != nil {
		t.Fatalf("attach to %s: %v", cg, err)
	}
	defer l.Close()
	dir, err := os.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProbeSocketHelper$")
	cmd.Env = append(os.Environ(), "LANES_ANDROID_PROBE=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe helper: %v %s", err, out)
	}
	var want uint64
	if _, err := fmt.Sscanf(string(out), "cookie %d", &want); err != nil {
		t.Skipf("no SO_NETNS_COOKIE (5.14+) to compare with: %s", out)
	}
	var got uint64
	if err := o.Maps["netns_cookie"].Lookup(uint32(0), &got); err != nil {
		t.Fatal(err)
	}
	if got == 0 || got != want {
		t.Errorf("the program recorded cookie %d, the probe socket's namespace has %d", got, want)
	}
}

// TestProbeSocketHelper is the child of TestAndroidFormLoads: it creates
// the probe socket (a raw IPv6 socket of protocol 253) and prints its
// namespace's cookie.
func TestProbeSocketHelper(t *testing.T) {
	if os.Getenv("LANES_ANDROID_PROBE") != "1" {
		t.Skip("the child of TestAndroidFormLoads")
	}
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 253)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		fmt.Printf("no cookie: %v\n", err)
		return
	}
	fmt.Printf("cookie %d\n", c)
}

// testCgroup creates a cgroup v2 directory for the test, removed at its end.
func testCgroup(t *testing.T) string {
	t.Helper()
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("no cgroup v2 mounted")
	}
	cg, err := os.MkdirTemp(root, "lanes-android-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(cg) })
	return cg
}
