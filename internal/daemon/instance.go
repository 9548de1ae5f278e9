// instance.go: the name of this daemon's kernel objects and files, and the
// sweep of what daemons of namespaces that no longer exist left behind.
//
// A name must never be reused by a later namespace, or that namespace's
// daemon would adopt a dead one's cgroups and state. Names come from the
// namespace's cookie (a 64-bit counter the kernel never reuses while it
// runs): "c<cookie base 36>", read by SO_NETNS_COOKIE (5.14+) or, before,
// through a cgroup/sock_create program (internal/bpf/netnscookie, 5.7+).
// Only where neither works (no cgroup v2 mount, no BPF) the namespace's
// inode is the fallback ("n<inode base 36>"), which the kernel does reuse.
//
// Each running daemon records its instance in <StateDir>/instances/<name>
// (netns inode, cookie, boot id) and removes the record on a clean stop.
// At start, a record whose namespace is gone — another boot, or no process
// and no /run/netns mount has that namespace any more — is swept: its
// empty lane cgroups, lane groups nested in host cgroups, cgroup2 mount
// point, datapath and coop state files, congestion controls registered by
// map update (kernels before 6.4), and the record.
package daemon

import (
	"encoding/json"
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

	"github.com/lanes-net/lanes/internal/bpf/netnscookie"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/rootpath"
)

// Instance names this daemon's kernel objects: one per network namespace.
func Instance() (string, error) {
	c, cerr := netnsCookie()
	if cerr == nil {
		return "c" + strconv.FormatUint(c, 36), nil
	}
	slog.Warn("instance named after the network namespace's inode, which a later namespace may reuse", "err", cerr)
	ino, err := netnsInode()
	if err != nil {
		return "", err
	}
	return "n" + strconv.FormatUint(ino, 36), nil
}

// netnsCookie is the calling thread's namespace cookie: SO_NETNS_COOKIE,
// or before 5.14 the BPF helper's.
func netnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err == nil {
		return c, nil
	}
	berr := withCgroup2(func(root string) (err error) {
		c, err = netnscookie.Read(root)
		return err
	})
	if berr != nil {
		return 0, fmt.Errorf("SO_NETNS_COOKIE: %w; %w", err, berr)
	}
	return c, nil
}

func netnsInode() (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("network namespace: %w", err)
	}
	return st.Ino, nil
}

// instanceRecord is what a running daemon writes about its namespace.
type instanceRecord struct {
	NetnsInode uint64 `json:"netns_inode"`
	Cookie     uint64 `json:"netns_cookie,omitempty"`
	BootID     string `json:"boot_id"`
	PID        int    `json:"pid"`
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// recordInstance writes this daemon's record into dir.
func recordInstance(dir, inst string) error {
	ino, err := netnsInode()
	if err != nil {
		return err
	}
	c, _ := netnsCookie()
	b, _ := json.Marshal(instanceRecord{NetnsInode: ino, Cookie: c, BootID: bootID(), PID: os.Getpid()})
	if err := rootpath.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return rootpath.WriteFile(filepath.Join(dir, inst), b, 0o644)
}

func forgetInstance(dir, inst string) { _ = os.Remove(filepath.Join(dir, inst)) }

// liveNetns is the set of network namespace inodes some process or a
// /run/netns mount holds.
func liveNetns() map[uint64]bool {
	live := map[uint64]bool{}
	add := func(p string) {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			live[st.Ino] = true
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			add(filepath.Join("/proc", e.Name(), "ns/net"))
		}
	}
	named, _ := os.ReadDir("/run/netns")
	for _, e := range named {
		add(filepath.Join("/run/netns", e.Name()))
	}
	return live
}

// sweepGoneInstances removes what daemons of vanished namespaces left;
// cgroupRoot is the cgroup v2 mount. It returns the instances swept.
func sweepGoneInstances(dirs stateDirs, self, cgroupRoot string, log *slog.Logger) []string {
	es, err := os.ReadDir(dirs.instances)
	if err != nil {
		return nil
	}
	live, boot := liveNetns(), bootID()
	var swept []string
	for _, e := range es {
		inst := e.Name()
		if inst == self {
			continue
		}
		b, err := rootpath.ReadFile(filepath.Join(dirs.instances, inst), 4096)
		var rec instanceRecord
		if err != nil || json.Unmarshal(b, &rec) != nil {
			continue
		}
		if rec.BootID == boot && live[rec.NetnsInode] {
			continue // its namespace may still be there (an inode can be reused: keep, never sweep wrongly)
		}
		if _, err := datapath.RemoveLeftoverCCs(inst, rec.Cookie, rec.NetnsInode); err != nil {
			log.Warn("congestion controls of a vanished namespace's daemon: some remain", "instance", inst, "err", err)
		}
		if err := sweepInstance(dirs, inst, cgroupRoot); err != nil {
			log.Warn("leftovers of a vanished namespace's daemon: some remain", "instance", inst, "err", err)
			continue
		}
		forgetInstance(dirs.instances, inst)
		swept = append(swept, inst)
	}
	return swept
}

// sweepInstance removes one dead instance's files and empty cgroups.
func sweepInstance(dirs stateDirs, inst, cgroupRoot string) error {
	var errs []error
	for _, pat := range []string{
		filepath.Join(dirs.datapath, inst+".*.json"),
		filepath.Join(dirs.coop, inst+".*.json"),
	} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(RunDir, inst+".lock")); err == nil {
		// a killed daemon's lock file: nobody holds it once its namespace
		// is gone; taking it first keeps a live holder's
		if l, err := lockInstance(inst); err == nil {
			l.release()
		} else {
			errs = append(errs, err)
		}
	}
	mnt := filepath.Join("/run/lanes", "cgroup2."+inst)
	if _, err := os.Stat(mnt); err == nil {
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
		if err := os.Remove(mnt); err != nil {
			errs = append(errs, err)
		}
	}
	if cgroupRoot != "" {
		errs = append(errs, removeEmptyLaneGroups(cgroupRoot, inst))
	}
	return errors.Join(errs...)
}

// laneGroupDirs are inst's lane groups under the cgroup v2 root: its own
// (lanes.<inst>) and those nested in host cgroups (lanes.<inst>.*).
func laneGroupDirs(root, inst string) []string {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() {
			return nil
		}
		if n := e.Name(); n == "lanes."+inst || strings.HasPrefix(n, "lanes."+inst+".") {
			dirs = append(dirs, p)
			return fs.SkipDir
		}
		return nil
	})
	return dirs
}

// removeEmptyLaneGroups removes an instance's lane cgroups (its own and
// those nested in host cgroups) that hold no process; a directory of that
// name a user made in a cgroup delegated to it is the user's (cgmove.go).
func removeEmptyLaneGroups(root, inst string) error {
	var errs []error
	for _, d := range laneGroupDirs(root, inst) {
		if owner, err := cgroupOwner(d); err != nil || owner != 0 {
			continue
		}
		subs, _ := os.ReadDir(d)
		for _, s := range subs {
			if s.IsDir() {
				if err := unix.Rmdir(filepath.Join(d, s.Name())); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", filepath.Join(d, s.Name()), err))
				}
			}
		}
		if err := unix.Rmdir(d); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
