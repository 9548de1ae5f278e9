// instance_test.go: instance names are never reused by a later namespace,
// and what a killed daemon of a deleted namespace left is swept.
package daemon_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/daemon"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func instanceIn(t *testing.T, ns *testutil.NetNS) (string, uint64) {
	var inst string
	var st syscall.Stat_t
	ns.Do(t, func() (err error) {
		if err = syscall.Stat("/proc/thread-self/ns/net", &st); err != nil {
			return err
		}
		inst, err = daemon.Instance()
		return err
	})
	return inst, st.Ino
}

func deleteNetNS(ns *testutil.NetNS) {
	ns.Handle.Close()
	_ = netns.DeleteNamed(ns.Name)
}

// TestAttackInstanceNameReuse: instance names came from the namespace's
// inode ("n<inode base 36>"), which the kernel hands to a later namespace,
// and that namespace's daemon then adopted the dead one's leftovers. Whether
// the kernel reuses an inode during a test is chance, so the test makes the
// reuse certain: before the daemon starts, it plants what a killed daemon
// named after this namespace's inode would have left — its lane cgroups,
// with a process still in the background one (so no cleanup may remove
// them) — and checks that the new daemon neither takes them as its own
// lanes nor disturbs them when it stops. Fix: names from the netns cookie,
// which the kernel never reuses. Run against the inode-named daemon
// (this test copied into a checkout of it) it failed: the
// daemon's background lane was the planted lanes.n<inode>/background.
func TestAttackInstanceNameReuse(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("no cgroup v2 mount")
	}
	p := testutil.NewVethPair(t)
	inst, ino := instanceIn(t, p.A)
	old := "lanes.n" + strconv.FormatUint(ino, 36) // the inode-derived name
	if "lanes."+inst == old {
		// The fix needs the namespace's cookie: SO_NETNS_COOKIE (5.14) or
		// cgroup/sock_create's bpf_get_netns_cookie (5.7, with a cgroup v2
		// mount); without, the daemon itself is named after the inode.
		t.Skipf("instance %s named after the namespace inode: neither SO_NETNS_COOKIE nor the BPF helper's cookie on this kernel", inst)
	}
	base := filepath.Join(root, old)
	planted := filepath.Join(base, "background")
	if _, err := os.Stat(base); err == nil {
		t.Fatalf("%s exists before the test", base)
	}
	if err := os.MkdirAll(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sleeper.Process.Kill()
		sleeper.Wait()
		for _, l := range []string{"realtime", "interactive", "background"} {
			os.Remove(filepath.Join(base, l))
		}
		os.Remove(base)
	})
	if err := os.WriteFile(filepath.Join(planted, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA))
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	bg, err := c.LaneCgroup(lane.Background)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(filepath.Dir(bg)) == old {
		t.Errorf("the daemon of namespace inode %d took the planted %s as its background lane; its log:\n%s", ino, bg, d.out)
	}
	d.stop(t, syscall.SIGTERM)
	if got := cgroupOf(t, sleeper.Process.Pid); got != "/"+old+"/background" {
		t.Errorf("after the daemon stopped, the planted process is in %s, want /%s/background", got, old)
	}
}

// cgroupOf is a process's cgroup v2 path.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	return ""
}

// TestAttackGoneNamespaceLeftovers: SIGKILL of a daemon followed by the
// deletion of its namespace left cgroups, state files and mounts forever.
// Fix: daemons record their instance; the next daemon to start sweeps the
// leftovers of instances whose namespace is gone, the coop replay state
// (kept in the state directory, $STATE_DIRECTORY here) included.
func TestAttackGoneNamespaceLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("no cgroup v2 mount")
	}
	shared := t.TempDir()
	p1, p2 := testutil.NewVethPair(t), testutil.NewVethPair(t)
	for _, ns := range []*testutil.NetNS{p1.A, p2.A} {
		stateDirs.Store(ns.Name, shared)
	}
	// coop on (the default state file): its replay state must outlive the
	// daemon in the state directory, and go with the namespace
	d1, _ := startDaemon(t, p1.A, devicePolicy(p1.LinkA)+"coop:\n  enabled: true\n  port: 7319\n")
	inst1, _ := instanceIn(t, p1.A)
	d1.stop(t, syscall.SIGKILL)
	left := []string{filepath.Join(shared, "instances", inst1), filepath.Join(root, "lanes."+inst1),
		filepath.Join(shared, "coop", inst1+"."+p1.LinkA+".json"), filepath.Join(daemon.RunDir, inst1+".lock")}
	files, _ := filepath.Glob(filepath.Join(shared, "datapath", inst1+".*.json"))
	left = append(left, files...)
	for _, p := range left {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("after SIGKILL, expected %s to remain (fail-open): %v", p, err)
		}
	}
	deleteNetNS(p1.A)
	deleteNetNS(p1.B)
	startDaemon(t, p2.A, devicePolicy(p2.LinkA))
	for _, p := range left {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s of the vanished namespace's daemon is still there", p)
		}
	}
}
