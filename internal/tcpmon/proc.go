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

// procCache maps socket inodes to owners: byInode[inode] indexes procs,
// one entry per process, so the map holds no pointers (the garbage
// collector does not scan it) and is ~8 bytes an entry (at 100,000
// sockets its lookups were the largest part of the first sample's owner
// work, one cache miss each).
type procCache struct {
	root     string // "/proc"
	refresh  time.Duration
	byInode  map[uint32]int32
	procs    []Proc
	lastScan time.Time
	scans    int
	owners   *sockowner.Iter // nil: scan /proc
	sizeHint int             // sockets expected at the next scan (0: unknown)
}

func newProcCache(root string, refresh time.Duration) *procCache {
	return &procCache{root: root, refresh: refresh, byInode: map[uint32]int32{}}
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
	if i, ok := c.byInode[inode]; ok {
		return c.procs[i], true
	}
	// Unknown: rescan unless we did so within the refresh period.
	if now.Sub(c.lastScan) < c.refresh {
		return Proc{}, false
	}
	c.scan(now)
	i, ok := c.byInode[inode]
	if !ok {
		return Proc{}, false
	}
	return c.procs[i], true
}

// lookupGen is lookup for a caller that keeps the answer until the next
// scan: it also returns the scan generation to keep it under, or -1 where
// the socket is unknown and no scan looked for it (the refresh period held
// the scan back: a socket newer than the last scan), so that the caller
// asks again at its next sample, and the socket gets its owner at the next
// scan. An owner no scan finds (no process, another pid namespace) is kept
// as none until a scan for another socket.
func (c *procCache) lookupGen(inode uint32, now time.Time) (Proc, int) {
	before := c.scans
	p, ok := c.lookup(inode, now)
	if !ok && c.scans == before {
		return p, -1
	}
	return p, c.scans
}

// prime scans now if no scan has run yet and the refresh period allows
// one (as lookup would at its first unknown inode): the sampler's first
// walk does it while the kernel walks the sockets on the other core.
func (c *procCache) prime(now time.Time) {
	if c.scans == 0 && now.Sub(c.lastScan) >= c.refresh {
		c.scan(now)
	}
}

// owned records in m that procs[i] holds socket ino; the lowest pid of
// those holding it wins.
func owned(m map[uint32]int32, procs []Proc, ino uint32, i int32) {
	if old, ok := m[ino]; ok && procs[old].PID < procs[i].PID {
		return
	}
	m[ino] = i
}

// scan rebuilds the map from /proc. Processes and descriptors that vanish
// while we read are skipped.
func (c *procCache) scan(now time.Time) {
	c.lastScan = now
	c.scans++
	if c.owners != nil {
		if err := c.walkOwners(); err == nil {
			return
		}
	}
	m := make(map[uint32]int32, max(len(c.byInode), c.sizeHint))
	c.procs = c.procs[:0]
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
		idx := int32(-1)
		for _, fd := range fds {
			link, err := os.Readlink(fdDir + "/" + fd)
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(link[len("socket:["):], "]"), 10, 32)
			if err != nil {
				continue
			}
			if idx < 0 {
				b, _ := os.ReadFile(c.root + "/" + name + "/comm")
				idx = int32(len(c.procs))
				c.procs = append(c.procs, Proc{PID: pid, Comm: strings.TrimSpace(string(b))})
			}
			owned(m, c.procs, uint32(ino), idx)
		}
	}
	c.byInode = m
}

// walkOwners is scan through the iterator. A process's descriptors come
// together, so its name is made a string once.
func (c *procCache) walkOwners() error {
	m := make(map[uint32]int32, max(len(c.byInode), c.sizeHint))
	var procs []Proc
	last := int32(-1)
	err := c.owners.Each(func(ino uint64, pid int, comm []byte) {
		if last < 0 || pid != procs[last].PID || procs[last].Comm != string(comm) {
			last = int32(len(procs))
			procs = append(procs, Proc{PID: pid, Comm: string(comm)})
		}
		owned(m, procs, uint32(ino), last)
	})
	if err != nil {
		return err
	}
	c.byInode, c.procs = m, procs
	return nil
}
