// openhold_rate_test.go: the rate a background UDP sender keeps beside
// openings that are never answered (audit N6's figure).
package datapath

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestBackgroundUDPBesideNeverAnsweredOpenings (audit N6): a user's
// non-blocking connect() every 300 ms to an address that never answers
// stopped root's background UDP (0.00 Mbit/s in each of 16 s, 8.00
// without). A background UDP sender paced at 8 Mbit/s runs 16 s in 2 s
// slots, alone and beside the openings by turns (paired: drift and load
// fall on both); the test logs its rate in each and the ratio, beside
// openings to one silent address and to a new silent address each time
// (0.04 of alone before the budget of unanswered openings, yield.h's
// lanes_fg_new_dest), and fails if either keeps under half its rate
// alone. The budget's holds all fall in the beside slots here; a
// connect() loop that never stops is held at most a tenth of the time.
func TestBackgroundUDPBesideNeverAnsweredOpenings(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, _ := openTwoEgress(t, p.A, p.LinkA)
	const port, sport = 9415, 40415
	if err := h.Lanes.SetFlowLane(FlowKey{Dst: netipAddr(p.AddrB), DPort: port, SPort: sport, Proto: unix.IPPROTO_UDP}, lane.Background); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	var pc net.PacketConn
	p.B.Do(t, func() (err error) {
		pc, err = net.ListenPacket("udp", net.JoinHostPort(p.AddrB.String(), "9415"))
		return
	})
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			got.Add(int64(k))
		}
	}()
	var u *net.UDPConn
	p.A.Do(t, func() (err error) {
		u, err = net.DialUDP("udp", &net.UDPAddr{IP: p.AddrA, Port: sport}, &net.UDPAddr{IP: p.AddrB, Port: port})
		return
	})
	t.Cleanup(func() { u.Close() })
	stop := make(chan struct{})
	sent := make(chan struct{})
	go paceUDP(u, 1_000_000, stop, sent) // 8 Mbit/s
	t.Cleanup(func() { close(stop); <-sent })

	for _, many := range []bool{false, true} {
		alone, beside := openingSlots(t, p, &got, many)
		what := "one silent address"
		if many {
			what = "a new silent address each time"
		}
		t.Logf("N6: background UDP alone %.2f Mbit/s, beside openings to %s %.2f Mbit/s: %.2f of alone",
			alone, what, beside, beside/alone)
		if beside < alone/2 {
			t.Errorf("background UDP beside never-answered openings to %s: %.2f Mbit/s, alone %.2f, want at least half",
				what, beside, alone)
		}
	}
}

// openingSlots runs 8 counted slots of 2 s by turns without and with a
// never-answered non-blocking connect() every 300 ms (to one silent
// address, or a new one each time), and returns what arrived at the
// sink in each kind of slot, in Mbit/s.
func openingSlots(t *testing.T, p *testutil.Pair, got *atomic.Int64, many bool) (alone, beside float64) {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	host := byte(99)
	open := func() {
		p.A.Do(t, func() error {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
			sa := &unix.SockaddrInet4{Port: 9416}
			copy(sa.Addr[:], p.AddrB.To4())
			sa.Addr[3] = host
			if many {
				host++
			}
			if err := unix.Connect(fd, sa); err != unix.EINPROGRESS {
				return err
			}
			return nil
		})
	}
	var bytes [2]int64
	var spent [2]time.Duration
	for slot := range 8 {
		with := slot % 2
		start, n0 := time.Now(), got.Load()
		for end := start.Add(2 * time.Second); time.Now().Before(end); {
			if with == 1 {
				open()
			}
			time.Sleep(300 * time.Millisecond)
		}
		bytes[with] += got.Load() - n0
		spent[with] += time.Since(start)
		time.Sleep(600 * time.Millisecond) // uncounted: the last opening's hold runs out
	}
	mbit := func(i int) float64 { return float64(bytes[i]) * 8 / spent[i].Seconds() / 1e6 }
	return mbit(0), mbit(1)
}

// paceUDP writes 1200-byte datagrams at rate bytes/s (in 10 ms bursts)
// until stop closes, then closes done.
func paceUDP(u *net.UDPConn, rate int, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 1200)
	start, sentBytes := time.Now(), 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for due := int(time.Since(start).Seconds() * float64(rate)); sentBytes < due; sentBytes += len(buf) {
			u.Write(buf) // a refused or dropped datagram counts as sent: the sink measures
		}
	}
}
