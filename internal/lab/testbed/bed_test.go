// bed_test.go: integration tests of hosts sharing one emulated medium
// (root; fresh namespaces, real traffic).
package testbed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestSharedMedium: three hosts behind one access point share one uplink
// (one rate, one queue); together they fill it and none is starved.
func TestSharedMedium(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("12 s of real traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bed, err := NewBed(testEnv(t), "cubic")
	if err != nil {
		t.Fatal(err)
	}
	defer bed.Close()
	rate := 6e6
	apUp := bed.Emu.NewUplink(emu.LinkConfig{Rate: rate, Delay: 20 * time.Millisecond, QueueBytes: 60000})
	apDown := bed.Emu.NewDownlink(emu.LinkConfig{Rate: rate, Delay: 20 * time.Millisecond, QueueBytes: 60000})
	hosts, srv := addSharedHosts(t, bed, apUp, apDown)
	trackers := make([]*SeqTracker, len(hosts))
	for i, h := range hosts {
		trackers[i] = &SeqTracker{Src: h.Addr, Dport: 80}
	}
	bed.Emu.OnUp = func(b []byte) {
		for _, tr := range trackers {
			tr.See(b)
		}
	}
	bed.Start(ctx)
	startBulkUploads(t, ctx, srv, hosts)
	time.Sleep(4 * time.Second)
	goodput := measureGoodput(trackers, 8*time.Second)
	var total, sumSq float64
	for i, g := range goodput {
		t.Logf("%s: %.2f Mbit/s", hosts[i].Name, g/1e6)
		total += g
		sumSq += g * g
	}
	jain := total * total / (float64(len(goodput)) * sumSq)
	want := rate * 1448 / 1500
	t.Logf("total %.2f Mbit/s (link %.2f after headers), Jain %.3f, shared uplink %+v", total/1e6, want/1e6, jain, apUp.Stats())
	if total < 0.93*want || total > 1.02*want {
		t.Errorf("hosts together got %.2f Mbit/s through one %.2f Mbit/s medium", total/1e6, want/1e6)
	}
	// Three cubic flows in one drop-tail queue share it only roughly over
	// 8 s (Jain 0.77-0.99 in our runs); what must hold is that nobody is
	// starved, i.e. they really compete in one queue at one rate.
	for i, g := range goodput {
		if g < 0.1*total {
			t.Errorf("%s got %.2f Mbit/s of %.2f: starved", hosts[i].Name, g/1e6, total/1e6)
		}
	}
	if jain < 0.6 {
		t.Errorf("Jain's index %.3f", jain)
	}
}

// addSharedHosts adds three hosts behind the access point's links and a
// wired server.
func addSharedHosts(t *testing.T, bed *Bed, apUp, apDown *emu.Link) ([]*topo.Node, *topo.Node) {
	t.Helper()
	var hosts []*topo.Node
	for _, name := range []string{"h1", "h2", "h3"} {
		n, err := bed.AddHost(name, "cubic", apUp, apDown, HostOpts{})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, n)
	}
	srv, err := bed.AddHost("server", "cubic", bed.Emu.NewUplink(emu.LinkConfig{}), bed.Emu.NewDownlink(emu.LinkConfig{}), HostOpts{})
	if err != nil {
		t.Fatal(err)
	}
	return hosts, srv
}

