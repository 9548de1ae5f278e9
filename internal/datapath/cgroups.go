// cgroups.go manages the cgroup v2 directories of the lanes of one instance,
// <CgroupRoot>/lanes.<instance>/<lane>, into which `lanes run` moves a
// process tree. Their cgroup ids are entered in the classifier's cgroup map
// (and sock_ops reads the same map), so everything those processes send
// takes that lane. Open creates them or adopts existing ones (a restart must
// not pull running processes out of their lane); Close moves any process
// left in them back to the root cgroup and removes them; Cleanup removes
// only the empty ones.
//
// Note: the lane cgroups belong to the Host (one per namespace). Hosts of
// the same instance in one process (a reload builds the new host before it
// closes the old one) share them: they are reference-counted within the
// process and removed with the last Close.
package datapath

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

const cgroup2Magic = 0x63677270

// ownCgroupMount is where lanes mounts cgroup2 itself when no mount is
// visible (inside `ip netns exec`, which mounts a fresh sysfs over /sys and
// so hides /sys/fs/cgroup/*). Every mount of cgroup2 shows the same single
// hierarchy, so programs attached and ids read through it are the same.
var ownCgroupMount = "/run/lanes/cgroup2"

// resolveCgroupRoot returns the cgroup v2 mount to use: explicit if given
// (it must be cgroup2), else the first of /sys/fs/cgroup/unified (hybrid
// systems), /sys/fs/cgroup (pure v2), any cgroup2 in /proc/self/mountinfo,
// or a mount of our own.
func resolveCgroupRoot(explicit string) (string, error) {
	if explicit != "" {
		return explicit, checkCgroup2(explicit)
	}
	for _, c := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if checkCgroup2(c) == nil {
			return c, nil
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPEROPTS
			pre, post, ok := strings.Cut(line, " - ")
			if !ok || !strings.HasPrefix(post, "cgroup2 ") {
				continue
			}
			if f := strings.Fields(pre); len(f) >= 5 && f[3] == "/" && checkCgroup2(f[4]) == nil {
				if f[4] == ownCgroupMount {
					holdOwnMount()
				}
				return f[4], nil
			}
		}
	}
	if err := os.MkdirAll(ownCgroupMount, 0o755); err != nil {
		return "", fmt.Errorf("no cgroup v2 mount found and cannot create %s: %w", ownCgroupMount, err)
	}
	if err := unix.Mount("cgroup2", ownCgroupMount, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "", fmt.Errorf("no cgroup v2 mount found and mounting one at %s failed: %w", ownCgroupMount, err)
	}
	holdOwnMount()
	return ownCgroupMount, checkCgroup2(ownCgroupMount)
}

var (
	cgUsersMu sync.Mutex
	cgUsers   = map[string]int{} // lane cgroup base -> open Datapaths using it
)

// acquireLaneCgroups creates or adopts the lane cgroups and counts a user.
func acquireLaneCgroups(root, instance string) (map[lane.Lane]uint64, error) {
	cgUsersMu.Lock()
	defer cgUsersMu.Unlock()
	ids, err := makeLaneCgroups(root, instance)
	if err == nil {
		cgUsers[laneCgroupBase(root, instance)]++
	}
	return ids, err
}

// releaseLaneCgroups drops a user and removes the cgroups with the last one.
func releaseLaneCgroups(root, instance string, evict bool) error {
	cgUsersMu.Lock()
	defer cgUsersMu.Unlock()
	base := laneCgroupBase(root, instance)
	if cgUsers[base]--; cgUsers[base] > 0 {
		return nil
	}
	delete(cgUsers, base)
	return removeLaneCgroups(root, instance, evict)
}

var (
	ownMountMu    sync.Mutex
	ownMountUsers int // callers of resolveCgroupRoot holding ownCgroupMount
)

// releaseCgroupRoot is the counterpart of every resolveCgroupRoot: when the
// last user of lanes' own mount goes, it is unmounted and its directory
// removed. The mount lives in this process's mount namespace (`ip netns
// exec` gives each command one), but the directory is on the host's /run
// and would outlive the process.
func releaseCgroupRoot(root string) {
	if root != ownCgroupMount {
		return
	}
	ownMountMu.Lock()
	defer ownMountMu.Unlock()
	if ownMountUsers--; ownMountUsers > 0 {
		return
	}
	ownMountUsers = 0
	_ = unix.Unmount(ownCgroupMount, unix.MNT_DETACH)
	_ = os.Remove(ownCgroupMount)
}

