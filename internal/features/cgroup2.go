// cgroup2.go: where the cgroup v2 hierarchy is, and a private mount of it
// where none is visible. `ip netns exec` gives its command a fresh /sys
// without the cgroup mounts below it, yet the kernel's (single, global) v2
// hierarchy is still there to mount: the daemon mounts its own, and the
// probes that need it do the same for their run.
package features

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CgroupV2Mount returns where the unified cgroup hierarchy is mounted, or "".
func CgroupV2Mount() string {
	fh, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	best := ""
	for sc.Scan() {
		// id parent major:minor root mountpoint opts ... - fstype source superopts
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				mp := fields[4]
				if best == "" || len(mp) < len(best) {
					best = mp
				}
			}
		}
	}
	return best
}

// CgroupV2Kernel reports whether the kernel knows the cgroup2 file system
// (/proc/filesystems), mounted here or not.
func CgroupV2Kernel() bool {
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return false
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if f := bytes.Fields(l); len(f) > 0 && string(f[len(f)-1]) == "cgroup2" {
			return true
		}
	}
	return false
}

// MountCgroup2 mounts the v2 hierarchy at dir (created); release unmounts
// it and removes dir.
func MountCgroup2(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2 mount point: %w", err)
	}
	if err := unix.Mount("cgroup2", dir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("no cgroup v2 mounted and mounting one at %s failed: %w", dir, err)
	}
	return func() { _ = unix.Unmount(dir, unix.MNT_DETACH); _ = os.Remove(dir) }, nil
}

// WithCgroup2 runs fn with a cgroup v2 mount: the one mounted, or one of
// its own under /run/lanes for fn alone.
func WithCgroup2(fn func(root string) error) error {
	if mp := CgroupV2Mount(); mp != "" {
		return fn(mp)
	}
	dir := filepath.Join("/run/lanes", "cgroup2.probe-"+strconv.Itoa(os.Getpid()))
	release, err := MountCgroup2(dir)
	if err != nil {
		return err
	}
	defer release()
	return fn(dir)
}
