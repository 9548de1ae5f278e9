// links_test.go: the default route is looked up in IPv4, then IPv6, as
// root in a fresh namespace (an IPv6-only uplink has no IPv4 default).
package daemon

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestDefaultRouteIPv6Fallback(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	ns.Do(t, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v6up"}, PeerName: "v6peer"}); err != nil {
			return err
		}
		if p, err := netlink.LinkByName("v6peer"); err == nil {
			netlink.LinkSetUp(p)
		}
		l, err := netlink.LinkByName("v6up")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		if name, err := DefaultRouteInterface(); err == nil {
			t.Errorf("a default route found where there is none: %s", name)
		}
		_, all, _ := net.ParseCIDR("::/0")
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: all}); err != nil {
			return err
		}
		name, err := DefaultRouteInterface()
		if err != nil || name != "v6up" {
			t.Errorf("IPv6-only default route: %q %v", name, err)
		}
		return nil
	})
}

// TestLinkBytesCountsTraffic: the coop controller's interface counters
// read the interface of the daemon's namespace by name, and move by at
// least the payload that arrived on it (rx) or left it (tx).
func TestLinkBytesCountsTraffic(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	var rx0, rx1, tx0, tx1 uint64
	const payload = 200 * 1000
	p.B.Do(t, func() error {
		c, err := net.ListenPacket("udp4", net.JoinHostPort(p.AddrB.String(), "9"))
		if err != nil {
			return err
		}
		defer c.Close()
		if rx0, _, err = linkBytes(p.LinkB).InterfaceBytes(); err != nil {
			return err
		}
		p.A.Do(t, func() error {
			if _, tx0, err = linkBytes(p.LinkA).InterfaceBytes(); err != nil {
				return err
			}
			if err := sendUDP(net.JoinHostPort(p.AddrB.String(), "9"), payload); err != nil {
				return err
			}
			_, tx1, err = linkBytes(p.LinkA).InterfaceBytes()
			return err
		})
		rx1, _, err = linkBytes(p.LinkB).InterfaceBytes()
		return err
	})
	if rx1-rx0 < payload || tx1-tx0 < payload {
		t.Errorf("rx_bytes moved by %d, tx_bytes by %d after %d bytes of datagrams", rx1-rx0, tx1-tx0, payload)
	}
	p.B.Do(t, func() error {
		if _, _, err := linkBytes("no-such-link").InterfaceBytes(); err == nil {
			t.Errorf("a missing interface read without an error")
		}
		return nil
	})
}

// sendUDP sends n bytes in 1000-byte datagrams to addr.
func sendUDP(addr string, n int) error {
	c, err := net.Dial("udp4", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 1000)
	for sent := 0; sent < n; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
