// util.go: small helpers of the daemon: the cgroup v2 mount it works in, and
// /proc text parsing.
package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/features"
)

// cgroupMount is the cgroup v2 hierarchy as this daemon sees it.
type cgroupMount struct {
	root    string
	mounted bool // we mounted it ourselves and unmount it on stop
}

// findOrMountCgroup2 finds the cgroup v2 mount. `ip netns exec` gives its
// command a fresh /sys without the cgroup mounts below it; then the daemon
// mounts the (same, global) v2 hierarchy at a private directory of its own.
// That mount lives in the daemon's mount namespace only.
func findOrMountCgroup2(instance string) (*cgroupMount, error) {
	if mp := features.CgroupV2Mount(); mp != "" {
		return &cgroupMount{root: mp}, nil
	}
	dir := filepath.Join("/run/lanes", "cgroup2."+instance)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup v2 mount point: %w", err)
	}
	if err := unix.Mount("cgroup2", dir, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("no cgroup v2 mounted and mounting one at %s failed: %w", dir, err)
	}
	return &cgroupMount{root: dir, mounted: true}, nil
}

// withCgroup2 runs fn with a cgroup v2 mount: the one mounted, or one of
// its own for fn alone (under `ip netns exec`, whose new /sys hides the
// host's), before the instance that names the daemon's own mount is known.
func withCgroup2(fn func(root string) error) error {
	if mp := features.CgroupV2Mount(); mp != "" {
		return fn(mp)
	}
	cg, err := findOrMountCgroup2("probe-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		return err
	}
	defer cg.release()
	return fn(cg.root)
}

func (c *cgroupMount) release() {
	if c.mounted {
		_ = unix.Unmount(c.root, unix.MNT_DETACH)
		_ = os.Remove(c.root)
	}
}

// id returns the id of a cgroup given relative to the v2 root
// ("/system.slice/x.service"): the directory's inode number, the value
// bpf_skb_cgroup_id() reports.
func (c *cgroupMount) id(rel string) (uint64, error) {
	var st syscall.Stat_t
	p := filepath.Join(c.root, filepath.Clean("/"+rel))
	if err := syscall.Stat(p, &st); err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", p, err)
	}
	return st.Ino, nil
}
