// Package rledbat runs rLEDBAT (RFC 9840) from the daemon, for kernels
// whose sock_ops may not set TCP_WINDOW_CLAMP (before 5.11: the BPF path,
// internal/bpf/sockops/rledbat.h, is then off). Same rule, same arithmetic
// (ledbat.Receiver, the Go twin of rledbat_packet), applied per sampling
// interval instead of per segment:
//
//   - every Interval (IdleInterval while there is none) the TCP monitor
//     lists the background lane's sockets (lane from the datapath's cookie
//     map) with their owning process;
//   - for each one that has received data since the last look (or whose
//     yield or downlink cap changed), the daemon duplicates the socket
//     (pidfd_open + pidfd_getfd, closed at once after use), reads
//     TCP_INFO (tcpi_rcv_rtt: the receive-side RTT from TCP timestamps,
//     bytes received, advmss, rcv_ooopack), steps the receiver and sets
//     TCP_WINDOW_CLAMP to min(window, downlink cap), or 2 segments while
//     sock_ops' foreground yield holds the socket's interface;
//   - the kernel never retracts the window it offered (tcp_select_window,
//     unless net.ipv4.tcp_shrink_window = 1, 6.5+), so a smaller clamp
//     takes effect as the application reads;
//   - a socket that leaves the background lane, and every socket when the
//     controller stops, gets its own window clamp back (the one it had
//     before, or the kernel's current one if autotuning raised it since);
//   - before 5.11 a clamp set mid-stream does not bound the offered
//     window: the controller finds that out and sets the receive buffer
//     as well (rcvbuf.go).
package rledbat

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// DefaultInterval is the sampling interval: the window follows the delay
// at most this late (the BPF path: at every segment the socket sends).
const DefaultInterval = 50 * time.Millisecond

// IdleInterval is the sampling interval while no background download is
// looked after: a new one is found this late at most (its owner within a
// second, the monitor's /proc rescan), and an idle daemon samples 5x less.
const IdleInterval = 250 * time.Millisecond

// recheck: a socket with nothing new is looked at again this often (the
// kernel's autotuning may have raised its window clamp).
const recheck = time.Second

// Host is what the controller needs of the datapath.
type Host interface {
	SocketLane(cookie uint64) (lane.Lane, bool)
	// BackgroundYielding: sock_ops' foreground yield holds background
	// sockets leaving by this interface (0: not known).
	BackgroundYielding(ifindex int) bool
	SocketRwndCap(cookie uint64) uint32 // bytes, 0 = none
}

// Config of a Downloads.
type Config struct {
	Interval time.Duration // default DefaultInterval
	Target   time.Duration // queuing-delay target (default ledbat.DefaultTargetUS)
	// Flows lists the background lane's TCP sockets with their owners
	// (PID, Inode): a tcpmon sampler filtered to lane.Background.
	Flows func() ([]tcpmon.Flow, error)
	Host  Host
	// ReceiveBuffer sets the receive buffer as well from the start, as
	// before 5.11 (tests of that path on newer kernels).
	ReceiveBuffer bool
}

// sock is one background socket the controller looks after.
type sock struct {
	r        ledbat.Receiver
	own      owner
	inode    uint32
	ifindex  int
	applied  uint32 // clamp set, bytes (0 = none yet)
	orig     uint32 // the socket's own window clamp
	recv     uint64 // bytes received at the last look
	rtt      uint32
	yield    bool
	cap      uint32
	lookedAt time.Time
	refused  bool
	// origRcvbuf: the receive buffer before the controller set it (0: not
	// set, rcvbuf.go)
	origRcvbuf uint32
}

// Stats are the controller's counters.
type Stats struct {
	Interval time.Duration `json:"interval"`
	Mode     string        `json:"mode"`     // ModeWindowClamp or ModeReceiveBuffer
	Sockets  int           `json:"sockets"`  // background downloads looked after
	Yielding int           `json:"yielding"` // of them held at the minimum window
	Set      uint64        `json:"clamps_set"`
	Released uint64        `json:"clamps_released"`
	Errors   uint64        `json:"errors"`
	Losses   uint64        `json:"losses"`
	LastErr  string        `json:"last_error,omitempty"`
	// Shrink: net.ipv4.tcp_shrink_window = 1, the kernel may retract an
	// offered window (RFC 9840 says never).
	Shrink bool `json:"shrink_window,omitempty"`
}

