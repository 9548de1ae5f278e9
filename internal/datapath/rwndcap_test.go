// rwndcap_test.go checks the cooperative downlink caps on real TCP sockets:
// a receiving socket's advertised window follows the cap the datapath is
// given (seen from the sender: the peer's window in its TCP_INFO), and
// comes back when the cap is removed.
package datapath

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/testutil"
)

// sendUntilWnd writes on c until d has passed or done(wnd) holds, with wnd
// the peer's advertised window (snd_wnd) after each write; it returns the
// largest window seen from from on.
func sendUntilWnd(t *testing.T, c *net.TCPConn, d, from time.Duration, done func(uint32) bool) uint32 {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16<<10)
	var peak, wnd uint32
	start := time.Now()
	for time.Since(start) < d {
		c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Write(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write: %v", err)
		}
		raw.Control(func(fd uintptr) {
			if ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
				wnd = ti.Snd_wnd
			}
		})
		if time.Since(start) >= from {
			peak = max(peak, wnd)
		}
		if done(wnd) {
			break
		}
	}
	return peak
}

// download is one TCP connection from a sender in p.B to a receiver in
// p.A (a download of A's), the receiver reading at once.
type download struct {
	snd, rcv *net.TCPConn
	cookie   uint64 // the receiver's socket
}

// newDownload connects B to a listener in A on port and starts A's reader.
func newDownload(t *testing.T, p *testutil.Pair, port string) *download {
	t.Helper()
	accepted := make(chan *net.TCPConn, 1)
	var ln net.Listener
	p.A.Do(t, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(p.AddrA.String(), port))
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- c.(*net.TCPConn)
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	var c net.Conn
	p.B.Do(t, func() (err error) { c, err = net.DialTimeout("tcp", ln.Addr().String(), 3*time.Second); return err })
	t.Cleanup(func() { c.Close() })
	dl := &download{snd: c.(*net.TCPConn)}
	select {
	case dl.rcv = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { dl.rcv.Close() })
	dl.cookie = cookieOf(t, dl.rcv)
	return dl
}

func TestDownlinkCaps(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	if err := sockops.HaveWindowClamp(); err != nil {
		t.Skipf("downlink caps need sock_ops TCP_WINDOW_CLAMP: %v", err)
	}
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "dl1"})
	if err := d.Caps.SetDownlinkCaps(true); err != nil {
		t.Fatal(err)
	}
	dl := newDownload(t, p, "9301")
	snd, cookie := dl.snd, dl.cookie

	const capBytes = 20_000
	// the window advertised is whole units of the window scale (at most
	// 2^14 bytes); the kernel never retracts an offered right edge, so the
	// window comes down as data arrives
	const slack = 1 << 14
	uncapped := sendUntilWnd(t, snd, 10*time.Second, 0, func(w uint32) bool { return w > 4*(capBytes+slack) })
	if uncapped <= capBytes+slack {
		t.Fatalf("uncapped receive window only %d bytes: nothing to cap", uncapped)
	}
	if err := d.Caps.SetSocketRwndCap(cookie, capBytes); err != nil {
		t.Fatal(err)
	}
	// (waited for: the window comes down as the data in flight arrives)
	sendUntilWnd(t, snd, 10*time.Second, 0, func(w uint32) bool { return w <= capBytes+slack })
	capped := sendUntilWnd(t, snd, time.Second, 0, func(uint32) bool { return false })
	if capped > capBytes+slack {
		t.Errorf("capped at %d bytes, the sender sees a window of %d (uncapped %d)", capBytes, capped, uncapped)
	}
	t.Logf("peer's window seen by the sender: %d bytes uncapped, at most %d with a %d-byte cap", uncapped, capped, capBytes)
	if err := d.Caps.SetSocketRwndCap(cookie, 0); err != nil {
		t.Fatal(err)
	}
	if got := sendUntilWnd(t, snd, 10*time.Second, 0, func(w uint32) bool { return w > 2*(capBytes+slack) }); got <= 2*(capBytes+slack) {
		t.Errorf("after the cap was removed the window stayed at %d bytes", got)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Sockops["coop_rwnd"] < 2 || st.Sockops["rwnd_err"] != 0 {
		t.Errorf("sock_ops counters %v: want >= 2 downlink cap changes, no refusals", st.Sockops)
	}
	// an unmanaged socket's cap is refused, not reported as applied
	if err := d.Caps.SetSocketRwndCap(1<<62, capBytes); !errors.Is(err, ErrSocketUnmanaged) {
		t.Errorf("cap for an unknown socket: %v", err)
	}
}
