// Attack test for a background socket's own-delay harm (audit N20): a
// peer a user controls throttles the ACKs of that user's background
// upload, beside an untold foreground; another user's background on the
// same interface, to another peer, must keep going.
package datapath

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// Audit N20: the attacker's upload to a peer whose ACKs leave at 24 kbit/s
// reads its own RTT far over its minimum. That delay is its own path's: it
// may hold the attacker's socket, never the interface, so another user's
// background UDP (the QUIC/UDP class, 8 Mbit/s) keeps its rate and their
// background TCP upload is not held.
func TestThrottledPeerHoldsOnlyItsOwnSocket(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	attackerPeer := net.IPv4(p.AddrB[0], p.AddrB[1], 0, 3).To4()
	throttleAcksFrom(t, p, attackerPeer)
	h, idx := openShapedHost(t, p, HostConfig{StateDir: testStateDir, Instance: "ownpath", Yield: true}, 20_000_000)
	victimSink, victimAddr := startSink(t, p.B, p.AddrB, 9542)
	_, attackerAddr := startSink(t, p.B, attackerPeer, 9541)
	udpAddr := net.JoinHostPort(p.AddrB.String(), "9543")
	for _, a := range []string{victimAddr, attackerAddr, udpAddr} {
		ap := netip.MustParseAddrPort(a)
		r := DstRule{Prefix: netip.PrefixFrom(ap.Addr(), 32), DPort: ap.Port()}
		if err := h.Lanes.SetDstLane(r, lane.Background); err != nil {
			t.Fatal(err)
		}
	}
	stopFg := untoldForeground(t, h, uint32(idx))
	defer stopFg()

	udpSink := udpVictim(t, p, udpAddr)
	victim := dialCC(t, p.A, victimAddr, "cubic")
	startWriting(t, victim)
	time.Sleep(time.Second) // past its slow start
	udpBefore := udpSink.n.Load()
	alone := rateOver(victimSink, 3*time.Second)
	udpAlone := float64(udpSink.n.Load()-udpBefore) * 8 / 3

	attacker := dialCC(t, p.A, attackerAddr, "cubic")
	paceWriting(t, attacker, 2500, 10*time.Millisecond) // 2 Mbit/s, an ACK per 10 ms
	time.Sleep(time.Second)
	var classHeld, victimHeld, attackerHeld, n int
	var attackerQueue time.Duration
	start, before, udpBefore := time.Now(), victimSink.n.Load(), udpSink.n.Load()
	for end := start.Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		n++
		if h.Background.BgClassHeld(idx, Upload) {
			classHeld++
		}
		if cw, _ := tcpInfo(t, victim); cw <= 2 {
			victimHeld++
		}
		ti := tcpInfoFull(t, attacker)
		if ti.Snd_cwnd <= 2 {
			attackerHeld++
		}
		if q := time.Duration(ti.Rtt-ti.Min_rtt) * time.Microsecond; ti.Rtt > ti.Min_rtt && q > attackerQueue {
			attackerQueue = q
		}
	}
	took := time.Since(start).Seconds()
	beside := float64(victimSink.n.Load()-before) * 8 / took
	udpBeside := float64(udpSink.n.Load()-udpBefore) * 8 / took
	t.Logf("attacker's RTT up to %v over its minimum, held in %d of %d samples", attackerQueue, attackerHeld, n)
	t.Logf("victim's background UDP %.2f Mbit/s alone, %.2f beside (%.2f); class held in %d of %d",
		udpAlone/1e6, udpBeside/1e6, udpBeside/udpAlone, classHeld, n)
	t.Logf("victim's background TCP %.2f Mbit/s alone, %.2f beside (%.2f), held in %d of %d",
		alone/1e6, beside/1e6, beside/alone, victimHeld, n)
	if attackerQueue <= yield.HarmQueue {
		t.Fatalf("the throttled ACKs raised the attacker's RTT only %v over its minimum: no attack", attackerQueue)
	}
	if udpBeside < udpAlone/2 || 2*classHeld > n {
		t.Errorf("another user's background UDP kept %.2f of its rate alone (class held in %d of %d samples)",
			udpBeside/udpAlone, classHeld, n)
	}
	if 2*victimHeld > n || beside < alone/2 {
		t.Errorf("another user's background TCP held in %d of %d samples, kept %.2f of its rate alone",
			victimHeld, n, beside/alone)
	}
}

// udpVictim sends background UDP from p's A end to addr in B at 8 Mbit/s
// (five 1,000-byte datagrams every 5 ms) until the test ends; B counts
// what arrives.
func udpVictim(t *testing.T, p *testutil.Pair, addr string) *sink {
	t.Helper()
	s := &sink{}
	var pc net.PacketConn
	p.B.Do(t, func() (err error) { pc, err = net.ListenPacket("udp", addr); return err })
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.n.Add(int64(k))
		}
	}()
	var c net.Conn
	p.A.Do(t, func() (err error) { c, err = net.Dial("udp", addr); return err })
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		buf := make([]byte, 1000)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				for range 5 {
					_, _ = c.Write(buf)
				}
			}
		}
	}()
	t.Cleanup(func() { close(done); <-ended; c.Close() })
	return s
}

