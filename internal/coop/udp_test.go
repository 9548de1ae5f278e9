// Integration test (root) of the UDP transport: IPv6 link-local multicast
// between two namespaces on one bridge, beside IPv4 broadcast.
package coop

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

// waitLinkLocal waits until lan0 in ns has a usable (non-tentative) IPv6
// link-local address: DAD takes a second or two after the link comes up.
func waitLinkLocal(t *testing.T, ns *testutil.NetNS) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		out, err := ns.Command("ip", "-6", "addr", "show", "dev", "lan0", "scope", "link").Output()
		if err != nil {
			t.Skipf("no IPv6 here: %v", err)
		}
		s := string(out)
		if strings.Contains(s, "fe80::") && !strings.Contains(s, "tentative") {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("lan0 has no usable IPv6 link-local address")
}

func TestUDPTransportBothFamilies(t *testing.T) {
	testutil.RequireRoot(t)
	l := newLAN(t, 2)
	for _, h := range l.hosts {
		waitLinkLocal(t, h)
	}
	open := func(i int, transport string) *UDPTransport {
		var tr *UDPTransport
		l.hosts[i].Do(t, func() (err error) {
			tr, err = ListenUDPOn("lan0", 17433, transport)
			return err
		})
		t.Cleanup(func() { tr.Close() })
		if tr.Warning != "" {
			t.Fatalf("host %d: %s", i, tr.Warning)
		}
		return tr
	}
	rx := open(1, TransportBoth)
	// IPv6 only: the datagram reaches the other host from its link-local
	// address, through the group
	tx := open(0, TransportIPv6)
	if err := tx.Send([]byte("over ipv6")); err != nil {
		t.Fatal(err)
	}
	got := map[string]netip.Addr{}
	buf := make([]byte, 64)
	read := func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			n, from, err := rx.Recv(buf)
			if err != nil {
				t.Error(err)
				return
			}
			got[string(buf[:n])] = from
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("nothing received")
		}
	}
	read()
	from := got["over ipv6"]
	if !from.Is6() || !from.IsLinkLocalUnicast() {
		t.Fatalf("IPv6 datagram from %q, want a link-local IPv6 address (got %v)", from, got)
	}
	// both: one copy per family
	tx2 := open(0, TransportBoth)
	tx.Close()
	if err := tx2.Send([]byte("both")); err != nil {
		t.Fatal(err)
	}
	delete(got, "both")
	read()
	first := got["both"]
	read()
	second := got["both"]
	if first.Is4() == second.Is4() {
		t.Errorf("two copies from %s and %s, want one per family", first, second)
	}
}

// TestAnnouncePortNotShareableAcrossUsers (audit D7): the announcement sockets
// set SO_REUSEADDR, so nobody could bind 0.0.0.0:port with SO_REUSEADDR and
// SO_BINDTODEVICE on the managed interface and take unicast announcements (17
// datagrams in 8 s; the peer left the table, even with a key). Fix:
// SO_REUSEPORT, which the kernel shares only within one user: root's listening
// tool still joins, nobody's bind fails.
func TestAnnouncePortNotShareableAcrossUsers(t *testing.T) {
	testutil.RequireRoot(t)
	l := newLAN(t, 1)
	h := l.hosts[0]
	var tr *UDPTransport
	h.Do(t, func() (err error) { tr, err = ListenUDPOn("lan0", 17434, TransportIPv4); return err })
	t.Cleanup(func() { tr.Close() })
	bindAs := func(opts ...int) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, o := range opts {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o, 1); err != nil {
				return err
			}
		}
		if err := unix.BindToDevice(fd, "lan0"); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrInet4{Port: 17434})
	}
	for _, opts := range [][]int{{unix.SO_REUSEADDR}, {unix.SO_REUSEPORT}, {unix.SO_REUSEADDR, unix.SO_REUSEPORT}} {
		var err error
		testutil.AsUserIn(t, h, testutil.Nobody, testutil.Nobody, nil, func() error { err = bindAs(opts...); return nil })
		if err == nil {
			t.Errorf("nobody bound the announcement port with options %v", opts)
		}
	}
	// root's second listener (lanes coop peers) shares it
	var peers *UDPTransport
	h.Do(t, func() (err error) { peers, err = ListenUDPOn("lan0", 17434, TransportIPv4); return err })
	peers.Close()
}

// TestAnnounceFamilyReopenedWhenFree (audit N10): another user held the IPv4
// announcement port when the controller started: it ran on IPv6 alone, and
// IPv4 stayed closed after the port was free, until a reload. Fix: Reopen,
// called each interval, opens a family that could not be opened before; status
// shows the missing one meanwhile (transport_missing).
func TestAnnounceFamilyReopenedWhenFree(t *testing.T) {
	testutil.RequireRoot(t)
	l := newLAN(t, 2)
	const port = 17435
	squat := -1
	testutil.AsUserIn(t, l.hosts[0], testutil.Nobody, testutil.Nobody, nil, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
			unix.Close(fd)
			return err
		}
		squat = fd
		return nil
	})
	if squat < 0 {
		t.Fatal("nobody could not bind the port")
	}
	t.Cleanup(func() {
		if squat >= 0 {
			unix.Close(squat)
		}
	})
	var tr, peer *UDPTransport
	l.hosts[0].Do(t, func() (err error) { tr, err = ListenUDPOn("lan0", port, TransportBoth); return err })
	t.Cleanup(func() { tr.Close() })
	l.hosts[1].Do(t, func() (err error) { peer, err = ListenUDPOn("lan0", port, TransportIPv4); return err })
	t.Cleanup(func() { peer.Close() })
	if !strings.Contains(tr.Missing(), "udp4") {
		t.Fatalf("with IPv4 held: missing %q, want udp4", tr.Missing())
	}
	reopen := func() (ok bool) { l.hosts[0].Do(t, func() error { ok = tr.Reopen(); return nil }); return ok }
	if reopen() {
		t.Fatal("reopened IPv4 while the port is held")
	}
	unix.Close(squat)
	squat = -1
	if !reopen() || tr.Missing() != "" {
		t.Fatalf("after the port was freed: missing %q", tr.Missing())
	}
	got := make(chan netip.Addr, 1)
	go func() {
		buf := make([]byte, 2*MaxSize)
		if _, from, err := tr.Recv(buf); err == nil {
			got <- from
		}
	}()
	for deadline := time.Now().Add(testutil.Patience(5 * time.Second)); ; {
		if err := peer.Send([]byte("announcement")); err != nil {
			t.Fatal(err)
		}
		select {
		case from := <-got:
			if !from.Is4() {
				t.Fatalf("received from %v, want the IPv4 broadcast", from)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no IPv4 announcement received on the reopened socket")
		}
	}
}
