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
