// named.go: named network namespaces (files under /run/netns), created so
// that iproute2's `ip netns add` run later cannot hide them.
//
// A named namespace is an nsfs bind mount on a file in /run/netns.
// `ip netns add` first makes /run/netns a shared mount point of its own; if
// the directory is not one yet, it bind-mounts the directory on itself. Any
// namespace file mounted in the directory before that is then covered by
// the new mount: its path reaches the new mount's empty file, so it can no
// longer be unmounted, and removing it fails with EBUSY (seen on the lab
// machine: a user's `ip netns add` during a lab run left the run's seven
// namespaces behind, "remove /run/netns/...: device or resource busy").
// NewNamed makes the directory that mount point itself before it mounts
// the first namespace file, so a later `ip netns add` finds it and mounts
// nothing over it.
package nsrun

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named network namespaces are mounted (iproute2's and
// vishvananda/netns's directory).
const NetnsDir = "/run/netns"

var prepareOnce sync.Once
var prepareErr error

// NewNamed creates a network namespace named name under NetnsDir and
// switches the calling thread into it, as netns.NewNamed does (the caller
// locks its OS thread and switches back), after making NetnsDir a shared
// mount point of its own (once per process).
func NewNamed(name string) (netns.NsHandle, error) {
	prepareOnce.Do(func() { prepareErr = prepareNetnsDir(NetnsDir) })
	if prepareErr != nil {
		return netns.None(), fmt.Errorf("prepare %s: %w", NetnsDir, prepareErr)
	}
	return netns.NewNamed(name)
}

// prepareNetnsDir makes dir a shared mount point, bind-mounting it on
// itself if it is not a mount point yet. When namespace files are already
// mounted in a dir that is no mount point (another tool's), the bind would
// cover them (see the file comment): it is left as it is.
func prepareNetnsDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil || !errors.Is(err, unix.EINVAL) {
		return err // EINVAL: not a mount point
	}
	if busy, err := hasMountsBelow(dir); err != nil || busy {
		return err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on itself: %w", dir, err)
	}
	return unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, "")
}

// hasMountsBelow reports whether anything is mounted inside dir (this
// process's mount namespace).
func hasMountsBelow(dir string) (bool, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], real+"/") {
			return true, nil
		}
	}
	return false, sc.Err()
}