// startBulkUploads starts the lab's server on srv:80 and a bulk upload to it
// from each host.
func startBulkUploads(t *testing.T, ctx context.Context, srv *topo.Node, hosts []*topo.Node) {
	t.Helper()
	p, err := srv.Start("serve", "--listen", ":80")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := p.Line(ctx, 10*time.Second); err != nil || l != "ready" {
		t.Fatalf("server: %q %v", l, err)
	}
	for _, h := range hosts {
		b, err := h.Start("bulk", "--url", "http://"+srv.Addr.String()+":80")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Line(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// measureGoodput is each tracker's goodput, bit/s, over the next d.
func measureGoodput(trackers []*SeqTracker, d time.Duration) []float64 {
	s1 := make([]int64, len(trackers))
	for i, tr := range trackers {
		s1[i] = tr.Value()
	}
	t1 := time.Now()
	time.Sleep(d)
	el := time.Since(t1).Seconds()
	g := make([]float64, len(trackers))
	for i, tr := range trackers {
		g[i] = float64(tr.Value()-s1[i]) * 8 / el
	}
	return g
}

// TestSharedMediumBroadcast: a host's IPv4 broadcast and IPv6 link-local
// multicast cross the shared medium once up and once down and reach every
// other host behind it, not the sender and not the wired server.
func TestSharedMediumBroadcast(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bed, err := NewBed(testEnv(t), "cubic")
	if err != nil {
		t.Fatal(err)
	}
	defer bed.Close()
	cfg := emu.LinkConfig{Rate: 10e6, Delay: 2 * time.Millisecond, QueueBytes: 60000}
	apUp, apDown := bed.Emu.NewUplink(cfg), bed.Emu.NewDownlink(cfg)
	names := []string{"h1", "h2", "h3", "server"}
	for _, name := range names {
		up, down := apUp, apDown
		if name == "server" {
			up, down = bed.Emu.NewUplink(emu.LinkConfig{}), bed.Emu.NewDownlink(emu.LinkConfig{})
		}
		if _, err := bed.AddHost(name, "cubic", up, down, HostOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	var upB, downB atomic.Int64 // broadcasts leaving the medium's two directions
	bed.Emu.OnUp = func(b []byte) {
		if isTestBroadcast(b) {
			upB.Add(1)
		}
	}
	bed.Emu.OnDown = func(b []byte) {
		if isTestBroadcast(b) {
			downB.Add(1)
		}
	}
	bed.Start(ctx)
	for _, family := range []string{"udp4", "udp6"} {
		upB.Store(0)
		downB.Store(0)
		socks := map[string]*net.UDPConn{}
		for _, name := range names {
			c, err := broadcastSocket(ctx, bed.Nodes[name], family, testBroadcastPort)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			socks[name] = c
		}
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), testBroadcastPort)
		if family == "udp6" {
			dst = netip.AddrPortFrom(netip.MustParseAddr("ff02::1").WithZone(TUNName), testBroadcastPort)
		}
		if _, err := socks["h1"].WriteToUDPAddrPort([]byte("hello"), dst); err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		for _, name := range names {
			// the sender's own kernel loops its broadcast back, the medium does not
			want := 1
			if name == "server" {
				want = 0
			}
			if got := countDatagrams(socks[name], 500*time.Millisecond); got != want {
				t.Errorf("%s: %s heard the broadcast %d times, want %d", family, name, got, want)
			}
		}
		if up, down := upB.Load(), downB.Load(); up != 1 || down != 1 {
			t.Errorf("%s: the broadcast crossed the medium %d times up and %d times down, want once each", family, up, down)
		}
	}
	// the hosts' own link-local multicast (MLD, router solicitations) is
	// relayed as well
	if n := bed.Emu.Broadcast.Load(); n < 2 {
		t.Errorf("emulator counted %d relayed broadcasts, want at least the test's 2", n)
	}
}

const testBroadcastPort = 7499

// isTestBroadcast reports whether b is a UDP datagram of the test's port
// to 255.255.255.255 or ff02::1.
func isTestBroadcast(b []byte) bool {
	switch {
	case len(b) >= 28 && b[0]>>4 == 4 && b[9] == 17 && [4]byte(b[16:20]) == [4]byte{255, 255, 255, 255}:
		ihl := int(b[0]&0xf) * 4
		return len(b) >= ihl+4 && int(b[ihl+2])<<8|int(b[ihl+3]) == testBroadcastPort
	case len(b) >= 48 && b[0]>>4 == 6 && b[6] == 17:
		return netip.AddrFrom16([16]byte(b[24:40])) == netip.MustParseAddr("ff02::1") && int(b[42])<<8|int(b[43]) == testBroadcastPort
	}
	return false
}

// broadcastSocket opens a UDP socket on the node's TUN that sends and
// hears IPv4 broadcasts (udp4) or link-local multicast (udp6; it first
// waits until the TUN's link-local address has passed duplicate address
// detection, so that it can be the source).
func broadcastSocket(ctx context.Context, n *topo.Node, family string, port int) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := n.Do(func() error {
		if family == "udp6" {
			if err := waitLinkLocal(ctx, TUNName); err != nil {
				return err
			}
		}
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.BindToDevice(int(fd), TUNName)
				if family == "udp4" {
					serr = errors.Join(serr, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1))
				}
			})
			return errors.Join(err, serr)
		}}
		addr := fmt.Sprintf("0.0.0.0:%d", port)
		if family == "udp6" {
			addr = fmt.Sprintf("[::]:%d", port)
		}
		pc, err := lc.ListenPacket(ctx, family, addr)
		if err == nil {
			c = pc.(*net.UDPConn)
		}
		return err
	})
	return c, err
}

// waitLinkLocal waits until dev (in the calling thread's namespace) has a
// usable IPv6 link-local address.
func waitLinkLocal(ctx context.Context, dev string) error {
	for {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s has no usable IPv6 link-local address (%v): %w", dev, addrs, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// countDatagrams counts what c receives within d.
func countDatagrams(c *net.UDPConn, d time.Duration) int {
	n := 0
	buf := make([]byte, 2048)
	c.SetReadDeadline(time.Now().Add(d))
	for {
		if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
			return n
		}
		n++
	}
}
