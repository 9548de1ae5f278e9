// android.go: Android's process groups for a test. Android mounts the
// cpuset controller on cgroup v1 at /dev/cpuset with the groups top-app,
// foreground, background, system-background and restricted
// (libprocessgroup's cgroups.json, init.rc); ActivityManager moves a
// process by writing its id into a group's cgroup.procs (task_profiles.json's
// JoinCgroup). Here the same hierarchy is mounted at a folder of the
// test's own: the cpuset controller on cgroup v1 where the kernel allows it
// (CONFIG_CPUSETS_V1, cpuset not in use on cgroup v2), else a named v1
// hierarchy (`none,name=lanes_android`): the same files and the same writes,
// without the CPU placement, which lanes does not read.
//
// In make android-check's GKI VM, scripts/android-cgroups.sh has set up
// Android's own hierarchies (LANES_ANDROID_CGROUPS names it): the test
// uses /dev/cpuset and moves processes by task_profiles.json's aggregate
// profiles, written from the test's own process as libprocessgroup writes
// them from ActivityManager's (no shell between the move and its writes).
package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// AndroidGroupNames are the cpusets Android's init creates.
var AndroidGroupNames = []string{"top-app", "foreground", "background", "system-background", "restricted"}

// AndroidGroups is a test's Android cpuset layout.
type AndroidGroups struct {
	Root  string // the folder holding the groups (give it to the daemon)
	Kind  string // "cpuset", "name=lanes_android" or the script's
	mount string
	// profiles: scripts/android-cgroups.sh where it set the groups up
	profiles string
}

// androidJoin is one JoinCgroup action: a hierarchy's group ("" its root).
type androidJoin struct{ hierarchy, group string }

// androidProfiles are task_profiles.json's aggregate profiles
// ActivityManager applies for each group (SetProcessProfiles): the
// profile's name and its JoinCgroup actions in its order, on the
// hierarchies scripts/android-cgroups.sh mounts, and its timer slack.
var androidProfiles = map[string]struct {
	Name  string
	joins []androidJoin
	slack int
}{
	"top-app": {"CPUSET_SP_TOP_APP",
		[]androidJoin{{"/dev/cpuctl", "top-app"}, {"/dev/cpuset", "top-app"}, {"/dev/blkio", ""}}, 50000},
	"foreground": {"CPUSET_SP_FOREGROUND",
		[]androidJoin{{"/dev/cpuctl", "foreground"}, {"/dev/cpuset", "foreground"}, {"/dev/blkio", ""}}, 50000},
	"background": {"CPUSET_SP_BACKGROUND", []androidJoin{{"/dev/cpuctl", "background"},
		{"/dev/cpuset", "background"}, {"/dev/blkio", "background"}}, 40000000},
	"system-background": {"CPUSET_SP_SYSTEM", []androidJoin{{"/dev/cpuset", "system-background"}}, 50000},
	"restricted":        {"CPUSET_SP_RESTRICTED", []androidJoin{{"/dev/cpuset", "restricted"}}, 50000},
	"":                  {"CPUSET_SP_DEFAULT", []androidJoin{{"/dev/cpuset", ""}}, 50000},
}

// NewAndroidGroups mounts a v1 hierarchy and makes the groups in a folder
// of their own; everything is removed at the test's end (tasks left in a
// group go back to the hierarchy's root first).
func NewAndroidGroups(t testing.TB) *AndroidGroups {
	t.Helper()
	RequireRoot(t)
	if script := os.Getenv("LANES_ANDROID_CGROUPS"); script != "" {
		return &AndroidGroups{Root: "/dev/cpuset", Kind: "cpuset (" + filepath.Base(script) + ")", profiles: script}
	}
	mnt, err := os.MkdirTemp("", "lanes-cpuset")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(mnt, 0o755)
	g := &AndroidGroups{mount: mnt}
	for _, opts := range []string{"cpuset", "none,name=lanes_android"} {
		if err = unix.Mount("cgroup", mnt, "cgroup", 0, opts); err == nil {
			g.Kind = strings.TrimPrefix(opts, "none,")
			break
		}
	}
	if g.Kind == "" {
		os.Remove(mnt)
		t.Skipf("no cgroup v1 hierarchy can be mounted here (cpuset, then a named one): %v", err)
	}
	t.Cleanup(func() { g.remove(t) })
	if g.Root, err = os.MkdirTemp(mnt, "lanes-test-"); err != nil {
		t.Fatal(err)
	}
	g.inherit(t, g.Root)
	for _, n := range AndroidGroupNames {
		dir := filepath.Join(g.Root, n)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		g.inherit(t, dir)
	}
	return g
}

// inherit gives a new cpuset its parent's CPUs and memory nodes (a task
// cannot join a cpuset without them).
func (g *AndroidGroups) inherit(t testing.TB, dir string) {
	if g.Kind != "cpuset" {
		return
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), b, 0)
		}
		if err != nil {
			t.Fatalf("%s of %s: %v", f, dir, err)
		}
	}
}

// Move puts process pid (all its threads) into group, as
// task_profiles.json's JoinCgroup does for a process; "" is the root.
// On the script's hierarchies it applies the group's aggregate profile.
func (g *AndroidGroups) Move(pid int, group string) error {
	if g.profiles != "" {
		p := androidProfiles[group]
		for _, j := range p.joins {
			if err := joinGroup(filepath.Join(j.hierarchy, j.group), pid); err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		// SetTimerSlack; a process that cannot take it keeps its own
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/timerslack_ns", pid), []byte(strconv.Itoa(p.slack)), 0)
		return nil
	}
	dir := g.Root
	if group != "" {
		dir = filepath.Join(g.Root, group)
	}
	return joinGroup(dir, pid)
}

// joinGroup writes pid into dir's cgroup.procs: one write on a descriptor
// opened without O_TRUNC, as libprocessgroup's SetCgroupAction writes
// (one IN_MODIFY).
func joinGroup(dir string, pid int) error {
	f, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	if err == nil {
		_, err = f.Write([]byte(strconv.Itoa(pid)))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("pid %d into %s: %w", pid, dir, err)
	}
	return nil
}

func (g *AndroidGroups) remove(t testing.TB) {
	if g.Root != "" {
		for _, n := range append(AndroidGroupNames, "") {
			dir := filepath.Join(g.Root, n)
			b, _ := os.ReadFile(filepath.Join(dir, "tasks"))
			for _, id := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(g.mount, "tasks"), []byte(id), 0)
			}
			if n != "" {
				if err := os.Remove(dir); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			}
		}
		if err := os.Remove(g.Root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	if err := unix.Unmount(g.mount, unix.MNT_DETACH); err != nil {
		t.Errorf("cleanup: unmount %s: %v", g.mount, err)
	}
	os.Remove(g.mount)
}
