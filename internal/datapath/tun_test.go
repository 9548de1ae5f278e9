// tun_test.go checks the datapath on a raw-IP device (TUN, as the lab's
// link emulator uses): the classifier reads the IP header at offset 0,
// registered 3-tuples and DSCP LE still select their lanes, the packets
// reach the TUN reader, and txqueuelen is left alone.
package datapath

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// openTUN creates TUN device name in ns (from this thread) and returns its fd.
func openTUN(t *testing.T, ns *testutil.NetNS, name string) int {
	t.Helper()
	var fd int
	ns.Do(t, func() (err error) {
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		var ifr [unix.IFNAMSIZ + 24]byte
		copy(ifr[:], name)
		*(*uint16)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = unix.IFF_TUN | unix.IFF_NO_PI
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
			return e
		}
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 78, 0, 1), Mask: net.CIDRMask(24, 32)}}); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestTUNRawIP(t *testing.T) {
	requireCgroup2(t)
	ns := testutil.NewNetNS(t)
	fd := openTUN(t, ns, "tunl0")
	before := inspect(t, ns, "tunl0", "tun1").txqlen
	d := openIn(t, ns, Config{Interface: "tunl0", Instance: "tun1", Mode: Shaped, UplinkBps: 20_000_000})
	if got := inspect(t, ns, "tunl0", "tun1").txqlen; got != before {
		t.Errorf("txqueuelen of TUN changed %d -> %d", before, got)
	}
	dst := net.IPv4(10, 78, 0, 2)
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: netipAddr(dst), DPort: 5000, SPort: 41000, Proto: unix.IPPROTO_UDP}, lane.Background); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 1)
	go func() {
		buf := make([]byte, 2048)
		n := 0
		deadline := time.Now().Add(3 * time.Second)
		for n < 8 && time.Now().Before(deadline) {
			unix.SetNonblock(fd, true)
			if k, err := unix.Read(fd, buf); err == nil && k >= 20 && buf[9] == unix.IPPROTO_UDP {
				n++
				continue
			}
			time.Sleep(5 * time.Millisecond)
		}
		got <- n
	}()
	ns.Do(t, func() error {
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.IPv4(10, 78, 0, 1), Port: 41000}, &net.UDPAddr{IP: dst, Port: 5000})
		if err != nil {
			return err
		}
		defer c.Close()
		for range 5 {
			if _, err := c.Write([]byte("registered")); err != nil {
				return err
			}
		}
		le, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: dst, Port: 5001})
		if err != nil {
			return err
		}
		defer le.Close()
		raw, _ := le.SyscallConn()
		raw.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, lane.DSCPLowerEffort<<2)
		})
		if err != nil {
			return err
		}
		for range 3 {
			if _, err := le.Write([]byte("lower effort")); err != nil {
				return err
			}
		}
		return nil
	})
	if n := <-got; n != 8 {
		t.Errorf("TUN reader got %d of 8 datagrams", n)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Classifier["tuple"] != 5 || st.Classifier["dscp"] != 3 || st.Lanes[lane.Background].Packets != 8 {
		t.Errorf("on TUN: classifier %v, background class %d packets; want 5 tuple + 3 dscp = 8 background", st.Classifier, st.Lanes[lane.Background].Packets)
	}
}

// TestBackgroundArrivalsIfbTUN: the class's arrivals shaped on a TUN's
// IFB still arrive. bpf_redirect to an Ethernet device drops a packet
// that carries no link-layer header (the kernel's __bpf_redirect_common),
// and a TUN's, like a modem's raw-IP device's, carry none: every shaped
// arrival was dropped there until the program pushed one. IPv4 and IPv6
// (the pushed header's type is the packet's).
func TestBackgroundArrivalsIfbTUN(t *testing.T) {
	requireCgroup2(t)
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) { arrivalsThroughTUN(t, v6) })
	}
}

