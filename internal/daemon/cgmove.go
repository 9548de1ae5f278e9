// cgmove.go: putting a process in a lane without taking it out of its place
// in the host's cgroup hierarchy (`lanes move`, `lanes run`, the API's
// move-pid, the task engine's exe/comm lane rules).
//
// A process in a systemd scope or service, or any cgroup other than the
// root, stays inside it: the daemon creates a lane group nested in the
// process's own cgroup, <its cgroup>/lanes.<instance>.<lane>, enters that
// group's id in the classifier's cgroup map, and moves the process there.
// So `systemctl stop`, cgroup.kill, resource limits and accounting of the
// unit still reach it. Only processes of the root cgroup go to the instance's
// own groups (/lanes.<instance>/<lane>), as before.
//
//   - stop: every nested group's processes go back to its parent — where they
//     came from — and the group is removed (waiting up to a second for a
//     process killed just before, which leaves only once it has exited);
//     the instance's own groups return theirs to the root cgroup, where
//     they came from.
//   - sweep (with the registration sweep, every 2 s): empty nested groups are
//     removed with their map entries.
//   - start: nested groups a crashed run left are adopted (their ids entered
//     again), found by walking the hierarchy for this instance's names.
//
// A name proves nothing: a user whose cgroup is delegated to it (systemd's
// Delegate=, user@UID.service) can create lanes.<instance>.realtime
// itself. The daemon marks each group it creates with a trusted xattr
// (trusted.lanes = "<instance>.<lane>"; only CAP_SYS_ADMIN sets trusted.*)
// and uses or adopts a group only if root owns it and the mark names it
// (cgroup v2 has no rename: a mark stays with the name it was made for).
//
// Nested groups are bounded (each holds an entry of the classifier's cgroup
// map): maxNested in all, maxNestedPerUID in the cgroups of one non-root
// owner, and groups in non-root cgroups leave rootNestedReserve for
// root's. A user's 4,200 delegated cgroups filled the map with 4,092
// groups in 19.5 s; then root's moves and unregisters failed.
//
// Note: creating a child of a unit's cgroup writes into a subtree systemd
// manages; systemd removes it with the unit (recursively) and does not
// enable controllers in a cgroup that has processes anyway.
package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// laneMover moves processes into lanes: their cgroup (a lane group nested
// in theirs, or the instance's) and their open sockets (livemove.go). It
// keeps no state of its own: it records in the lane groups and the moves,
// and puts their entries in the kernel state.
type laneMover struct {
	log     *slog.Logger
	env     *env
	cgroups *cgroupMount
	kernel  *kernelState
	groups  *laneGroups
	moves   *moves
	regs    *registrations
}

// movePID puts pid in lane l with its open sockets (livemove.go); its
// future children follow (the task engine's hook, for rule r). Each move is
// logged with its rule: a reload's new rules move running processes too.
func (mv *laneMover) movePID(pid int, l lane.Lane, r config.TaskRule) error {
	by := ruleMover(r)
	m, err := mv.moveProcess(pid, l, by, true)
	if err != nil {
		return err
	}
	mv.log.Info("process moved", "pid", pid, "lane", l, "by", by, "tcp", m.TCP, "udp", m.UDP)
	return nil
}

// ruleMover names the rule that moves a process as people wrote it: "rule
// wget-bg (exe)" for a lane rule (ProcessLaneRules names it lane.NAME),
// "task rule NAME" for a task rule with a lane.
func ruleMover(r config.TaskRule) string {
	name, ok := strings.CutPrefix(r.Name, "lane.")
	if !ok {
		return "task rule " + r.Name
	}
	var by []string
	if r.Exe != "" {
		by = append(by, "exe")
	}
	if r.Comm != "" {
		by = append(by, "comm")
	}
	return fmt.Sprintf("rule %s (%s)", name, strings.Join(by, ", "))
}

// moveProcess puts pid in lane l, saying what moved; by is what asked
// ("lanes move", "lanes run", a rule); byRoot: root (or the daemon) asked
// for it. A failure to find the open sockets
// is logged: the process has moved, its new sockets follow.
func (mv *laneMover) moveProcess(pid int, l lane.Lane, by string, byRoot bool) (api.Moved, error) {
	if err := mv.moveCgroup(pid, l); err != nil {
		return api.Moved{}, err
	}
	mv.kernel.mu.Lock()
	mv.moves.rememberMover(pid, movedSock{lane: l, by: by})
	mv.kernel.mu.Unlock()
	m := api.Moved{Processes: 1}
	var err error
	if m.TCP, m.UDP, err = mv.moveSockets([]int{pid}, l, by, byRoot); err != nil {
		mv.log.Warn("moved process: open sockets not found; only its new ones follow", "pid", pid, "lane", l, "err", err)
	}
	return m, nil
}

