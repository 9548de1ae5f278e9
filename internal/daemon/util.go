// util.go: small helpers of the daemon: the cgroup v2 mount it works in, and
// /proc text parsing.
package daemon

import (
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/lanes-net/lanes/internal/features"
)

// cgroupMount is the cgroup v2 hierarchy as this daemon sees it.
type cgroupMount struct {
	root    string
	unmount func() // set when the daemon mounted it itself: unmounts it on stop
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
	release, err := features.MountCgroup2(dir)
	if err != nil {
		return nil, err
	}
	return &cgroupMount{root: dir, unmount: release}, nil
}

// withCgroup2 runs fn with a cgroup v2 mount: the one mounted, or one of
// its own for fn alone (under `ip netns exec`, whose new /sys hides the
// host's), before the instance that names the daemon's own mount is known.
func withCgroup2(fn func(root string) error) error { return features.WithCgroup2(fn) }

func (c *cgroupMount) release() {
	if c.unmount != nil {
		c.unmount()
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
