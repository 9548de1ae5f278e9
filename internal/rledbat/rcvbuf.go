// rcvbuf.go: the receive window through the socket's receive buffer, for
// kernels where a window clamp set mid-stream does not take effect.
//
// Before Linux 5.11 ("tcp: enable mid stream window clamp"), setting
// TCP_WINDOW_CLAMP on an established socket changes tp->window_clamp but
// not tp->rcv_ssthresh, and the window the kernel offers is bounded by
// rcv_ssthresh and the free receive buffer, not by window_clamp: the clamp
// only stops the window growing further. Measured on Debian 11's 5.10 in
// scripts/kernel-vm.sh, the daemon's rLEDBAT then set its clamps and the
// foreground probe still met the whole 600 KB remote queue.
//
// The controller finds this out per kernel from the socket itself: after
// lowering a clamp below the socket's rcv_ssthresh, TCP_INFO's
// tcpi_rcv_ssthresh is at most the clamp where the clamp takes effect
// (5.11+), and unchanged where it does not. There it also sets the receive
// buffer (SO_RCVBUFFORCE) so that the free space the kernel turns into a
// window is the clamp: the window then shrinks as the application reads,
// never retracting what was offered (data already in flight within the old
// window still fits, since the application drains it at the link's rate).
// Setting SO_RCVBUF locks the buffer (no autotuning afterwards), so a
// released socket gets the larger of its own buffer and net.ipv4.tcp_rmem's
// maximum: a background download never ends with less buffer than
// autotuning would have given it.
package rledbat

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Window mechanisms (Stats.Mode).
const (
	ModeWindowClamp   = "window_clamp"   // TCP_WINDOW_CLAMP takes effect mid-stream (5.11+)
	ModeReceiveBuffer = "receive_buffer" // before 5.11: the receive buffer as well
)

// sockMinRcvbuf is the kernel's SOCK_MIN_RCVBUF (2 KiB + an skb's
// overhead, about 2.3 KiB on x86_64): a clamp below half of it is raised.
const sockMinRcvbuf = 4608

// clampIneffective: after a clamp was set on fd, the kernel kept a larger
// rcv_ssthresh (before 5.11, where a mid-stream clamp does not bound the
// offered window). ssthBefore is the socket's rcv_ssthresh before.
//
// Receive-buffer autotuning may undo the clamp on any kernel: when the
// application's read grows sk_rcvbuf, tcp_rcv_space_adjust sets
// window_clamp from the new buffer, and the next segments raise
// rcv_ssthresh up to it. A larger rcv_ssthresh then says nothing about the
// clamp, so it counts only while the window clamp read after it is still
// the one set (autotuning only raises it; the controller sets it again at
// its next step).
func clampIneffective(fd int, clamp, ssthBefore uint32) bool {
	floor := max(clamp, sockMinRcvbuf/2)
	if ssthBefore <= floor {
		return false // nothing to lower: no evidence either way
	}
	ti, err := unix.GetsockoptTCPInfo(fd, unix.SOL_TCP, unix.TCP_INFO)
	if err != nil || ti.Rcv_ssthresh <= floor {
		return false
	}
	cur, err := unix.GetsockoptInt(fd, unix.SOL_TCP, unix.TCP_WINDOW_CLAMP)
	return err == nil && uint32(cur) <= floor
}

// rcvbufFor is the SO_RCVBUF value whose free space the kernel offers as
// a window of w bytes: the kernel doubles the value set, and offers
// space - space>>scale (net.ipv4.tcp_adv_win_scale, 1 by default: half).
func rcvbufFor(w uint32, scale int) int {
	switch {
	case scale > 0:
		// 2v (1 - 2^-scale) = w
		return int(uint64(w) << scale / (2 * (1<<scale - 1)))
	case scale < 0:
		// 2v >> -scale = w
		return int(uint64(w) << -scale / 2)
	}
	return int(w) / 2
}

// setRcvbuf sets the socket's receive buffer for a window of clamp bytes,
// remembering the buffer it had first.
func (c *Downloads) setRcvbuf(fd int, cookie uint64, s *sock, clamp uint32) error {
	if s.origRcvbuf == 0 {
		cur, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		if err != nil {
			return fmt.Errorf("SO_RCVBUF of socket %d: %w", cookie, err)
		}
		s.origRcvbuf = uint32(cur)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbufFor(clamp, c.advWinScale)); err != nil {
		return fmt.Errorf("set SO_RCVBUFFORCE of socket %d: %w", cookie, err)
	}
	return nil
}

// releaseRcvbuf gives a socket whose receive buffer was set the larger of
// its own and tcp_rmem's maximum (locked: the kernel does not autotune a
// buffer once SO_RCVBUF was set).
func (c *Downloads) releaseRcvbuf(fd int, s *sock) error {
	if s.origRcvbuf == 0 {
		return nil
	}
	back := max(int(s.origRcvbuf), c.rmemMax) / 2 // the kernel doubles it
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, back); err != nil {
		return err
	}
	s.origRcvbuf = 0
	return nil
}

// readAdvWinScale reads net.ipv4.tcp_adv_win_scale (1 where absent).
func readAdvWinScale() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_adv_win_scale")
	if err != nil {
		return 1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v < -31 || v > 31 {
		return 1
	}
	return v
}

// readRmemMax reads the maximum of net.ipv4.tcp_rmem (6 MiB where absent).
func readRmemMax() int {
	const dflt = 6 << 20
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_rmem")
	if err != nil {
		return dflt
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return dflt
	}
	v, err := strconv.Atoi(f[2])
	if err != nil || v <= 0 {
		return dflt
	}
	return v
}
