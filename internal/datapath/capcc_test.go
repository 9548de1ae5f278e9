// capcc_test.go checks the lanes congestion control on real sockets: a
// CUBIC connection that grew a large cwnd while uncapped (the receiver
// keeps up, so it is not cwnd-limited) is brought under a new socket cap
// within a short time and runs on this datapath's congestion control; a
// BBR socket stays on BBR; removing the cap lets cwnd grow again. And two
// datapaths in two namespaces register distinct names, gone after Close.
package datapath

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/testutil"
)

// bulkConn keeps writing on a TCP connection until stopped.
type bulkConn struct {
	c    *net.TCPConn
	stop atomic.Bool
	wg   sync.WaitGroup
}

func startWriting(t *testing.T, c *net.TCPConn) *bulkConn {
	b := &bulkConn{c: c}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		buf := make([]byte, 64<<10)
		for !b.stop.Load() {
			c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Write(buf); err != nil && !isTimeout(err) {
				return
			}
		}
	}()
	t.Cleanup(b.halt)
	return b
}

func (b *bulkConn) halt() { b.stop.Store(true); b.wg.Wait() }

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func tcpInfo(t *testing.T, c *net.TCPConn) (cwnd uint32, cc string) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ierr, cerr error
	raw.Control(func(fd uintptr) {
		var ti *unix.TCPInfo
		if ti, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); ierr == nil {
			cwnd = ti.Snd_cwnd
		}
		cc, cerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	if ierr != nil || cerr != nil {
		t.Fatalf("tcp_info: %v, TCP_CONGESTION: %v", ierr, cerr)
	}
	return cwnd, cc
}

// waitCwnd polls until cond(cwnd) holds or d passes; it returns how long it
// took (d+ when never) and the last cwnd.
func waitCwnd(t *testing.T, c *net.TCPConn, d time.Duration, cond func(uint32) bool) (time.Duration, uint32) {
	start := time.Now()
	for {
		cw, _ := tcpInfo(t, c)
		if cond(cw) {
			return time.Since(start), cw
		}
		if time.Since(start) > d {
			return time.Since(start), cw
		}
		time.Sleep(time.Millisecond)
	}
}

// peakCwnd returns the largest cwnd seen over d.
func peakCwnd(t *testing.T, c *net.TCPConn, d time.Duration) uint32 {
	var peak uint32
	for start := time.Now(); time.Since(start) < d; time.Sleep(time.Millisecond) {
		if cw, _ := tcpInfo(t, c); cw > peak {
			peak = cw
		}
	}
	return peak
}

// dialCC connects from ns with the given congestion control, set before
// the SYN.
func dialCC(t *testing.T, ns *testutil.NetNS, addr, cc string) *net.TCPConn {
	t.Helper()
	var c net.Conn
	dl := net.Dialer{Timeout: 3 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
		}); err != nil {
			return err
		}
		return serr
	}}
	ns.Do(t, func() (err error) { c, err = dl.Dial("tcp", addr); return err })
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

func TestCapCCBringsLargeCwndDown(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "cc1"})
	st := d.CapCC()
	if !st.Active {
		t.Skipf("lanes congestion control unavailable here: %s", st.Reason)
	}
	_, addr := startSink(t, p.B, p.AddrB, 9301)
	const cap = 8

	c := dialCC(t, p.A, addr, "cubic")
	b := startWriting(t, c)
	// Uncapped on veth, the receiver keeps up: cwnd grows into the
	// thousands and then stops growing, the socket no longer cwnd-limited
	// (CUBIC alone would now ignore a new clamp).
	time.Sleep(time.Second)
	cw, _ := tcpInfo(t, c)
	if cw < 20*cap {
		t.Fatalf("uncapped CUBIC socket reached only cwnd %d", cw)
	}
	t.Logf("uncapped: cwnd %d after 1s", cw)

	if err := d.SetSocketCwndCap(cookieOf(t, c), cap); err != nil {
		t.Fatal(err)
	}
	took, cw := waitCwnd(t, c, 2*time.Second, func(cw uint32) bool { return cw <= cap })
	if cw > cap {
		t.Fatalf("cwnd %d %v after a cap of %d", cw, took, cap)
	}
	t.Logf("capped: cwnd %d after %v", cw, took)
	if peak := peakCwnd(t, c, 300*time.Millisecond); peak > cap {
		t.Errorf("cwnd peaked at %d under a cap of %d", peak, cap)
	}
	if _, cc := tcpInfo(t, c); cc != st.Name {
		t.Errorf("capped socket's congestion control %q, want %q", cc, st.Name)
	}

	// A BBR socket is left on BBR (which applies the clamp itself).
	bb := dialCC(t, p.A, addr, "bbr")
	bw := startWriting(t, bb)
	time.Sleep(200 * time.Millisecond)
	if err := d.SetSocketCwndCap(cookieOf(t, bb), cap); err != nil {
		t.Fatal(err)
	}
	took, cw = waitCwnd(t, bb, 2*time.Second, func(cw uint32) bool { return cw <= cap })
	if _, cc := tcpInfo(t, bb); cc != "bbr" {
		t.Errorf("capped BBR socket's congestion control %q, want bbr", cc)
	}
	t.Logf("BBR capped: cwnd %d after %v", cw, took)
	bw.halt()

	// Removing the cap lets cwnd grow again.
	if err := d.SetSocketCwndCap(cookieOf(t, c), 0); err != nil {
		t.Fatal(err)
	}
	took, cw = waitCwnd(t, c, 3*time.Second, func(cw uint32) bool { return cw > 4*cap })
	if cw <= 4*cap {
		t.Errorf("cwnd %d %v after the cap was removed, want > %d", cw, took, 4*cap)
	}
	b.halt()

	s, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Sockops["cc_switch"] != 1 || s.Sockops["cc_other"] != 1 || s.Sockops["cc_switch_err"] != 0 {
		t.Errorf("sock_ops counters %v: want 1 switch, 1 other, no errors", s.Sockops)
	}
	if !s.CapCC.Active || s.CapCC.Name != st.Name {
		t.Errorf("Stats().CapCC = %+v", s.CapCC)
	}
}

func TestCapCCTwoNamespaces(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	da := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "ccna"})
	db := openIn(t, p.B, Config{Interface: p.LinkB, Instance: "ccnb"})
	sa, sb := da.CapCC(), db.CapCC()
	if !sa.Active || !sb.Active {
		t.Skipf("lanes congestion control unavailable here: %q %q", sa.Reason, sb.Reason)
	}
	if sa.Name == sb.Name {
		t.Fatalf("both datapaths use congestion control %q", sa.Name)
	}
	for _, n := range []string{sa.Name, sb.Name} {
		if ok, err := capcc.Registered(n); err != nil || !ok {
			t.Errorf("%s registered = %v, %v", n, ok, err)
		}
	}
	if err := da.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := capcc.Registered(sa.Name); ok {
		t.Errorf("%s still registered after Close", sa.Name)
	}
	if ok, _ := capcc.Registered(sb.Name); !ok {
		t.Errorf("closing A unregistered B's %s", sb.Name)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _ := capcc.Registered(sb.Name); ok {
		t.Errorf("%s still registered after Close", sb.Name)
	}
}