// Downloads runs rLEDBAT on the background lane's receiving sockets.
type Downloads struct {
	cfg    Config
	target uint32
	socks  map[uint64]*sock
	joins  uint32
	// rcvbuf: set the receive buffer too (a mid-stream clamp does not
	// take effect on this kernel, rcvbuf.go)
	rcvbuf      bool
	advWinScale int
	rmemMax     int

	mu sync.Mutex
	st Stats
}

// New returns a controller; Run drives it.
func New(cfg Config) (*Downloads, error) {
	if cfg.Flows == nil || cfg.Host == nil {
		return nil, errors.New("rledbat: no flows or host")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	target := uint32(cfg.Target / time.Microsecond)
	if target == 0 {
		target = ledbat.DefaultTargetUS
	}
	c := &Downloads{cfg: cfg, target: target, socks: map[uint64]*sock{},
		rcvbuf: cfg.ReceiveBuffer, advWinScale: readAdvWinScale(), rmemMax: readRmemMax()}
	c.st.Interval, c.st.Mode = cfg.Interval, ModeWindowClamp
	if c.rcvbuf {
		c.st.Mode = ModeReceiveBuffer
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_shrink_window"); err == nil && strings.TrimSpace(string(b)) == "1" {
		c.st.Shrink = true
	}
	return c, nil
}

// Stats returns the counters.
func (c *Downloads) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// Run steps every Interval until ctx ends, then gives every socket its
// window clamp back (IdleInterval while it looks after no socket).
func (c *Downloads) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	defer c.releaseAll()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		begin := time.Now()
		if err := c.Step(begin); err != nil {
			return err
		}
		next := c.cfg.Interval
		if len(c.socks) == 0 {
			next = max(next, IdleInterval)
		}
		t.Reset(max(next-time.Since(begin), 0))
	}
}

// Step takes one sample and applies the windows.
func (c *Downloads) Step(now time.Time) error {
	flows, err := c.cfg.Flows()
	if err != nil {
		return fmt.Errorf("rledbat: sample: %w", err)
	}
	seen := make(map[uint64]bool, len(flows))
	var errs []error
	yielding := 0
	for i := range flows {
		f := &flows[i]
		if f.Lane != lane.Background || f.BytesRecv == 0 || f.PID == 0 || f.Inode == 0 || f.Cookie == 0 {
			continue
		}
		seen[f.Cookie] = true
		s := c.socks[f.Cookie]
		if s == nil {
			s = &sock{own: owner{pid: f.PID, fd: -1}, inode: f.Inode, ifindex: routeIfindex(f.Dst)}
			c.socks[f.Cookie] = s
		}
		if err := c.look(f, s, now); err != nil {
			if errors.Is(err, errGone) {
				delete(c.socks, f.Cookie)
				continue
			}
			errs = append(errs, err)
		}
		if s.yield {
			yielding++
		}
	}
	for cookie, s := range c.socks {
		if !seen[cookie] {
			c.left(cookie, s)
		}
	}
	c.mu.Lock()
	c.st.Sockets, c.st.Yielding = len(c.socks), yielding
	if err := errors.Join(errs...); err != nil {
		c.st.Errors += uint64(len(errs))
		c.st.LastErr = err.Error()
	}
	c.mu.Unlock()
	return nil
}

// look steps one socket's receiver and applies its clamp when something
// changed since the last look.
func (c *Downloads) look(f *tcpmon.Flow, s *sock, now time.Time) error {
	yield := c.cfg.Host.BackgroundYielding(s.ifindex)
	capB := c.cfg.Host.SocketRwndCap(f.Cookie)
	if s.refused || (f.BytesRecv == s.recv && f.RcvRTT == s.rtt && yield == s.yield && capB == s.cap && now.Sub(s.lookedAt) < recheck) {
		return nil
	}
	s.recv, s.rtt, s.yield, s.cap, s.lookedAt = f.BytesRecv, f.RcvRTT, yield, capB, now
	fd, err := s.own.dup(f.Cookie, s.inode)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ti, err := unix.GetsockoptTCPInfo(fd, unix.SOL_TCP, unix.TCP_INFO)
	if err != nil {
		return fmt.Errorf("TCP_INFO of socket %d: %w", f.Cookie, err)
	}
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // tcp_mstamp's clock
	st := s.r.Step(ledbat.RecvSample{NowUS: uint64(ts.Nano()) / 1000, RcvNxt: uint32(ti.Bytes_received),
		AdvMSS: ti.Advmss, RTTUS: ti.Rcv_rtt, OOO: ti.Rcv_ooopack}, c.target, &c.joins)
	if !st.Timed {
		return nil
	}
	if st.Loss {
		c.mu.Lock()
		c.st.Losses++
		c.mu.Unlock()
	}
	return c.apply(fd, f.Cookie, s, ledbat.RecvClamp(s.r.Wnd, st.MSS, capB, yield), ti.Rcv_ssthresh)
}

