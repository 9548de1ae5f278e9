// movers.go: what moved the process holding a socket, for the why of
// status and monitor. A move (lanes move, lanes run, a rule's) is kept by
// pid while the process lives; a socket it opened after the move (in the
// lane's cgroup, no cookie entry of the move's) is found by its inode
// among the moved processes' descriptors when a why is asked.
package daemon

import (
	"fmt"
	"maps"
	"os"
)

// rememberMoverLocked records that m.by moved pid to m.lane (d.mu held).
func (d *Daemon) rememberMoverLocked(pid int, m movedSock) {
	d.movedPIDs[pid] = m
}

// moverInodes maps the socket inodes the moved processes hold to what moved
// them (their descriptors read without d.mu).
func (d *Daemon) moverInodes() map[uint32]movedSock {
	d.mu.Lock()
	pids := maps.Clone(d.movedPIDs)
	d.mu.Unlock()
	out := map[uint32]movedSock{}
	for pid, m := range pids {
		inodes := map[uint32]bool{}
		socketInodes(pid, inodes, 0)
		for ino := range inodes {
			out[ino] = m
		}
	}
	return out
}

// pruneMoversLocked forgets the moved processes that exited (d.mu held).
func (d *Daemon) pruneMoversLocked() {
	for pid := range d.movedPIDs {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			delete(d.movedPIDs, pid)
		}
	}
}
