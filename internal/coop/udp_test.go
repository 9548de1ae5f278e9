// Integration test (root) of the UDP transport: IPv6 link-local multicast
// between two namespaces on one bridge, beside IPv4 broadcast.
package coop

import (
	"net/netip"
	"strings"
	"testing"
	"time"

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