// apply sets the socket's window clamp to clamp when it differs from the
// last one set, or when autotuning raised the kernel's above it; ssth is
// the socket's rcv_ssthresh before.
func (c *Downloads) apply(fd int, cookie uint64, s *sock, clamp, ssth uint32) error {
	cur, err := unix.GetsockoptInt(fd, unix.SOL_TCP, unix.TCP_WINDOW_CLAMP)
	if err != nil {
		return fmt.Errorf("TCP_WINDOW_CLAMP of socket %d: %w", cookie, err)
	}
	switch {
	case s.applied == 0:
		s.orig = uint32(cur)
	case uint32(cur) > s.applied && uint32(cur) > s.orig:
		s.orig = uint32(cur) // autotuning grew the socket's own clamp
	}
	if clamp == s.applied && uint32(cur) <= clamp {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_TCP, unix.TCP_WINDOW_CLAMP, int(clamp)); err != nil {
		s.refused = true // leave this socket's window alone
		return fmt.Errorf("set TCP_WINDOW_CLAMP of socket %d: %w", cookie, err)
	}
	s.applied = clamp
	if !c.rcvbuf && clampIneffective(fd, clamp, ssth) {
		c.rcvbuf = true
		c.mu.Lock()
		c.st.Mode = ModeReceiveBuffer
		c.mu.Unlock()
	}
	if c.rcvbuf {
		if err := c.setRcvbuf(fd, cookie, s, clamp); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.st.Set++
	c.mu.Unlock()
	return nil
}

// left handles a socket missing from the background sample: closed (its
// state goes), moved to another lane (its clamp is released), or not
// reported this time (kept).
func (c *Downloads) left(cookie uint64, s *sock) {
	if l, ok := c.cfg.Host.SocketLane(cookie); ok && l == lane.Background {
		return
	}
	c.release(cookie, s)
	delete(c.socks, cookie)
}

// release gives a socket its own window clamp back.
func (c *Downloads) release(cookie uint64, s *sock) {
	if s.applied == 0 {
		return
	}
	fd, err := s.own.dup(cookie, s.inode)
	if err != nil {
		return // closed: nothing to release
	}
	defer unix.Close(fd)
	cur, err := unix.GetsockoptInt(fd, unix.SOL_TCP, unix.TCP_WINDOW_CLAMP)
	if err != nil {
		return
	}
	back := s.orig
	if uint32(cur) != s.applied { // autotuning moved it since: the larger
		back = max(back, uint32(cur))
	}
	if err := c.releaseRcvbuf(fd, s); err != nil {
		return
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_TCP, unix.TCP_WINDOW_CLAMP, int(back)); err == nil {
		s.applied = 0
		c.mu.Lock()
		c.st.Released++
		c.mu.Unlock()
	}
}

func (c *Downloads) releaseAll() {
	for cookie, s := range c.socks {
		c.release(cookie, s)
		delete(c.socks, cookie)
	}
	c.mu.Lock()
	c.st.Sockets, c.st.Yielding = 0, 0
	c.mu.Unlock()
}

// routeIfindex is the interface the kernel routes dst ("addr:port") by,
// 0 if not known (the socket then follows a yield on any interface).
func routeIfindex(dst string) int {
	ap, err := netip.ParseAddrPort(dst)
	if err != nil {
		return 0
	}
	rs, err := netlink.RouteGet(ap.Addr().Unmap().AsSlice())
	if err != nil || len(rs) == 0 {
		return 0
	}
	return rs[0].LinkIndex
}
