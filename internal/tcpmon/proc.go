// proc.go: socket inode -> owning process, by scanning /proc/*/fd.
//
// The kernel's sock_diag answer carries the socket's inode but not its
// process; like ss -p we find it by reading every /proc/PID/fd/* link and
// looking for "socket:[INODE]". A full scan is costly with many processes or
// descriptors, so the result is cached:
//   - a known inode is answered from the map;
//   - an unknown inode triggers a rescan, at most once per refresh period,
//     so a socket owned by no process (or by one in another pid namespace)
//     cannot cause a scan per sample.
//
// Note: a socket shared by several processes (after fork) is attributed to
// the lowest pid that holds it.
package tcpmon

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// Proc is a process owning a socket.
type Proc struct {
	PID  int
	Comm string
}

type procCache struct {
	root     string // "/proc"
	refresh  time.Duration
	byInode  map[uint32]Proc
	lastScan time.Time
	scans    int
}

func newProcCache(root string, refresh time.Duration) *procCache {
	return &procCache{root: root, refresh: refresh, byInode: map[uint32]Proc{}}
}

// lookup returns the process owning the socket with this inode.
func (c *procCache) lookup(inode uint32, now time.Time) (Proc, bool) {
	if inode == 0 {
		return Proc{}, false
	}
	if p, ok := c.byInode[inode]; ok {
		return p, true
	}
	// Unknown: rescan unless we did so within the refresh period.
	if now.Sub(c.lastScan) < c.refresh {
		return Proc{}, false
	}
	c.scan(now)
	p, ok := c.byInode[inode]
	return p, ok
}

// scan rebuilds the map from /proc. Processes and descriptors that vanish
// while we read are skipped.
func (c *procCache) scan(now time.Time) {
	c.lastScan = now
	c.scans++
	m := make(map[uint32]Proc, len(c.byInode))
	d, err := os.Open(c.root)
	if err != nil {
		c.byInode = m
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		fdDir := c.root + "/" + name + "/fd"
		f, err := os.Open(fdDir)
		if err != nil {
			continue
		}
		fds, _ := f.Readdirnames(-1)
		f.Close()
		comm := ""
		for _, fd := range fds {
			link, err := os.Readlink(fdDir + "/" + fd)
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(link[len("socket:["):], "]"), 10, 32)
			if err != nil {
				continue
			}
			if old, ok := m[uint32(ino)]; ok && old.PID < pid {
				continue
			}
			if comm == "" {
				b, _ := os.ReadFile(c.root + "/" + name + "/comm")
				comm = strings.TrimSpace(string(b))
			}
			m[uint32(ino)] = Proc{PID: pid, Comm: comm}
		}
	}
	c.byInode = m
}