// moveCgroup puts pid in lane l's cgroup (nested in its own, or the instance's).
func (mv *laneMover) moveCgroup(pid int, l lane.Lane) error {
	cur, err := procCgroup(pid)
	if err != nil {
		return err // it names the process
	}
	home := mv.groups.home(cur)
	for attempt := 1; ; attempt++ {
		var dir string
		if home == "/" {
			if dir, err = mv.kernel.laneCgroup(l); err != nil {
				return err
			}
		} else if dir, err = mv.nestedGroup(home, l); err != nil {
			return err
		}
		err = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		// the sweep removes an empty lane group: between nestedGroup and
		// the write it can take this one (ENOENT, or ENODEV while the
		// group dies); created again, the write fills it
		if home != "/" && attempt < 3 && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV)) {
			continue
		}
		if err != nil {
			return fmt.Errorf("move pid %d to %s: %w", pid, l, err)
		}
		return nil
	}
}

// Bounds of the nested lane groups (the cgroup map's reserve, capacity.go).
const (
	maxNested         = reservedCgroups
	maxNestedPerUID   = 16
	rootNestedReserve = 64
)

// groupMark is the xattr naming a lane group the daemon created.
const groupMark = "trusted.lanes"

// nestedGroup creates (or finds) lane l's group inside host cgroup home and
// enters its id in the datapath's cgroup map; it returns the directory.
func (mv *laneMover) nestedGroup(home string, l lane.Lane) (string, error) {
	rel := filepath.Join(home, mv.groups.name(l))
	dir := filepath.Join(mv.cgroups.root, rel)
	owner, err := cgroupOwner(filepath.Join(mv.cgroups.root, home))
	if err != nil {
		return "", fmt.Errorf("lane group in %s: %w", home, err)
	}
	mv.kernel.mu.Lock()
	defer mv.kernel.mu.Unlock()
	if mv.kernel.host == nil {
		return "", errors.New("no datapath installed")
	}
	g, known := mv.groups.get(rel)
	if !known {
		if err := mv.groups.room(owner); err != nil {
			return "", fmt.Errorf("lane group in %s: %w", home, err)
		}
	}
	id, err := mv.groups.make(dir, l)
	if err != nil {
		return "", fmt.Errorf("lane group in %s: %w", home, err)
	}
	if known && g.id == id {
		return dir, nil
	}
	mv.groups.set(rel, nestedGroup{lane: l, id: id, owner: owner})
	if err := mv.kernel.applyLocked(mv.kernel.desiredFor(mv.kernel.pol), false); err != nil {
		return "", fmt.Errorf("lane group %s: %w", rel, err)
	}
	return dir, nil
}

// cgroupOwner is the uid owning a cgroup directory (its delegate, if any).
func cgroupOwner(dir string) (uint32, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, err
	}
	return st.Uid, nil
}

// nestedGroup is one lane group inside a host cgroup.
type nestedGroup struct {
	lane  lane.Lane
	id    uint64
	owner uint32 // the uid owning the host cgroup it is in
}

// adoptNested finds the nested groups a previous run of this instance left
// and takes them over.
func (mv *laneMover) adoptNested() {
	found := mv.groups.find()
	mv.kernel.mu.Lock()
	defer mv.kernel.mu.Unlock()
	if len(found) == 0 {
		return
	}
	for rel, l := range found {
		id, err := mv.cgroups.id(rel)
		if err != nil {
			continue
		}
		owner, _ := cgroupOwner(filepath.Join(mv.cgroups.root, filepath.Dir(rel)))
		mv.groups.set(rel, nestedGroup{lane: l, id: id, owner: owner})
	}
	if mv.kernel.host != nil {
		if err := mv.kernel.applyLocked(mv.kernel.desiredFor(mv.kernel.pol), false); err != nil {
			mv.log.Warn("adopting lane groups of a previous run", "err", err)
		}
	}
	mv.log.Info("adopted lane groups of a previous run", "groups", len(found))
}

// sweepNestedLocked removes empty nested groups and their map entries (kernel.mu held).
func (mv *laneMover) sweepNestedLocked() {
	if mv.groups.sweepEmpty() && mv.kernel.host != nil {
		if err := mv.kernel.applyLocked(mv.kernel.desiredFor(mv.kernel.pol), false); err != nil {
			mv.log.Warn("lane group sweep: datapath", "err", err)
		}
	}
}

// restoreNested gives every nested group's processes back to the host
// cgroup they came from and removes the groups (daemon stop).
func (mv *laneMover) restoreNested() error {
	mv.kernel.mu.Lock()
	defer mv.kernel.mu.Unlock()
	return mv.groups.restore()
}

// populated reads cgroup.events: does the group or a child hold a process?
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), "populated 1")
}

// noProcessError: no process has this pid (still an fs.ErrNotExist, which
// the task engine takes for a process gone between its event and the move).
type noProcessError int

func (e noProcessError) Error() string {
	return fmt.Sprintf("no process %d (it exited, or never ran in this daemon's pid namespace)", int(e))
}

func (noProcessError) Is(target error) bool { return target == fs.ErrNotExist }

// procCgroup is the cgroup v2 path of a process ("0::/a/b" in /proc/PID/cgroup).
func procCgroup(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return "", noProcessError(pid)
	}
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Clean(p), nil
		}
	}
	return "", fmt.Errorf("process %d has no cgroup v2 path", pid)
}
