// Package appstate reads which Android apps the user is looking at from
// the process groups ActivityManager keeps them in: the cpusets
// `top-app`, `foreground` (and `foreground_window`), `background`,
// `system-background` and `restricted` under /dev/cpuset (cgroup v1, as libprocessgroup's
// cgroups.json mounts them; task_profiles.json's profiles write a task's
// id into a group's `tasks`, a process's into its `cgroup.procs`).
//
// A uid's state is the highest of its tasks' groups: top-app, else
// foreground, else background (background, system-background, restricted);
// a uid with no task in any group has none. So an app is background only
// when none of its processes is top-app or foreground.
//
// The state changes only by a write into one of the groups' files, so
// the watcher (watch.go) sleeps on inotify for those writes and reads the
// groups again after each: nothing runs while nothing moves.
package appstate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultRoot is where Android mounts the cpuset hierarchy.
const DefaultRoot = "/dev/cpuset"

// State is an app's process state, ordered: a higher one wins for a uid.
type State uint8

const (
	None State = iota
	Background
	Foreground
	TopApp
)

var stateNames = map[State]string{None: "none", Background: "background", Foreground: "foreground", TopApp: "top-app"}

func (s State) String() string { return stateNames[s] }

// ParseState reads a policy's state name.
func ParseState(name string) (State, error) {
	for s, n := range stateNames {
		if n == name && s != None {
			return s, nil
		}
	}
	return None, fmt.Errorf("unknown Android state %q (want top-app, foreground or background)", name)
}

// Groups are the cpusets read and the state each stands for.
var Groups = map[string]State{
	"top-app":           TopApp,
	"foreground":        Foreground,
	"foreground_window": Foreground,
	"background":        Background,
	"system-background": Background,
	"restricted":        Background,
}

// AppUIDStart is Android's first app id (AID_APP_START); a uid's app id is
// the uid modulo the per-user range (AID_USER_OFFSET, 100000).
const (
	AppUIDStart = 10000
	userOffset  = 100000
)

// IsApp says whether uid belongs to an app (any user's), not to the system.
func IsApp(uid uint32) bool { return uid%userOffset >= AppUIDStart }

// Reader reads the groups under Root; Proc is the proc mount ("/proc").
type Reader struct {
	Root string
	Proc string
}

// GroupFile is the file a group lists its members in: `cgroup.procs`, one
// id per process with a thread in the group (cgroup v1 lists a process in
// each group one of its threads is in, so a uid's highest state is the
// same as over `tasks`), its status read once instead of once per thread.
// A thread whose credentials differ from its process's (a raw setresuid
// in one thread) counts as its process's uid.
func GroupFile(dir string) string { return filepath.Join(dir, "cgroup.procs") }

// ErrNoGroups: the root holds none of the groups (not Android's cpusets,
// or not mounted yet).
var ErrNoGroups = errors.New("no Android process group found")

// States reads every group and returns each uid's state (uids in no group
// are absent). A task that exits while it is read is left out.
func (r Reader) States() (map[uint32]State, error) {
	out := map[uint32]State{}
	found := 0
	for g, st := range Groups {
		ids, err := readIDs(GroupFile(filepath.Join(r.Root, g)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("android group %s: %w", g, err)
		}
		found++
		for _, id := range ids {
			uid, ok := r.uidOf(id)
			if ok && st > out[uid] {
				out[uid] = st
			}
		}
	}
	if found == 0 {
		return nil, fmt.Errorf("%w under %s (mount the cpuset hierarchy there, or give its path)", ErrNoGroups, r.Root)
	}
	return out, nil
}

func readIDs(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, f := range bytes.Fields(b) {
		if id, err := strconv.Atoi(string(f)); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// uidOf is a task's real uid (/proc/ID/status; a thread's id works too).
// Not the owner of /proc/ID, which is root for a non-dumpable process.
func (r Reader) uidOf(id int) (uint32, bool) {
	f, err := os.Open(filepath.Join(r.Proc, strconv.Itoa(id), "status"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				return 0, false
			}
			u, err := strconv.ParseUint(fs[0], 10, 32)
			return uint32(u), err == nil
		}
	}
	return 0, false
}
