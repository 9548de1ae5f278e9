// appsock_bench_test.go: what a release costs from a client's socket
// (sendOn: the SO_PRIORITY control message, the UDP_CORK check) against
// the lane's own (sendTo), on loopback in a fresh namespace, root only:
//
//	go test -run '^$' -bench SendFrom -benchtime 200000x ./internal/rtlane/
package rtlane

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

func BenchmarkSendFrom(b *testing.B) {
	ns := testutil.NewNetNS(b)
	var sink, tx, own int
	var dst netip.AddrPort
	ns.Do(b, func() (err error) {
		if sink, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		_ = unix.SetsockoptInt(sink, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		if err = unix.Bind(sink, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		sa, _ := unix.Getsockname(sink)
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*unix.SockaddrInet4).Port))
		if tx, err = openSender(unix.AF_INET, true); err != nil {
			return err
		}
		own, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	defer unix.Close(sink)
	defer unix.Close(tx)
	defer unix.Close(own)
	drain := func() {
		buf := make([]byte, 512)
		for {
			if _, _, err := unix.Recvfrom(sink, buf, unix.MSG_DONTWAIT); err != nil {
				return
			}
		}
	}
	p := make([]byte, 200)
	b.Run("lane-socket", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := sendTo(tx, p, dst); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 {
				drain()
			}
		}
	})
	s := &appSock{fd: own, fam: unix.AF_INET}
	b.Run("client-socket", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if corked(own) {
				b.Fatal("corked")
			}
			if err := sendOn(s, p, dst, 0x10011, 0); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 {
				drain()
			}
		}
	})
}
