// movebound_test.go: a move's work is bounded for callers but root (N15).
package daemon

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

// TestAttackMoveSocketsBounded (N15): an unprivileged process holding
// 19,000 UDP sockets asked to move itself 4 times a second; each move set
// every socket under the daemon's lock (261 ms a move, the daemon at
// 98.7 % of a core, another user's ping p50 0.29 -> 447 ms). Fix: a move
// not asked by root takes at most maxMoveSockets sockets, and every move
// holds the lock for moveChunk sockets at a time.
func TestAttackMoveSocketsBounded(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	const n = maxMoveSockets + 200
	for i := range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		f.world.open = append(f.world.open, openSock{cookie: uint64(i + 1), proto: unix.IPPROTO_UDP, inode: uint32(st.Ino)})
	}
	_, udp, err := f.d.mover.moveSockets([]int{os.Getpid()}, lane.Background, "lanes move", false)
	if err != nil {
		t.Fatal(err)
	}
	if udp > maxMoveSockets {
		t.Errorf("a user's move set %d sockets, bound %d", udp, maxMoveSockets)
	}
	if _, udp, _ = f.d.mover.moveSockets([]int{os.Getpid()}, lane.Interactive, "lanes move", true); udp != n {
		t.Errorf("root's move set %d of the process's %d sockets", udp, n)
	}
}
