// reset.go: `lanes reset`, removing what a daemon killed with SIGKILL left
// in this network namespace (its qdisc trees and classifiers, device queue
// settings, empty lane cgroups, a cgroup2 mount of its own, its socket file,
// congestion controls registered by map update on kernels before 6.4).
package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/datapath"
)

// evictLaneGroups moves the processes still in inst's lane groups to the
// cgroup that holds the group, and removes the groups: what a killed
// daemon's `lanes run` started goes on running, unmanaged.
func evictLaneGroups(inst string) (done []string, err error) {
	err = withCgroup2(func(root string) error {
		var errs []error
		for _, g := range laneGroupDirs(root, inst) {
			parent := filepath.Dir(g)
			subs, _ := os.ReadDir(g)
			for _, s := range subs {
				if !s.IsDir() {
					continue
				}
				dir := filepath.Join(g, s.Name())
				if err := datapath.MoveProcs(dir, parent); err != nil {
					errs = append(errs, err)
					continue
				}
				if err := datapath.RemoveCgroup(dir, true); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", dir, err))
				}
			}
			if err := unix.Rmdir(g); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", g, err))
				continue
			}
			done = append(done, "removed lane group "+g+" (its processes moved to "+parent+")")
		}
		return errors.Join(errs...)
	})
	return done, err
}

// removeStaleSocket removes a unix socket file no one listens on.
func removeStaleSocket(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false, nil
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return false, nil // someone listens there
	}
	return true, os.Remove(path)
}

// Reset removes the leftovers of this namespace's daemon instance. It
// refuses while a daemon answers on socket or holds the namespace's lock
// (lock.go), whatever socket it was given: a running daemon removes its own
// objects when stopped. stateDir is the state directory ("": StateDir()).
// It returns one line per thing it did.
func Reset(socket, realtimeSocket, stateDir string) ([]string, error) {
	if c, err := client.Dial(socket); err == nil {
		perr := c.Ping()
		c.Close()
		if perr == nil {
			return nil, fmt.Errorf("a lanes daemon is running on %s: stop it (SIGTERM) and it removes everything it installed", socket)
		}
	}
	dirs := stateDirsAt(stateDir)
	inst, err := Instance()
	if err != nil {
		return nil, err
	}
	lock, err := lockInstance(inst)
	if err != nil {
		return nil, fmt.Errorf("%w: stop it (SIGTERM) and it removes everything it installed", err)
	}
	defer lock.release()
	links, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, l := range links {
		if datapath.IsBgIfb(l.Name) { // removed with its interface's tree
			continue
		}
		if err := datapath.Cleanup(l.Name, inst, dirs.datapath); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
			continue
		}
		done = append(done, "checked "+l.Name)
	}
	ccs, err := datapath.RemoveLeftoverCCs(inst)
	errs = append(errs, err)
	probes, err := removeStaleProbeCCs()
	errs = append(errs, err)
	for _, n := range append(ccs, probes...) {
		done = append(done, "unregistered congestion control "+n)
	}
	evicted, err := evictLaneGroups(inst)
	errs = append(errs, err)
	done = append(done, evicted...)
	mnt := filepath.Join("/run/lanes", "cgroup2."+inst)
	if _, err := os.Stat(mnt); err == nil {
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
		if err := os.Remove(mnt); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "removed "+mnt)
		}
	}
	if _, err := os.Stat(filepath.Join(dirs.instances, inst)); err == nil {
		forgetInstance(dirs.instances, inst)
		done = append(done, "forgot instance "+inst)
	}
	for _, s := range []string{socket, realtimeSocket} {
		if removed, err := removeStaleSocket(s); err != nil {
			errs = append(errs, err)
		} else if removed {
			done = append(done, "removed stale socket "+s)
		}
	}
	return done, errors.Join(errs...)
}

// removeStaleProbeCCs unregisters the scratch congestion controls of
// probes (`lanes doctor`, a daemon's start) whose process is gone: named
// capcc.ProbePrefix or ledbat.ProbePrefix and the prober's pid in hex,
// registered by map update (a killed probe's bpf_link died with it).
func removeStaleProbeCCs() ([]string, error) {
	stale := func(name string) bool {
		for _, pre := range []string{capcc.ProbePrefix, ledbat.ProbePrefix} {
			if hex, ok := strings.CutPrefix(name, pre); ok {
				pid, err := strconv.ParseUint(hex, 16, 32)
				return err == nil && unix.Kill(int(pid), 0) == unix.ESRCH
			}
		}
		return false
	}
	left, err := structops.Find(stale)
	if err != nil || len(left) == 0 {
		return nil, err
	}
	var names []string
	for _, l := range left {
		names = append(names, l.Name)
	}
	return structops.Remove(names...)
}
