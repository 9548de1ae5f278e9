// cgown_test.go: the daemon adopts a nested lane group only if it made it
// (root owns it, its trusted mark names it), never by name alone.
package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

const nobody = 65534

// TestAttackAdoptOnlyOwnGroups (N13): a user with a delegated cgroup made
// lanes.<instance>.realtime in it and kept its process there; at the next
// start the daemon adopted it by its name, and the user's traffic went
// realtime. Fix: adopt only groups root owns whose mark names
// their instance and lane.
func TestAttackAdoptOnlyOwnGroups(t *testing.T) {
	testutil.RequireRoot(t)
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("no cgroup v2 mount")
	}
	d := newLaneGroups(testutil.UniqueName("t"), &cgroupMount{root: root}, newRegistrations(nil))
	home := filepath.Join(root, testutil.UniqueName("lanes-test-")+".service")
	mkdirs(t, home)
	if err := os.Chown(home, nobody, nobody); err != nil { // Delegate=
		t.Fatal(err)
	}
	userMade := filepath.Join(home, d.name(lane.Realtime))
	mkdirs(t, userMade)
	if err := os.Chown(userMade, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	// a root-owned directory of that name lanes did not make (an older
	// version's, or another tool's): not adopted either
	home2 := filepath.Join(root, testutil.UniqueName("lanes-test-")+".service")
	mkdirs(t, home2)
	mkdirs(t, filepath.Join(home2, d.name(lane.Realtime)))
	// and one the daemon made, left by a crash: adopted
	home3 := filepath.Join(root, testutil.UniqueName("lanes-test-")+".service")
	mkdirs(t, home3)
	if err := unix.Setxattr(home3, groupMark, []byte("probe"), 0); err != nil {
		t.Skipf("no trusted xattrs on cgroupfs: %v", err)
	}
	if _, err := d.make(filepath.Join(home3, d.name(lane.Background)), lane.Background); err != nil {
		t.Fatal(err)
	}
	found := d.find()
	for rel, l := range found {
		if filepath.Dir(filepath.Join(root, rel)) != home3 || l != lane.Background {
			t.Errorf("adopted %s as %s: not a group the daemon made", rel, l)
		}
	}
	if len(found) != 1 {
		t.Errorf("adopted %d groups, want the daemon's own one: %v", len(found), found)
	}
	// and nestedGroup does not take the user's directory for its own
	if _, err := d.make(userMade, lane.Realtime); err == nil {
		t.Error("a user's directory named as a lane group was used as one")
	}
	// an empty root-owned one without a mark (an earlier version's) is
	// made again, marked
	unmarked := filepath.Join(home2, d.name(lane.Realtime))
	if _, err := d.make(unmarked, lane.Realtime); err != nil || !d.own(unmarked, lane.Realtime) {
		t.Errorf("an earlier version's empty group: %v, marked %v", err, d.own(unmarked, lane.Realtime))
	}
}

// mkdirs makes dir, removed (with its child directories) when the test ends.
func mkdirs(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		subs, _ := os.ReadDir(dir)
		for _, s := range subs {
			if s.IsDir() {
				unix.Rmdir(filepath.Join(dir, s.Name()))
			}
		}
		unix.Rmdir(dir)
	})
}

// TestAttackNestedGroupsBounded (N14): a user with a delegated cgroup made
// 4,200 child cgroups and moved a process of each to background (its own,
// so allowed): 4,092 nested groups filled the classifier's cgroup map, and
// root's moves failed. Fix: at most maxNestedPerUID in one user's cgroups,
// users' groups leave rootNestedReserve, with an error that says so.
func TestAttackNestedGroupsBounded(t *testing.T) {
	testutil.RequireRoot(t)
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("no cgroup v2 mount")
	}
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	*f.d.cgroups, f.d.instance = cgroupMount{root: root}, testutil.UniqueName("t")
	g := newLaneGroups(f.d.instance, f.d.cgroups, f.d.regs)
	f.d.groups, f.d.kernel.groups, f.d.mover.groups = g, g, g
	delegated := "/" + testutil.UniqueName("lanes-test-") + ".service"
	mkdirs(t, filepath.Join(root, delegated))
	var refused error
	for i := range maxNestedPerUID + 1 {
		home := filepath.Join(delegated, "c"+strconv.Itoa(i))
		mkdirs(t, filepath.Join(root, home))
		if err := os.Chown(filepath.Join(root, home), nobody, nobody); err != nil {
			t.Fatal(err)
		}
		if _, err := f.d.mover.nestedGroup(home, lane.Background); err != nil {
			refused = err
			t.Logf("group %d: %v", i, err)
			break
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "uid 65534") {
		t.Errorf("%d nested groups in one user's cgroups, want at most %d (error %v)",
			len(f.d.groups.all()), maxNestedPerUID, refused)
	}
	// root's cgroups keep their room
	home := filepath.Join(delegated, "root")
	mkdirs(t, filepath.Join(root, home))
	if _, err := f.d.mover.nestedGroup(home, lane.Background); err != nil {
		t.Errorf("root's lane group refused after a user's: %v", err)
	}
	// users together leave the reserve
	for i := range maxNested - rootNestedReserve {
		f.d.groups.set("/u"+strconv.Itoa(i), nestedGroup{owner: uint32(1000 + i/maxNestedPerUID)})
	}
	err := f.d.groups.room(70000)
	rootErr := f.d.groups.room(0)
	if err == nil || rootErr != nil {
		t.Errorf("users' groups filled root's reserve: another user's %v, root's %v", err, rootErr)
	}
}
