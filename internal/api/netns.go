// netns.go: which network namespace a daemon manages, and the client-side
// check that refuses to act on a daemon managing another one (a unix socket
// path is shared across network namespaces, so a client in one namespace can
// reach a daemon that manages a different one).
package api

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Netns names a network namespace.
type Netns struct {
	Inode uint64 `json:"inode"`          // the nsfs inode, as in `ip netns identify`, net:[INODE]
	Name  string `json:"name,omitempty"` // its name under /run/netns, if it has one
}

func (n Netns) String() string {
	if n.Name != "" {
		return fmt.Sprintf("%s (net:[%d])", n.Name, n.Inode)
	}
	return fmt.Sprintf("net:[%d]", n.Inode)
}

// CurrentNetns is the calling thread's network namespace.
func CurrentNetns() (Netns, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return Netns{}, fmt.Errorf("network namespace: %w", err)
	}
	n := Netns{Inode: st.Ino}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		var s syscall.Stat_t
		if syscall.Stat(filepath.Join("/run/netns", e.Name()), &s) == nil && s.Ino == st.Ino && s.Dev == st.Dev {
			n.Name = e.Name()
			break
		}
	}
	return n, nil
}

// CheckSameNetns refuses a daemon that manages another network namespace
// than the caller's: its lanes, cgroups and flows would not be the caller's.
func CheckSameNetns(st *Status) error {
	me, err := CurrentNetns()
	if err != nil {
		return err
	}
	if st.Netns.Inode == 0 || st.Netns.Inode == me.Inode {
		return nil
	}
	return fmt.Errorf("the daemon on this socket manages network namespace %s, but this command runs in %s: "+
		"run it inside the daemon's namespace (e.g. ip netns exec NAME lanes ...) or use that namespace's daemon socket (--socket)",
		st.Netns, me)
}
