// cgroup_test.go checks cgroup rules on real sockets: a process in a child
// of a cgroup that has a lane gets that lane (sock_ops walks the ancestors
// and stores the socket's cookie), and the lane cgroups of Open work for a
// process started inside them.
package datapath

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestCgroupAncestorRule(t *testing.T) {
	root := requireCgroup2(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "cg1"})
	parent := filepath.Join(root, testutil.UniqueName("lanes-test-"))
	child := filepath.Join(parent, "job")
	if err := os.MkdirAll(child, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		MoveProcs(child, root)
		unix.Rmdir(child)
		unix.Rmdir(parent)
	})
	pid, err := cgroupID(parent)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Lanes.SetCgroupLane(pid, lane.Background); err != nil {
		t.Fatal(err)
	}
	s, addr := startSink(t, p.B, p.AddrB, 9301)
	bulk := startBulk(t, p.A, addr, child, 1)
	bulk.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for s.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Sockops["by_cgroup"] != 1 || st.Classifier["cookie"] == 0 || st.Lanes[lane.Background].Bytes < uint64(s.n.Load()) {
		t.Errorf("process in a child cgroup of a background rule: sock_ops %v classifier %v background %d bytes (sent %d)",
			st.Sockops, st.Classifier, st.Lanes[lane.Background].Bytes, s.n.Load())
	}
	if err := d.Lanes.DeleteCgroup(pid); err != nil {
		t.Fatal(err)
	}
}
