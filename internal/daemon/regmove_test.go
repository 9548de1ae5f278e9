// regmove_test.go: a process move asked by someone other than root leaves
// the sockets of root's registrations in their lane (N12).
package daemon

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/lane"
)

// TestAttackMoveKeepsRootRegistration (N12): root registered nobody's TCP
// flow realtime; nobody ran `lanes move --lane background <own pid>`, and
// the flow went to the background class on LEDBAT++ while its why still
// said "registration (api)". Fix: a move not asked by root skips sockets
// a root registration holds; root's move still takes them.
func TestAttackMoveKeepsRootRegistration(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	// a socket this process holds, as sock_diag would list it
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	const cookie = 4242
	f.world.open = []openSock{{cookie: cookie, proto: unix.IPPROTO_TCP, inode: uint32(st.Ino)}}
	reg := api.Flow{Dst: "198.51.100.7", DPort: 443, SPort: 40000, Src: "192.0.2.1"}
	f.world.sockets[reg.String()] = []uint64{cookie}
	if err := f.d.handlers.Register(apiserver.Cred{UID: 0, Privileged: true}, reg, lane.Realtime); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.d.mover.moveSockets([]int{os.Getpid()}, lane.Background, "lanes move", false); err != nil {
		t.Fatal(err)
	}
	if got := f.host.State().Sockets[cookie]; got != lane.Realtime {
		t.Errorf("a user's move of its process put root's realtime registration's socket in %v", got)
	}
	if _, _, err := f.d.mover.moveSockets([]int{os.Getpid()}, lane.Background, "lanes move", true); err != nil {
		t.Fatal(err)
	}
	if got := f.host.State().Sockets[cookie]; got != lane.Background {
		t.Errorf("root's move left the socket in %v", got)
	}
}
