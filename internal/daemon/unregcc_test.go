// unregcc_test.go: unregistering a flow gives its socket back its own
// congestion control (N21).
package daemon_test

import (
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
)

// TestUnregisterRestoresCC (audit N21): `lanes unregister` of a flow
// registered background left its socket on LEDBAT++ (its cookie's lane was
// cleared, and sock_ops left background only for a socket with a lane).
// Fix: the unregister applies the lane the socket had at once, and
// sock_ops gives a socket with no lane its own congestion control back.
func TestUnregisterRestoresCC(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newAttackBed(t, "")
	conn := b.dialAs(t, 0, "tcp", "", 0)
	cc := func() string {
		raw, _ := conn.(syscall.Conn).SyscallConn()
		var name string
		raw.Control(func(fd uintptr) { name, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
		return name
	}
	own := cc()
	f, err := client.FlowOf(conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.root.Register(f, lane.Background); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "the registered socket on the background congestion control", func() bool {
		conn.Write([]byte("x")) // an ACK: sock_ops' callback where live moves cannot run
		return cc() != own
	})
	bgCC := cc()
	if !strings.HasPrefix(bgCC, "lanes") {
		t.Skipf("background congestion control here: %q", bgCC)
	}
	if err := b.root.Unregister(f); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "the unregistered socket back on its own congestion control", func() bool {
		conn.Write([]byte("x"))
		return cc() == own
	})
}
