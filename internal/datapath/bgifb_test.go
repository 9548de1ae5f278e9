// bgifb_test.go: the background non-TCP class's arrivals shaped on the
// interface's IFB (bgifb.go) on a veth: a UDP sender far above the IFB
// class's rate is held at it, none dropped by the classifier, a
// foreground flow's arrivals never cross the IFB, and the IFB goes with
// the tree.
package datapath

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestBackgroundArrivalsIfb(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "bgifb"})
	eg := d.Egress()
	if err := eg.BgArrivalShapeError(); err != nil {
		t.Skipf("no IFB on this kernel: %v", err)
	}
	idx := eg.Ifindex()
	const port, sport, fgPort = 9141, 40141, 9142
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: netipAddr(p.AddrB), DPort: port, SPort: sport, Proto: unix.IPPROTO_UDP}, lane.Background); err != nil {
		t.Fatal(err)
	}
	bg := listenUDP(t, p.A, p.AddrA, sport)
	fg := listenUDP(t, p.A, p.AddrA, sport+1)
	// the flow leaves once: the classifier records it as the class's
	p.A.Do(t, func() error {
		_, err := bg.WriteTo(make([]byte, 100), &net.UDPAddr{IP: p.AddrB, Port: port})
		return err
	})
	const rate = 250_000 // bytes/s, 2 Mbit/s
	if err := d.Background.SetBgShape(idx, Download, rate); err != nil {
		t.Fatal(err)
	}
	const dur = 1500 * time.Millisecond
	got := received(bg)
	sendFrom(t, p.B, p.AddrB, port, p.AddrA, sport, dur)
	n := <-got
	before, err := d.Background.BgShapeStats(idx, Download)
	if errors.Is(err, ErrIfbRefuses) {
		ifbRefused(t, d, idx, n)
		return
	}
	fgGot := received(fg)
	sendFrom(t, p.B, p.AddrB, fgPort, p.AddrA, sport+1, 200*time.Millisecond)
	nfg := <-fgGot
	st, err := d.Background.BgShapeStats(idx, Download)
	if err != nil {
		t.Fatal(err)
	}
	if st.Packets < before.Packets {
		t.Fatalf("ifb counters went back: %d, then %d packets", before.Packets, st.Packets)
	}
	cls, err := d.Background.BgClass(idx, Download)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("arrivals shaped at %d B/s for %v: %d bytes received, foreground %d; ifb class %+v; class %d packets, %d drops",
		rate, dur, n, nfg, st, cls.Packets, cls.Drops)
	if cls.Drops != 0 {
		t.Errorf("the classifier dropped %d packets of a shaped class", cls.Drops)
	}
	if st.Packets == 0 || st.Packets > cls.Packets {
		t.Errorf("ifb class sent %d packets of the class's %d arrivals", st.Packets, cls.Packets)
	}
	if hi := float64(rate) * (dur + time.Second).Seconds() * 1.5; float64(n) > hi {
		t.Errorf("%d bytes arrived through a %d B/s IFB class in %v, want at most %.0f", n, rate, dur, hi)
	}
	if n < rate/2 {
		testutil.TimingErrorf(t, "%d bytes arrived through a %d B/s IFB class in %v", n, rate, dur)
	}
	if nfg == 0 {
		t.Errorf("the foreground flow's arrivals did not come")
	}
	if st.Packets != before.Packets {
		t.Errorf("the foreground flow's arrivals crossed the ifb: %d packets", st.Packets-before.Packets)
	}
	// unshaped: the arrivals pass where they came
	if err := d.Background.SetBgShape(idx, Download, 0); err != nil {
		t.Fatal(err)
	}
	got = received(bg)
	sendFrom(t, p.B, p.AddrB, port, p.AddrA, sport, 100*time.Millisecond)
	<-got
	if st2, _ := d.Background.BgShapeStats(idx, Download); st2.Packets != st.Packets {
		t.Errorf("unshaped: the ifb sent %d more packets", st2.Packets-st.Packets)
	}
	// the IFB goes with the tree
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	p.A.Do(t, func() error {
		if _, err := netlink.LinkByName(BgIfbName(idx)); err == nil {
			t.Errorf("%s left after the tree closed", BgIfbName(idx))
		}
		return nil
	})
}

// ifbRefused checks the tree on a kernel whose IFB drops what the
// ingress program redirects (Linux 5.10): nothing arrived, the tree says
// why its arrivals are policed, and it shapes them no more.
func ifbRefused(t *testing.T, d *Datapath, idx, received int) {
	t.Helper()
	if received != 0 {
		t.Errorf("the IFB refused the redirects, yet %d bytes arrived", received)
	}
	if err := d.Egress().BgArrivalShapeError(); !errors.Is(err, ErrIfbRefuses) {
		t.Errorf("BgArrivalShapeError = %v, want %v", err, ErrIfbRefuses)
	}
	if err := d.Background.SetBgShape(idx, Download, 0); err == nil {
		t.Log("unshaping after the refusal: no error")
	}
	if err := d.Background.SetBgShape(idx, Download, 1_000_000); err == nil {
		t.Errorf("arrivals shaped again on an IFB the kernel refuses")
	}
	t.Logf("this kernel's IFB refuses bpf_redirect's packets: detected, the arrivals policed")
}

// listenUDP opens a UDP socket at addr:port in ns, closed at the end.
func listenUDP(t *testing.T, ns *testutil.NetNS, addr net.IP, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	ns.Do(t, func() (err error) {
		c, err = net.ListenUDP("udp", &net.UDPAddr{IP: addr, Port: port})
		return
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// received counts what c receives until 500 ms pass without a datagram
// (3 s before the first).
func received(c *net.UDPConn) chan int {
	out := make(chan int, 1)
	go func() {
		n, buf := 0, make([]byte, 2048)
		wait := 3 * time.Second // the first: a loaded machine's softirqs may run late
		for {
			_ = c.SetReadDeadline(time.Now().Add(wait))
			wait = 500 * time.Millisecond
			k, _, err := c.ReadFrom(buf)
			if err != nil {
				out <- n
				return
			}
			n += k
		}
	}()
	return out
}

// sendFrom writes 1200-byte datagrams from ns's from:sport to to:port as
// fast as the socket takes them, for dur.
func sendFrom(t *testing.T, ns *testutil.NetNS, from net.IP, sport int, to net.IP, port int, dur time.Duration) {
	t.Helper()
	ns.Do(t, func() error {
		u, err := net.DialUDP("udp", &net.UDPAddr{IP: from, Port: sport}, &net.UDPAddr{IP: to, Port: port})
		if err != nil {
			return err
		}
		defer u.Close()
		buf := make([]byte, 1200)
		for end := time.Now().Add(dur); time.Now().Before(end); {
			_, _ = u.Write(buf)
		}
		return nil
	})
}
