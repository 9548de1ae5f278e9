// yield_test.go: the foreground-aware yield is per interface, end to end.
// One daemon manages two interfaces of namespace A, each a path to its own
// namespace (veth-a to B, va2 to C). A background upload leaves by va2;
// an interactive upload by veth-a makes veth-a yield and not va2, and the
// background socket is never held (sock_ops counts no yield). Then an
// interactive upload by va2 does hold it: the counter would have seen it.
package daemon_test

import (
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

func TestYieldPerInterface(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p := testutil.NewVethPair(t)
	c := testutil.NewNetNS(t)
	addrA2, addrC := net.IPv4(10, 252, 0, 1).To4(), net.IPv4(10, 252, 0, 2).To4()
	p.A.Do(t, func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va2"}, PeerName: "vc2", PeerNamespace: netlink.NsFd(int(c.Handle))}
		if err := netlink.LinkAdd(v); err != nil {
			return err
		}
		return linkUp("va2", addrA2)
	})
	c.Do(t, func() error { return linkUp("vc2", addrC) })
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	start(t, c, "lab", "helper", "serve", "--listen", ":8080")
	baseB, baseC := fmt.Sprintf("http://%s:8080", p.AddrB), fmt.Sprintf("http://%s:8080", addrC)

	_, sock := startDaemon(t, p.A, fmt.Sprintf("interfaces:\n  - name: %s\n  - name: va2\n", p.LinkA))
	bulk(t, p.A, baseC, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	yields := func() uint64 { return status(t, sock).Interfaces[0].Sockops["yield"] }
	// the background upload's own start is not foreground: let it run
	time.Sleep(2 * time.Second)
	y0 := yields()

	fgB, _ := bulk(t, p.A, baseB) // interactive, by veth-a
	waitForeground(t, sock, p.LinkA)
	for range 10 {
		if s := yieldStatus(t, sock); s.Interfaces["va2"].Mode != yield.ModeFree && s.Interfaces["va2"].Mode != "" {
			t.Fatalf("foreground by %s reached va2's background: %+v", p.LinkA, s.Interfaces)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if y := yields(); y != y0 {
		t.Errorf("foreground by %s held background sockets by va2: sock_ops yield counter %d -> %d", p.LinkA, y0, y)
	}
	fgB.cmd.Process.Kill()
	fgB.cmd.Wait()

	bulk(t, p.A, baseC) // interactive, by va2: now va2's background shares or yields
	waitForeground(t, sock, "va2")
}

func yieldStatus(t *testing.T, sock string) yield.Status {
	t.Helper()
	var s yield.Status
	if err := json.Unmarshal(status(t, sock).Details["background"], &s); err != nil {
		t.Fatalf("background component status: %v", err)
	}
	return s
}

// waitForeground waits until the daemon says iface's background gives way
// to a foreground there (sharing beside it, or held).
func waitForeground(t *testing.T, sock, iface string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := yieldStatus(t, sock)
		if m := s.Interfaces[iface].Mode; m == yield.ModeSharing || m == yield.ModeHeld {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never yielded under its foreground: %+v", iface, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func linkUp(name string, ip net.IP) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	a, err := netlink.ParseAddr(ip.String() + "/24")
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, a); err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}
