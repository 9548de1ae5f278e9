// cwnd_test.go checks the cooperative controller's hooks on real TCP
// sockets: a lane cwnd cap applied by sock_ops at establishment, a
// per-socket cap (by socket cookie) applied on the next RTT callbacks and
// removed again, and SocketLane for the TCP monitor.
package datapath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// sendAndCwnd writes for d on c and returns the largest snd_cwnd seen in
// the second half of it. A write that cannot complete within a short
// deadline is no failure: the socket's buffer is full (after an uncapped
// phase it can hold megabytes that a cwnd of 3 drains slowly, the more so
// on a loaded machine), and cwnd is what is measured.
func sendAndCwnd(t *testing.T, c *net.TCPConn, d time.Duration) uint32 {
	return sendUntilCwnd(t, c, d, d/2, func(uint32) bool { return false })
}

// sendUntilCwnd writes on c until d has passed or done(peak) holds, with
// peak the largest snd_cwnd seen from from on; it returns peak.
func sendUntilCwnd(t *testing.T, c *net.TCPConn, d, from time.Duration, done func(uint32) bool) uint32 {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16<<10)
	var peak uint32
	start := time.Now()
	for time.Since(start) < d && !done(peak) {
		c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Write(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write: %v", err)
		}
		if time.Since(start) < from {
			continue
		}
		raw.Control(func(fd uintptr) {
			if ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && ti.Snd_cwnd > peak {
				peak = ti.Snd_cwnd
			}
		})
	}
	return peak
}

// tcpState is c's congestion control and TCP_INFO's window, for a
// failure's message: which path left cwnd above its cap.
func tcpState(c *net.TCPConn) string {
	raw, err := c.SyscallConn()
	if err != nil {
		return err.Error()
	}
	var out string
	raw.Control(func(fd uintptr) {
		cc, _ := unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
		ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			out = err.Error()
			return
		}
		out = fmt.Sprintf("cc %s, cwnd %d, ssthresh %d, ca_state %d, retransmits %d, total retrans %d, rtt %d us",
			cc, ti.Snd_cwnd, ti.Snd_ssthresh, ti.Ca_state, ti.Retransmits, ti.Total_retrans, ti.Rtt)
	})
	return out
}

func cookieOf(t *testing.T, c *net.TCPConn) uint64 {
	t.Helper()
	raw, _ := c.SyscallConn()
	var cookie uint64
	var serr error
	raw.Control(func(fd uintptr) { cookie, serr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE) })
	if serr != nil {
		t.Fatal(serr)
	}
	return cookie
}

func TestCwndCaps(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	// Shaped well below veth speed, so the senders are cwnd-limited.
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "cw1", Mode: Shaped, UplinkBps: 50_000_000})
	_, addr := startSink(t, p.B, p.AddrB, 9201)
	const laneCap, sockCap = 6, 3
	if err := d.Caps.SetLaneCwndCap(lane.Background, laneCap); err != nil {
		t.Fatal(err)
	}
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: netipAddr(p.AddrB), DPort: 9201, SPort: 40201}, lane.Background); err != nil {
		t.Fatal(err)
	}
	dial := func(sport int) *net.TCPConn {
		var c net.Conn
		p.A.Do(t, func() (err error) {
			dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.AddrA, Port: sport}, Timeout: 3 * time.Second}
			c, err = dl.Dial("tcp", addr)
			return err
		})
		t.Cleanup(func() { c.Close() })
		return c.(*net.TCPConn)
	}

	bg := dial(40201)
	fg := dial(40202)
	if l, ok := d.Lanes.SocketLane(cookieOf(t, bg)); !ok || l != lane.Background {
		t.Errorf("SocketLane(background socket) = %s, %v", l, ok)
	}
	if l, ok := d.Lanes.SocketLane(cookieOf(t, fg)); ok {
		t.Errorf("SocketLane(unregistered socket) = %s, want none", l)
	}
	if got := sendAndCwnd(t, bg, 600*time.Millisecond); got > laneCap {
		t.Errorf("background socket cwnd %d, lane cap %d; now %s", got, laneCap, tcpState(bg))
	}
	if got := sendAndCwnd(t, fg, 600*time.Millisecond); got <= laneCap {
		t.Logf("note: uncapped interactive socket only reached cwnd %d", got)
	}

	// Per-socket cap beats the lane cap, applied on the next RTT samples.
	if err := d.Caps.SetSocketCwndCap(cookieOf(t, bg), sockCap); err != nil {
		t.Fatal(err)
	}
	if got := sendAndCwnd(t, bg, 600*time.Millisecond); got > sockCap {
		t.Errorf("background socket cwnd %d, socket cap %d; now %s", got, sockCap, tcpState(bg))
	}
	// And on an interactive socket that had no cap at all.
	if err := d.Caps.SetSocketCwndCap(cookieOf(t, fg), sockCap); err != nil {
		t.Fatal(err)
	}
	if got := sendAndCwnd(t, fg, 600*time.Millisecond); got > sockCap {
		t.Errorf("interactive socket cwnd %d, socket cap %d", got, sockCap)
	}
	// Removing both caps lets it grow again.
	if err := d.Caps.SetSocketCwndCap(cookieOf(t, fg), 0); err != nil {
		t.Fatal(err)
	}
	// (Waited for, up to 10 s: growth is per RTT, and RTTs stretch under load.)
	if got := sendUntilCwnd(t, fg, 10*time.Second, 0, func(c uint32) bool { return c > sockCap }); got <= sockCap {
		t.Errorf("interactive socket cwnd %d after the cap was removed, want > %d", got, sockCap)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Sockops["cap_set"] < 4 || st.Sockops["setsockopt_err"] != 0 {
		t.Errorf("sock_ops counters %v: want >= 4 cap changes, no errors", st.Sockops)
	}
	t.Log(fmt.Sprint(st.Sockops))
}
