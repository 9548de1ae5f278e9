// sendto_test.go: sendTo delivers to IPv4 and IPv6 destinations, and
// allocates nothing.
package rtlane

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSendToDeliversWithoutAllocating(t *testing.T) {
	for _, c := range []struct {
		network, addr string
		family        int
	}{{"udp4", "127.0.0.1:0", unix.AF_INET}, {"udp6", "[::1]:0", unix.AF_INET6}} {
		pc, err := net.ListenPacket(c.network, c.addr)
		if err != nil {
			t.Skipf("%s: %v", c.network, err)
		}
		defer pc.Close()
		dst := pc.LocalAddr().(*net.UDPAddr).AddrPort()
		fd, err := unix.Socket(c.family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		msg := []byte("deadline")
		if err := sendTo(fd, msg, dst); err != nil {
			t.Fatalf("%s: %v", c.network, err)
		}
		buf := make([]byte, 64)
		n, _, err := pc.ReadFrom(buf)
		if err != nil || string(buf[:n]) != string(msg) {
			t.Fatalf("%s: received %q, %v; want %q", c.network, buf[:n], err, msg)
		}
		if a := testing.AllocsPerRun(100, func() { _ = sendTo(fd, msg, dst) }); a != 0 {
			t.Errorf("%s: %v allocations per send; want 0", c.network, a)
		}
	}
	if err := sendTo(-1, nil, netip.MustParseAddrPort("127.0.0.1:9")); err != unix.EBADF {
		t.Errorf("send on a closed descriptor: %v; want EBADF", err)
	}
}
