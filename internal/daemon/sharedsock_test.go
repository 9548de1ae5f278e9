// sharedsock_test.go: a socket held by several processes (inherited over
// fork) follows the last of them that changed lane, the rule
// docs/livemove.md states (without root: real processes and their
// /proc/PID/fd, the in-memory datapath).
package daemon

import (
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

func TestSharedSocketFollowsLastMover(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	file, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(file.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	f.world.open = []openSock{{cookie: 9, proto: unix.IPPROTO_UDP, inode: uint32(st.Ino)}}
	holder := func() int { // a process that inherited the socket
		cmd := exec.Command("sleep", "60")
		cmd.ExtraFiles = []*os.File{file}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	first, second := holder(), holder()
	for _, m := range []struct {
		pid int
		l   lane.Lane
	}{{first, lane.Background}, {second, lane.Interactive}, {first, lane.Realtime}, {second, lane.Background}} {
		_, udp, err := f.d.mover.moveSockets([]int{m.pid}, m.l, "lanes move", true)
		if err != nil || udp != 1 {
			t.Fatalf("move of pid %d to %v: %d UDP sockets, %v; want the shared one", m.pid, m.l, udp, err)
		}
		if got := f.host.State().Sockets[9]; got != m.l {
			t.Errorf("the shared socket after pid %d moved to %v: in %v, want the last mover's lane", m.pid, m.l, got)
		}
	}
}
