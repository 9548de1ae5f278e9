// instance_test.go: instance names are never reused by a later namespace,
// and what a killed daemon of a deleted namespace left is swept.
package daemon_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/lanes-net/lanes/internal/daemon"
	"github.com/lanes-net/lanes/internal/features"
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
// inode, which the kernel hands to a later namespace, and that namespace's
// daemon then adopted the dead one's leftovers. Fix: the netns cookie.
func TestAttackInstanceNameReuse(t *testing.T) {
	testutil.RequireRoot(t)
	a := testutil.NewNetNS(t)
	instA, inoA := instanceIn(t, a)
	deleteNetNS(a)
	reused := false
	for i := 0; i < 20 && !reused; i++ {
		b := testutil.NewNetNS(t)
		instB, inoB := instanceIn(t, b)
		if instA == instB {
			t.Fatalf("a later namespace got the same instance name %s (inode %d then %d)", instA, inoA, inoB)
		}
		reused = inoA == inoB
		deleteNetNS(b)
	}
	if !reused {
		t.Logf("the kernel did not reuse inode %d in 20 namespaces: names still distinct", inoA)
	}
}

// TestAttackGoneNamespaceLeftovers: SIGKILL of a daemon followed by the
// deletion of its namespace left cgroups, state files and mounts forever.
// Fix: daemons record their instance; the next daemon to start sweeps the
// leftovers of instances whose namespace is gone.
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
	d1, _ := startDaemon(t, p1.A, devicePolicy(p1.LinkA))
	inst1, _ := instanceIn(t, p1.A)
	d1.stop(t, syscall.SIGKILL)
	left := []string{filepath.Join(shared, "instances", inst1), filepath.Join(root, "lanes."+inst1)}
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
