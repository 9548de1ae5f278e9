// rledbat_test.go: the controller on a real loopback download of this test
// process (pidfd_getfd on oneself needs no privilege): it sets the
// receiver's window clamp to rLEDBAT's window, to 2 segments while the
// yield holds the socket, to the downlink cap when smaller, and gives the
// socket its own clamp back when it leaves the background lane and when
// the controller stops.
package rledbat

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// testHost is the datapath's answers, set by the test.
type testHost struct {
	mu    sync.Mutex
	lane  lane.Lane
	yield bool
	cap   uint32
}

func (h *testHost) SocketLane(uint64) (lane.Lane, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lane, true
}
func (h *testHost) BackgroundYielding(int) bool { h.mu.Lock(); defer h.mu.Unlock(); return h.yield }
func (h *testHost) SocketRwndCap(uint64) uint32 { h.mu.Lock(); defer h.mu.Unlock(); return h.cap }

// download connects to a loopback server that sends without end and
// reads until the test ends; it returns the receiving socket.
func download(t *testing.T) *net.TCPConn {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.DialTCP("tcp4", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go io.Copy(io.Discard, c)
	return c
}

// flowOf is the monitor's view of the socket: what the controller reads
// from a sample.
func flowOf(t *testing.T, c *net.TCPConn, l lane.Lane) tcpmon.Flow {
	t.Helper()
	rc, _ := c.SyscallConn()
	var f tcpmon.Flow
	rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		unix.Fstat(int(fd), &st)
		cookie, _ := unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
		ti, _ := unix.GetsockoptTCPInfo(int(fd), unix.SOL_TCP, unix.TCP_INFO)
		f = tcpmon.Flow{Cookie: cookie, Lane: l, PID: os.Getpid(), Inode: uint32(st.Ino), Dst: c.RemoteAddr().String(),
			BytesRecv: ti.Bytes_received, RcvRTT: ti.Rcv_rtt}
	})
	return f
}

func windowClamp(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, _ := c.SyscallConn()
	var v int
	var err error
	rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.SOL_TCP, unix.TCP_WINDOW_CLAMP) })
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestControllerClampsYieldsAndReleases(t *testing.T) {
	c := download(t)
	h := &testHost{lane: lane.Background}
	var l lane.Lane = lane.Background
	var mu sync.Mutex
	ctl, err := New(Config{Host: h, Flows: func() ([]tcpmon.Flow, error) {
		mu.Lock()
		defer mu.Unlock()
		return []tcpmon.Flow{flowOf(t, c, l)}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	own := windowClamp(t, c)
	// step until the socket has a receive RTT sample and a window
	var s *sock
	for i := 0; i < 200; i++ {
		if err := ctl.Step(time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, x := range ctl.socks {
			s = x
		}
		if s != nil && s.applied != 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s == nil || s.applied == 0 {
		t.Fatalf("no clamp applied after 2 s: %+v", ctl.Stats())
	}
	mss := uint32(s.applied / s.r.Wnd)
	if got := windowClamp(t, c); uint32(got) != s.applied || s.applied != s.r.Wnd*mss {
		t.Fatalf("window clamp %d; want rLEDBAT's %d packets x %d = %d", got, s.r.Wnd, mss, s.applied)
	}
	t.Logf("own clamp %d, rLEDBAT window %d x %d bytes (rcv_rtt %d us)", own, s.r.Wnd, mss, s.rtt)

	h.mu.Lock()
	h.yield = true
	h.mu.Unlock()
	ctl.Step(time.Now())
	if got := windowClamp(t, c); uint32(got) != ledbat.RecvClamp(s.r.Wnd, mss, 0, true) {
		t.Fatalf("yielding: window clamp %d; want %d", got, 2*mss)
	}
	h.mu.Lock()
	h.yield, h.cap = false, 3*mss
	h.mu.Unlock()
	ctl.Step(time.Now())
	if got := windowClamp(t, c); uint32(got) != 3*mss {
		t.Fatalf("downlink cap: window clamp %d; want %d", got, 3*mss)
	}

	// leaves the background lane: its own clamp comes back
	mu.Lock()
	l = lane.Interactive
	mu.Unlock()
	h.mu.Lock()
	h.lane = lane.Interactive
	h.mu.Unlock()
	ctl.Step(time.Now())
	if got := windowClamp(t, c); got < own {
		t.Fatalf("after leaving the lane: window clamp %d; want its own %d back", got, own)
	}
	if st := ctl.Stats(); st.Released != 1 || st.Sockets != 0 {
		t.Fatalf("stats %+v; want 1 released, 0 sockets", st)
	}
}

func TestControllerReleasesOnStop(t *testing.T) {
	c := download(t)
	h := &testHost{lane: lane.Background}
	ctl, err := New(Config{Host: h, Interval: 10 * time.Millisecond, Flows: func() ([]tcpmon.Flow, error) {
		return []tcpmon.Flow{flowOf(t, c, lane.Background)}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	own := windowClamp(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for ctl.Stats().Set == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ctl.Stats().Set == 0 {
		t.Fatalf("no clamp set: %+v", ctl.Stats())
	}
	if got := windowClamp(t, c); got < own {
		t.Fatalf("after stop: window clamp %d; want its own %d back", got, own)
	}
}