// arrivalsThroughTUN writes 20 datagrams of a background flow into a
// TUN whose arrivals are shaped, and counts what its socket receives.
func arrivalsThroughTUN(t *testing.T, v6 bool) {
	ns := testutil.NewNetNS(t)
	fd := openTUN(t, ns, "tunl0")
	d := openIn(t, ns, Config{Interface: "tunl0", Instance: "tunifb"})
	eg := d.Egress()
	if err := eg.BgArrivalShapeError(); err != nil {
		t.Skipf("no IFB on this kernel: %v", err)
	}
	local, peer, packet := net.IPv4(10, 78, 0, 1), net.IPv4(10, 78, 0, 2), udp4
	if v6 {
		local, peer, packet = net.ParseIP("fd00:78::1"), net.ParseIP("fd00:78::2"), udp6
		ns.Do(t, func() error {
			l, err := netlink.LinkByName("tunl0")
			if err != nil {
				return err
			}
			return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: local, Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD})
		})
		waitLocalRoute(t, ns, local)
	}
	const sport, port = 41002, 5002
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: netipAddr(peer), DPort: port, SPort: sport, Proto: unix.IPPROTO_UDP}, lane.Background); err != nil {
		t.Fatal(err)
	}
	bg := listenUDP(t, ns, local, sport)
	ns.Do(t, func() error { // the flow leaves once: the class's from here
		_, err := bg.WriteTo([]byte("out"), &net.UDPAddr{IP: peer, Port: port})
		return err
	})
	if err := d.Background.SetBgShape(eg.Ifindex(), Download, 1_000_000); err != nil {
		t.Fatal(err)
	}
	got := received(bg)
	const sent = 20
	for i := range sent {
		if _, err := unix.Write(fd, packet(peer, local, port, sport, []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	n := <-got
	st, err := d.Background.BgShapeStats(eg.Ifindex(), Download)
	if errors.Is(err, ErrIfbRefuses) {
		ifbRefused(t, d, eg.Ifindex(), n)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d shaped arrivals received; ifb class %+v", n, sent, st)
	if n != sent || st.Packets != sent {
		t.Errorf("a TUN's shaped arrivals: %d of %d received, %d crossed the IFB", n, sent, st.Packets)
	}
	ns.Do(t, func() error { // the IFB sends nothing of its own: IPv6 off, no router solicitation in its class
		b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + BgIfbName(eg.Ifindex()) + "/disable_ipv6")
		if err == nil && strings.TrimSpace(string(b)) != "1" {
			t.Errorf("IPv6 on the IFB: its own packets cross its class")
		}
		return nil
	})
}

// waitLocalRoute waits until ip is a local address of ns: an IPv6 address
// added without DAD gets its local route from the addrconf work queue a
// moment later (on a loaded machine, after the test's datagrams had
// arrived for it and been dropped).
func waitLocalRoute(t *testing.T, ns *testutil.NetNS, ip net.IP) {
	t.Helper()
	for end := time.Now().Add(testutil.Patience(5 * time.Second)); ; time.Sleep(10 * time.Millisecond) {
		local := false
		ns.Do(t, func() error {
			rs, err := netlink.RouteGet(ip)
			local = err == nil && len(rs) > 0 && rs[0].Type == unix.RTN_LOCAL
			return nil
		})
		if local {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s is not a local address of the namespace after 5 s", ip)
		}
	}
}

// udp4 is an IPv4 UDP datagram from src:sport to dst:dport (UDP checksum
// 0: none).
func udp4(src, dst net.IP, sport, dport int, payload []byte) []byte {
	n := 28 + len(payload)
	b := make([]byte, n)
	b[0], b[8], b[9] = 0x45, 64, unix.IPPROTO_UDP
	b[2], b[3] = byte(n>>8), byte(n)
	copy(b[12:16], src.To4())
	copy(b[16:20], dst.To4())
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	b[10], b[11] = byte(^sum>>8), byte(^sum)
	b[20], b[21], b[22], b[23] = byte(sport>>8), byte(sport), byte(dport>>8), byte(dport)
	b[24], b[25] = byte((n-20)>>8), byte(n-20)
	copy(b[28:], payload)
	return b
}

// udp6 is an IPv6 UDP datagram from src:sport to dst:dport, its checksum
// over the pseudo-header (IPv6 requires one).
func udp6(src, dst net.IP, sport, dport int, payload []byte) []byte {
	ul := 8 + len(payload)
	b := make([]byte, 40+ul)
	b[0], b[6], b[7] = 0x60, unix.IPPROTO_UDP, 64
	b[4], b[5] = byte(ul>>8), byte(ul)
	copy(b[8:24], src.To16())
	copy(b[24:40], dst.To16())
	u := b[40:]
	u[0], u[1], u[2], u[3] = byte(sport>>8), byte(sport), byte(dport>>8), byte(dport)
	u[4], u[5] = byte(ul>>8), byte(ul)
	copy(u[8:], payload)
	sum := uint32(ul) + unix.IPPROTO_UDP
	for _, w := range [][]byte{b[8:40], u} {
		for i := 0; i < len(w); i += 2 {
			v := uint32(w[i]) << 8
			if i+1 < len(w) {
				v |= uint32(w[i+1])
			}
			sum += v
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xffff
	}
	u[6], u[7] = byte(c>>8), byte(c)
	return b
}
