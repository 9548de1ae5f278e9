// reset.go: `lanes reset`, removing what a daemon killed with SIGKILL left
// in this network namespace (its qdisc trees and classifiers, device queue
// settings, empty lane cgroups, a cgroup2 mount of its own, its socket file).
package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/datapath"
)

// Reset removes the leftovers of this namespace's daemon instance. It
// refuses while a daemon answers on socket: a running daemon removes its
// own objects when stopped. It returns one line per thing it did.
func Reset(socket string) ([]string, error) {
	if c, err := api.Dial(socket); err == nil {
		perr := c.Ping()
		c.Close()
		if perr == nil {
			return nil, fmt.Errorf("a lanes daemon is running on %s: stop it (SIGTERM) and it removes everything it installed", socket)
		}
	}
	useStateDir()
	inst, err := Instance()
	if err != nil {
		return nil, err
	}
	links, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, l := range links {
		if err := datapath.Cleanup(l.Name, inst); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
			continue
		}
		done = append(done, "checked "+l.Name)
	}
	mnt := filepath.Join("/run/lanes", "cgroup2."+inst)
	if _, err := os.Stat(mnt); err == nil {
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
		if err := os.Remove(mnt); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "removed "+mnt)
		}
	}
	if _, err := os.Stat(filepath.Join(instancesDir(), inst)); err == nil {
		forgetInstance(inst)
		done = append(done, "forgot instance "+inst)
	}
	if _, err := os.Stat(socket); err == nil {
		if err := os.Remove(socket); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, "removed stale socket "+socket)
		}
	}
	return done, errors.Join(errs...)
}