func holdOwnMount() {
	ownMountMu.Lock()
	ownMountUsers++
	ownMountMu.Unlock()
}

// cleanupLaneCgroups removes a crashed run's empty lane cgroups, unless a
// Datapath of this process uses them.
func cleanupLaneCgroups(root, instance string) error {
	cgUsersMu.Lock()
	defer cgUsersMu.Unlock()
	if cgUsers[laneCgroupBase(root, instance)] > 0 {
		return nil
	}
	return removeLaneCgroups(root, instance, false)
}

func laneCgroupBase(root, instance string) string {
	return filepath.Join(root, "lanes."+instance)
}

func checkCgroup2(root string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err != nil {
		return fmt.Errorf("cgroup v2 root %s: %w", root, err)
	}
	if fs.Type != cgroup2Magic {
		return fmt.Errorf("%s is not a cgroup v2 mount", root)
	}
	return nil
}

// cgroupID is the cgroup v2 id of dir: its inode number in cgroupfs, the
// value bpf_skb_cgroup_id and kernfs_node.id report.
func cgroupID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// makeLaneCgroups creates (or adopts) the lane directories and returns their ids.
func makeLaneCgroups(root, instance string) (map[lane.Lane]uint64, error) {
	base := laneCgroupBase(root, instance)
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", base, err)
	}
	ids := map[lane.Lane]uint64{}
	for _, l := range lane.All {
		dir := filepath.Join(base, l.String())
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		id, err := cgroupID(dir)
		if err != nil {
			return nil, err
		}
		ids[l] = id
	}
	return ids, nil
}

// removeLaneCgroups removes the lane directories; with evict it first moves
// their processes to the root cgroup, else it leaves busy ones in place.
func removeLaneCgroups(root, instance string, evict bool) error {
	base := laneCgroupBase(root, instance)
	if _, err := os.Stat(base); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	busy := false
	for _, l := range lane.All {
		dir := filepath.Join(base, l.String())
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if evict {
			if err := MoveProcs(dir, root); err != nil {
				errs = append(errs, err)
			}
		}
		if err := RemoveCgroup(dir, evict); err != nil {
			if errors.Is(err, unix.EBUSY) && !evict {
				busy = true
				continue
			}
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
		}
	}
	if !busy {
		if err := unix.Rmdir(base); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove %s: %w", base, err))
		}
	}
	return errors.Join(errs...)
}

// RemoveCgroup removes a cgroup directory. A process that was just killed
// stays in its cgroup until it has finished exiting, and rmdir says EBUSY
// meanwhile: with wait (its processes were moved out), wait for such
// stragglers up to cgroupExitWait; an error names the processes and the
// child groups left in it.
func RemoveCgroup(dir string, wait bool) error {
	deadline := time.Now().Add(cgroupExitWait)
	for {
		err := unix.Rmdir(dir)
		if err == nil || !errors.Is(err, unix.EBUSY) || !wait {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%s)", err, cgroupContents(dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupExitWait bounds RemoveCgroup's wait for exiting processes.
const cgroupExitWait = time.Second

// cgroupContents says what keeps cgroup dir busy: its processes and its
// child groups.
func cgroupContents(dir string) string {
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var children []string
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				children = append(children, e.Name())
			}
		}
	}
	return fmt.Sprintf("processes in it: %q, child groups: %q", strings.Fields(string(procs)), children)
}

// MoveProcs moves every process of cgroup dir into cgroup dst (a process
// that exits meanwhile is not an error; a cgroup that is gone has none).
func MoveProcs(dir, dst string) error {
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var errs []error
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pid := strings.TrimSpace(sc.Text())
		if pid == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("move pid %s from %s to %s: %w", pid, dir, dst, err))
		}
	}
	return errors.Join(errs...)
}

// dropLaneCgroupUser drops a user without removing anything, even if it was
// the last: the lane cgroups and their processes stay for a successor.
func dropLaneCgroupUser(root, instance string) {
	cgUsersMu.Lock()
	defer cgUsersMu.Unlock()
	base := laneCgroupBase(root, instance)
	if cgUsers[base]--; cgUsers[base] <= 0 {
		delete(cgUsers, base)
	}
}
