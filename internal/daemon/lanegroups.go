// lanegroups.go: the lane groups nested in host cgroups (laneGroups):
// their names, marks and bounds, found on the cgroup hierarchy, and the
// record of those the daemon made. The daemon enters their ids in the
// datapath and moves processes into them (cgmove.go). laneGroups owns its
// lock, taken after the daemon's, and never calls back into the daemon.
package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
)

// laneGroups are this instance's lane groups nested in host cgroups.
type laneGroups struct {
	instance string
	mount    *cgroupMount
	sweep    sweepKicker

	mu     sync.Mutex
	groups map[string]nestedGroup // by path under the mount
}

func newLaneGroups(instance string, mount *cgroupMount, sweep sweepKicker) *laneGroups {
	return &laneGroups{instance: instance, mount: mount, sweep: sweep, groups: map[string]nestedGroup{}}
}

// get is the group at rel, if recorded.
func (g *laneGroups) get(rel string) (nestedGroup, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.groups[rel]
	return n, ok
}

// set records the group at rel.
func (g *laneGroups) set(rel string, n nestedGroup) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups[rel] = n
	g.sweep.kickSweep()
}

// any reports whether there is a group to sweep.
func (g *laneGroups) any() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.groups) > 0
}

// all is a copy of the record, by path.
func (g *laneGroups) all() map[string]nestedGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]nestedGroup, len(g.groups))
	for rel, n := range g.groups {
		out[rel] = n
	}
	return out
}

// sweepEmpty removes the empty groups and their records; it reports
// whether it removed any.
func (g *laneGroups) sweepEmpty() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.groups)
	for rel := range g.groups {
		dir := filepath.Join(g.mount.root, rel)
		if populated(dir) {
			continue
		}
		if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			continue // a process moved in meanwhile
		}
		delete(g.groups, rel)
	}
	return len(g.groups) != n
}

// restore gives every group's processes (those recorded and those found)
// back to the host cgroup they came from and removes the groups.
func (g *laneGroups) restore() error {
	found := g.find()
	g.mu.Lock()
	defer g.mu.Unlock()
	for rel, l := range found {
		if _, ok := g.groups[rel]; !ok {
			g.groups[rel] = nestedGroup{lane: l}
			g.sweep.kickSweep()
		}
	}
	var errs []error
	for rel := range g.groups {
		dir := filepath.Join(g.mount.root, rel)
		if err := datapath.MoveProcs(dir, filepath.Dir(dir)); err != nil {
			errs = append(errs, err)
		}
		// a process killed just before (a scope stopped) leaves its group
		// only once it has exited: on 5.10 in qemu the group was still busy
		// when the daemon stopped right after a scope kill
		if err := datapath.RemoveCgroup(dir, true); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
			continue
		}
		delete(g.groups, rel) // its map entry goes with the stop's diff to nothing
	}
	return errors.Join(errs...)
}

// name is the name of a lane group nested in a host cgroup.
func (g *laneGroups) name(l lane.Lane) string { return "lanes." + g.instance + "." + l.String() }

// home is the host cgroup a process in cgroup cur belongs to: cur
// itself, or the parent of the lane group it is in.
func (g *laneGroups) home(cur string) string {
	if cur == "/lanes."+g.instance || strings.HasPrefix(cur, "/lanes."+g.instance+"/") {
		return "/"
	}
	if strings.HasPrefix(filepath.Base(cur), "lanes."+g.instance+".") {
		return filepath.Dir(cur)
	}
	return cur
}

// make creates lane l's group at dir, marked as the daemon's, or
// finds it if the daemon made it; it returns the group's id (the kernel
// state's lock held, so that no other move sees a group between its
// creation and its mark).
func (g *laneGroups) make(dir string, l lane.Lane) (uint64, error) {
	err := os.Mkdir(dir, 0o755)
	if err == nil {
		if err := unix.Setxattr(dir, groupMark, []byte(g.mark(l)), 0); err != nil {
			_ = unix.Rmdir(dir)
			return 0, fmt.Errorf("mark %s as a lane group: %w", dir, err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return 0, err
	} else if !g.own(dir, l) && !g.remakeUnmarked(dir, l) {
		return 0, fmt.Errorf("%s exists and is not a %s group lanes made (remove it)", dir, l)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// remakeUnmarked takes the place of an empty, root-owned group of that
// name without a mark (an earlier version's: only root makes a root-owned
// directory in a delegated cgroup): removed and made again, marked.
func (g *laneGroups) remakeUnmarked(dir string, l lane.Lane) bool {
	if owner, err := cgroupOwner(dir); err != nil || owner != 0 || populated(dir) || unix.Rmdir(dir) != nil {
		return false
	}
	if os.Mkdir(dir, 0o755) != nil {
		return false
	}
	if unix.Setxattr(dir, groupMark, []byte(g.mark(l)), 0) != nil {
		_ = unix.Rmdir(dir)
		return false
	}
	return true
}

// room refuses a new nested group when the bounds are reached
// for a group in a cgroup owner owns.
func (g *laneGroups) room(owner uint32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	all, users, mine := len(g.groups), 0, 0
	for _, n := range g.groups {
		if n.owner != 0 {
			users++
		}
		if n.owner == owner {
			mine++
		}
	}
	switch {
	case all >= maxNested:
		return fmt.Errorf("%d lane groups nested in host cgroups, the most the daemon keeps; "+
			"move processes back or stop the ones in lanes", all)
	case owner != 0 && mine >= maxNestedPerUID:
		return fmt.Errorf("uid %d's cgroups hold %d lane groups, the most one user may have", owner, mine)
	case owner != 0 && users >= maxNested-rootNestedReserve:
		return fmt.Errorf("users' cgroups hold %d lane groups; the rest is kept for root's", users)
	}
	return nil
}

// groupMark is the mark of this instance's lane l group.
func (g *laneGroups) mark(l lane.Lane) string { return g.instance + "." + l.String() }

// own: did the daemon create dir as lane l's group? Root owns it and
// its mark names this instance and lane.
func (g *laneGroups) own(dir string, l lane.Lane) bool {
	if owner, err := cgroupOwner(dir); err != nil || owner != 0 {
		return false
	}
	buf := make([]byte, 256)
	n, err := unix.Getxattr(dir, groupMark, buf)
	return err == nil && string(buf[:n]) == g.mark(l)
}

// find walks the hierarchy for this instance's nested lane groups:
// those the daemon made (own), never a directory of the same name a
// user made.
func (g *laneGroups) find() map[string]lane.Lane {
	out := map[string]lane.Lane{}
	prefix := "lanes." + g.instance + "."
	_ = filepath.WalkDir(g.mount.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		name := e.Name()
		if name == "lanes."+g.instance {
			return fs.SkipDir // the instance's own groups
		}
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			if l, err := lane.Parse(rest); err == nil && g.own(p, l) {
				rel, _ := filepath.Rel(g.mount.root, p)
				out["/"+rel] = l
			}
			return fs.SkipDir
		}
		return nil
	})
	return out
}
