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
// Where the kernel has the task-file iterator and the sampler runs in the
// initial pid namespace (the iterator reports pids there), a scan reads
// one stream of (inode, pid, name) records of socket descriptors instead
// (internal/bpf/sockowner): ~0.2 us a descriptor in the kernel where a
// readlink costs ~3.6 us. A failed walk falls back to /proc for that scan.
//
// Note: a socket shared by several processes (after fork) is attributed to
// the lowest pid that holds it.
package tcpmon

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/sockowner"
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
	owners   *sockowner.Iter // nil: scan /proc
}

func newProcCache(root string, refresh time.Duration) *procCache {
	return &procCache{root: root, refresh: refresh, byInode: map[uint32]Proc{}}
}

// useIterator loads the socket owner iterator for the scans, if this
// kernel has it and the caller is in the initial pid namespace.
func (c *procCache) useIterator() {
	if !inInitialPidNS() {
		return
	}
	if it, err := sockowner.Load(); err == nil {
		c.owners = it
	}
}

// close unloads the iterator.
func (c *procCache) close() error {
	if c.owners == nil {
		return nil
	}
	return c.owners.Close()
}

// inInitialPidNS: the process has one pid (NSpid in /proc/self/status),
// so the pids the kernel's own task fields hold are the ones it sees.
func inInitialPidNS() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("NSpid:")); ok {
			return len(bytes.Fields(v)) == 1
		}
	}
	return false
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
	if c.owners != nil {
		if m, err := c.walkOwners(); err == nil {
			c.byInode = m
			return
		}
	}
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

// walkOwners is scan through the iterator. A process's descriptors come
// together, so its name is made a string once.
func (c *procCache) walkOwners() (map[uint32]Proc, error) {
	m := make(map[uint32]Proc, len(c.byInode))
	last := Proc{PID: -1}
	err := c.owners.Each(func(ino uint64, pid int, comm []byte) {
		if pid != last.PID || last.Comm != string(comm) {
			last = Proc{PID: pid, Comm: string(comm)}
		}
		if old, ok := m[uint32(ino)]; ok && old.PID < pid {
			return
		}
		m[uint32(ino)] = last
	})
	return m, err
}
