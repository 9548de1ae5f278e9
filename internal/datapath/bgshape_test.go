// bgshape_test.go: the background non-TCP class shaped (bgshape.go) on a
// veth: a UDP sender far above the shaper's rate is held at it, its
// excess dropped at the shaper's queue, none by the classifier, and its
// packets leave by 1:15;
// unshaped again, the class's packets leave by the background lane.
package datapath

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestBackgroundShaper(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "bgsh"})
	idx := d.Egress().Ifindex()
	const port, sport = 9131, 40131
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: netipAddr(p.AddrB), DPort: port, SPort: sport, Proto: unix.IPPROTO_UDP}, lane.Background); err != nil {
		t.Fatal(err)
	}
	var pc net.PacketConn
	p.B.Do(t, func() (err error) {
		pc, err = net.ListenPacket("udp", net.JoinHostPort(p.AddrB.String(), "9131"))
		return
	})
	t.Cleanup(func() { pc.Close() })
	received := make(chan int, 1)
	go func() {
		n, buf := 0, make([]byte, 2048)
		for {
			pc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				received <- n
				return
			}
			n += k
		}
	}()
	const rate = 250_000 // bytes/s, 2 Mbit/s
	// the class's first packet creates its state: the classifier polices
	// it from there (no rate: unpoliced)
	send(t, p, port, sport, 1, 0)
	if err := d.Background.SetBgShape(idx, Upload, rate); err != nil {
		t.Fatal(err)
	}
	const dur = 1500 * time.Millisecond
	sent := send(t, p, port, sport, 1<<20, dur)
	got := <-received
	st, err := d.Background.BgShapeStats(idx, Upload)
	if err != nil {
		t.Fatal(err)
	}
	cls, err := d.Background.BgClass(idx, Upload)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shaped at %d B/s for %v: %d bytes sent, %d received, shaper %+v, class drops %d", rate, dur, sent, got, st, cls.Drops)
	if cls.Drops != 0 {
		t.Errorf("the classifier dropped %d packets of a shaped class", cls.Drops)
	}
	if st.Bytes == 0 || st.Packets == 0 {
		t.Fatalf("nothing left by the shaper: %+v", st)
	}
	// the lane's counters hold the shaper's
	if ls, err := d.Stats(); err != nil || ls.Lanes[lane.Background].Packets < st.Packets {
		t.Errorf("background lane %+v (%v), want the shaper's %d packets in it", ls.Lanes[lane.Background], err, st.Packets)
	}
	// what arrived over the send and the drain after it: the rate over
	// at most dur + the read deadline, loosely (a loaded machine)
	if hi := float64(rate) * (dur + time.Second).Seconds() * 1.5; float64(got) > hi {
		t.Errorf("%d bytes arrived at a %d B/s shaper in %v, want at most %.0f", got, rate, dur, hi)
	}
	if got < rate/2 {
		testutil.TimingErrorf(t, "%d bytes arrived at a %d B/s shaper in %v", got, rate, dur)
	}
	// unshaped: the class leaves by the background lane's class
	if err := d.Background.SetBgShape(idx, Upload, 0); err != nil {
		t.Fatal(err)
	}
	before, _ := d.Stats()
	send(t, p, port, sport, 20, 0)
	after, _ := d.Stats()
	st2, _ := d.Background.BgShapeStats(idx, Upload)
	if st2.Packets != st.Packets {
		t.Errorf("unshaped: the shaper sent %d more packets", st2.Packets-st.Packets)
	}
	if n := after.Lanes[lane.Background].Packets - before.Lanes[lane.Background].Packets; n < 20 {
		t.Errorf("unshaped: %d packets by the background lane's class, want 20", n)
	}
}

// send writes n 1200-byte datagrams from sport to port (for at most dur
// when dur is not 0) and says how many bytes the socket took.
func send(t *testing.T, p *testutil.Pair, port, sport, n int, dur time.Duration) int {
	t.Helper()
	total := 0
	p.A.Do(t, func() error {
		u, err := net.DialUDP("udp", &net.UDPAddr{IP: p.AddrA, Port: sport}, &net.UDPAddr{IP: p.AddrB, Port: port})
		if err != nil {
			return err
		}
		defer u.Close()
		end := time.Now().Add(dur)
		buf := make([]byte, 1200)
		for i := 0; i < n && (dur == 0 || time.Now().Before(end)); i++ {
			u.SetWriteDeadline(end.Add(time.Second))
			k, err := u.Write(buf)
			if err != nil {
				break
			}
			total += k
		}
		return nil
	})
	return total
}
