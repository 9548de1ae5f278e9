// movers.go: the record of the live moves (moves): the open sockets a
// process move set, by cookie; the moved processes, by pid; what moved
// processes' threads ran before background (schedmove.go); and the socket
// listing users' moves, registrations and the registration sweep share
// (livemove.go). It owns its lock, taken after
// the daemon's, and never calls back into the daemon.
//
// What moved the process holding a socket is kept for the why of status
// and monitor. A move (lanes move, lanes run, a rule's) is kept by pid
// while the process lives; a socket it opened after the move (in the
// lane's cgroup, no cookie entry of the move's) is found by its inode
// among the moved processes' descriptors when a why is asked.
package daemon

import (
	"fmt"
	"maps"
	"os"
	"sync"

	"github.com/lanes-net/lanes/internal/lane"
)

// sweepKicker wakes the sweep that prunes the moves (registrations).
type sweepKicker interface{ kickSweep() }

// socketLaneReader is the host datapath's socket map, read.
type socketLaneReader interface {
	SocketLane(cookie uint64) (lane.Lane, bool)
}

// moves is the record of the live moves.
type moves struct {
	sweep sweepKicker
	// userDump: the socket listing users' moves and registrations and the
	// registration sweep share (its own lock)
	userDump sockDump

	mu    sync.Mutex
	socks map[uint64]movedSock
	pids  map[int]movedSock
	sched map[int]savedSched
}

func newMoves(sweep sweepKicker) *moves {
	return &moves{sweep: sweep, socks: map[uint64]movedSock{}, pids: map[int]movedSock{}, sched: map[int]savedSched{}}
}

// any reports whether there is a move to prune.
func (m *moves) any() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.socks) > 0 || len(m.pids) > 0 || len(m.sched) > 0
}

// setSockets records that ms moved socks.
func (m *moves) setSockets(socks []openSock, ms movedSock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range socks {
		m.socks[s.cookie] = ms
	}
}

// socket is what moved the socket with this cookie.
func (m *moves) socket(cookie uint64) (movedSock, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms, ok := m.socks[cookie]
	return ms, ok
}

// rememberMover records that ms.by moved pid to ms.lane.
func (m *moves) rememberMover(pid int, ms movedSock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pids[pid] = ms
}

// moverSockets: the sockets of each moved process that moverInodes reads
// (from its first 4 x moverSockets descriptors). A socket past them that
// the process opened after its move has the why of its cgroup: nobody's
// udp-flows loop beside a moved process holding 19,000 sockets read all
// their descriptors at each listing, 61 % of the daemon's 45 % of a core.
const moverSockets = maxMoveSockets

// moverInodes maps the socket inodes the moved processes hold to what moved
// them (their descriptors read without the lock).
func (m *moves) moverInodes() map[uint32]movedSock {
	m.mu.Lock()
	pids := maps.Clone(m.pids)
	m.mu.Unlock()
	out := map[uint32]movedSock{}
	for pid, ms := range pids {
		inodes := map[uint32]bool{}
		socketInodes(pid, inodes, moverSockets)
		for ino := range inodes {
			out[ino] = ms
		}
	}
	return out
}

// prune forgets the moved processes that exited and the moved sockets
// that closed, by the host's socket map (nil: no host; the sockets stay):
// a TCP socket's entry leaves with its close, a UDP one when the LRU map
// evicts it.
func (m *moves) prune(sockets socketLaneReader) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid := range m.pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			delete(m.pids, pid)
		}
	}
	if sockets == nil {
		return
	}
	for c := range m.socks {
		if _, ok := sockets.SocketLane(c); !ok {
			delete(m.socks, c)
		}
	}
}