// Audit N20, the class's side: the QUIC/UDP class's own delay (bgudp's
// MarkOwnHarm: a peer of the class may delay its answers) holds the class,
// not another user's background TCP socket on the interface, which reads
// its own delay.
func TestClassOwnDelayHoldsNoSocket(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openShapedHost(t, p, HostConfig{StateDir: testStateDir, Instance: "classown", Yield: true}, 20_000_000)
	_, addr := startSink(t, p.B, p.AddrB, 9544)
	ap := netip.MustParseAddrPort(addr)
	if err := h.Lanes.SetDstLane(DstRule{Prefix: netip.PrefixFrom(ap.Addr(), 32), DPort: ap.Port()}, lane.Background); err != nil {
		t.Fatal(err)
	}
	stopFg := untoldForeground(t, h, uint32(idx))
	defer stopFg()
	conn := dialCC(t, p.A, addr, "cubic")
	startWriting(t, conn)
	time.Sleep(time.Second)
	var classHeld, sockHeld, n int
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		h.Background.MarkOwnHarm(idx, 30*time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		n++
		if h.Background.BgClassHeld(idx, Upload) {
			classHeld++
		}
		if cw, _ := tcpInfo(t, conn); cw <= 2 {
			sockHeld++
		}
	}
	t.Logf("the class's own 30 ms: class held in %d of %d samples, the TCP socket in %d", classHeld, n, sockHeld)
	if 2*classHeld < n {
		t.Errorf("the class's own delay held the class in only %d of %d samples", classHeld, n)
	}
	if 2*sockHeld > n {
		t.Errorf("the class's own delay held another user's background TCP socket in %d of %d samples", sockHeld, n)
	}
}

// throttleAcksFrom adds peer as a second address of p's B end and sends
// what leaves from it at 24 kbit/s (TBF, 200 ms of queue), without TCP
// timestamps in B: the peer a user controls, which delays its ACKs.
func throttleAcksFrom(t *testing.T, p *testutil.Pair, peer net.IP) {
	t.Helper()
	var macB net.HardwareAddr
	p.B.Do(t, func() error {
		l, err := netlink.LinkByName(p.LinkB)
		if err != nil {
			return err
		}
		macB = l.Attrs().HardwareAddr
		return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: peer, Mask: net.CIDRMask(24, 32)}})
	})
	p.A.Do(t, func() error {
		l, err := netlink.LinkByName(p.LinkA)
		if err != nil {
			return err
		}
		return netlink.NeighSet(&netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4,
			State: netlink.NUD_PERMANENT, IP: peer, HardwareAddr: macB})
	})
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv4.tcp_timestamps=0"},
		{"tc", "qdisc", "add", "dev", p.LinkB, "root", "handle", "1:", "htb", "default", "10"},
		{"tc", "class", "add", "dev", p.LinkB, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"},
		{"tc", "class", "add", "dev", p.LinkB, "parent", "1:", "classid", "1:30", "htb", "rate", "10gbit"},
		{"tc", "qdisc", "add", "dev", p.LinkB, "parent", "1:30", "handle", "30:",
			"tbf", "rate", "24kbit", "burst", "1600", "latency", "200ms"},
		{"tc", "filter", "add", "dev", p.LinkB, "parent", "1:", "protocol", "ip", "prio", "1",
			"u32", "match", "ip", "src", peer.String() + "/32", "flowid", "1:30"},
	} {
		if out, err := p.B.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
}

// untoldForeground keeps idx's (and key 0's) foreground present with no
// foreground TCP sample, as a UDP call does, until the returned stop.
func untoldForeground(t *testing.T, h *Host, idx uint32) (stop func()) {
	return keepForeground(h, idx, false)
}

// keepForeground stamps idx's (and key 0's) foreground present every 20
// ms until the returned stop; told: with a foreground TCP sample that is
// not harmed (lanes_fg_harm.seen).
func keepForeground(h *Host, idx uint32, told bool) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			now := monotonicNS()
			for _, k := range []uint32{idx, 0} {
				_ = h.cls.LanesFgActive.Put(k, yield.Window{Start: now, Active: now, Since: now, Episodes: 1, Packets: 5})
				if told {
					_ = h.cls.LanesFgHarm.Put(k, yield.Harm{Seen: now})
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-ended }
}

// rateOver is s's receive rate over d, bits per second.
func rateOver(s *sink, d time.Duration) float64 {
	start, before := time.Now(), s.n.Load()
	time.Sleep(d)
	return float64(s.n.Load()-before) * 8 / time.Since(start).Seconds()
}

// paceWriting writes size bytes to c every gap until the test ends.
func paceWriting(t *testing.T, c *net.TCPConn, size int, gap time.Duration) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		buf := make([]byte, size)
		tick := time.NewTicker(gap)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				c.SetWriteDeadline(time.Now().Add(gap))
				if _, err := c.Write(buf); err != nil && !isTimeout(err) {
					return
				}
			}
		}
	}()
	t.Cleanup(func() { close(done); <-ended })
}

// openShapedHost opens a host in p's namespace A with a shaped egress of
// uplinkBps on its link, and returns it with the link's ifindex; it skips
// the test where the kernel runs no sock_ops.
func openShapedHost(t *testing.T, p *testutil.Pair, cfg HostConfig, uplinkBps uint64) (*Host, int) {
	t.Helper()
	var h *Host
	var idx int
	p.A.Do(t, func() (err error) {
		if h, err = OpenHost(cfg); err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		e, err := OpenEgress(h, EgressConfig{Interface: p.LinkA, Mode: Shaped, UplinkBps: uplinkBps})
		if err != nil {
			return err
		}
		t.Cleanup(func() { e.Close() })
		idx = e.link.Attrs().Index
		return nil
	})
	if h.ops == nil {
		t.Skipf("no sock_ops here: %v", h.Capabilities())
	}
	return h, idx
}
