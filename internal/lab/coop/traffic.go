// traffic.go: the bed's traffic: bulk uploads and downloads between a host
// and the server (paced, bound to the host's address, each with its socket
// cookie for the daemon's flows), and the paced streams of the apps
// experiment with their sink.
package coop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lane"
)

// upload is one in-process TCP upload from a host.
type upload struct {
	conn   net.Conn
	cookie uint64
	start  time.Time
	end    atomic.Int64 // unix ns when the last byte was written and acked (0: running)
	done   chan struct{}
}

// dialServer connects host h to the server's port. On a lanes host with a
// lane, the connection's 3-tuple is registered with the host's daemon
// between bind and connect, as an application does through the API: only a
// registration that exists at connect reaches the socket's own lane entry
// (sock_ops resolves a socket's lane once, at connect), which the coop
// controller's per-lane rules and caps read; one registered after connect
// still steers its packets (the classifier's 3-tuple lookup) but not those.
func (cb *coopBed) dialServer(ctx context.Context, h *coopHost, port int, l lane.Lane) (net.Conn, error) {
	server := netip.AddrPortFrom(cb.server.Addr, uint16(port))
	d := net.Dialer{Timeout: 10 * time.Second}
	// The host's congestion control is set on the socket: the namespace's
	// default may not take it (a namespace may default only to a CC in the
	// machine's tcp_allowed_congestion_control, e.g. "reno bbr"), and then
	// these uploads ran the machine's default (BBR, whose ProbeRTT put every
	// flow at cwnd 4 for ~0.5 s every ~10.6 s: docs/lab.md).
	d.Control = func(_, _ string, rc syscall.RawConn) error {
		return testbed.SetCC(rc, cb.cfg.CC)
	}
	if h.api != nil && l != lane.Unset {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			if err := testbed.SetCC(rc, cb.cfg.CC); err != nil {
				return err
			}
			var sport int
			var err error
			if cerr := rc.Control(func(fd uintptr) { sport, err = bindAnyPort(int(fd)) }); cerr != nil {
				return cerr
			}
			if err != nil {
				return err
			}
			f := api.Flow{Dst: server.Addr().String(), DPort: server.Port(), SPort: uint16(sport), Proto: "tcp"}
			if err := h.api.Register(f, l); err != nil {
				return fmt.Errorf("register %s in lane %s: %w", f, l, err)
			}
			return nil
		}
	}
	var c net.Conn
	err := h.node.Do(func() (err error) {
		c, err = d.DialContext(ctx, "tcp4", server.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: dial %s: %w", h.node.Name, server, err)
	}
	cb.track(c)
	return c, nil
}

// bindAnyPort binds an IPv4 socket to an ephemeral port and returns it.
func bindAnyPort(fd int) (int, error) {
	if err := unix.Bind(fd, &unix.SockaddrInet4{}); err != nil {
		return 0, fmt.Errorf("bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return 0, fmt.Errorf("getsockname: not IPv4: %T", sa)
	}
	return in4.Port, nil
}

// startUpload dials the server's port from host i and writes size bytes
// (0 = until stopped) as fast as TCP goes, in lane l (with lanes).
func (cb *coopBed) startUpload(ctx context.Context, i int, port int, size int64, l lane.Lane) (*upload, error) {
	c, err := cb.dialServer(ctx, cb.hosts[i], port, l)
	if err != nil {
		return nil, err
	}
	u := &upload{conn: c, start: time.Now(), done: make(chan struct{})}
	u.cookie = socketCookie(c)
	go func() {
		defer close(u.done)
		buf := make([]byte, 64<<10)
		var sent int64
		for ctx.Err() == nil && (size == 0 || sent < size) {
			k := int64(len(buf))
			if size > 0 && size-sent < k {
				k = size - sent
			}
			n, err := c.Write(buf[:k])
			sent += int64(n)
			if err != nil {
				return
			}
		}
		if size > 0 && sent >= size {
			waitDrained(c)
			u.end.Store(time.Now().UnixNano())
			c.Close()
		}
	}()
	return u, nil
}

// sendDown sends to a downloading host until it goes, with the hosts'
// congestion control set on the server's socket (the sender's).
func (cb *coopBed) sendDown(c net.Conn) {
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			_ = testbed.SetCC(rc, cb.cfg.CC)
			if cb.cfg.ServerPacing {
				_ = enablePacing(rc)
			}
		}
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// startDownload has host i download from the server until stopped; the
// host counts what it receives (its goodput).
func (cb *coopBed) startDownload(ctx context.Context, i int) (*upload, error) {
	h := cb.hosts[i]
	c, err := cb.dialServer(ctx, h, coopDownPort, lane.Unset)
	if err != nil {
		return nil, err
	}
	u := &upload{conn: c, start: time.Now(), done: make(chan struct{})}
	u.cookie = socketCookie(c)
	go func() {
		defer close(u.done)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			h.bytes.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	return u, nil
}

// startFlow starts host i's endless transfer in the bed's direction.
func (cb *coopBed) startFlow(ctx context.Context, i int) (*upload, error) {
	if cb.cfg.Down {
		return cb.startDownload(ctx, i)
	}
	return cb.startUpload(ctx, i, coopBulkPort, 0, lane.Unset)
}

// startFlows starts the endless transfers of several hosts at once.
func (cb *coopBed) startFlows(ctx context.Context, hosts []int) ([]*upload, error) {
	if !cb.cfg.Down {
		return cb.startUploads(ctx, hosts, 0, lane.Unset)
	}
	ups := make([]*upload, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for k, i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ups[k], errs[k] = cb.startDownload(ctx, i)
		}()
	}
	wg.Wait()
	return ups, errors.Join(errs...)
}

// startUploads starts endless (size 0) or sized uploads from several hosts
// at once (dialled in parallel, so no host gets a head start of handshakes).
func (cb *coopBed) startUploads(ctx context.Context, hosts []int, size int64, l lane.Lane) ([]*upload, error) {
	ups := make([]*upload, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for k, i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ups[k], errs[k] = cb.startUpload(ctx, i, coopBulkPort, size, l)
		}()
	}
	wg.Wait()
	return ups, errors.Join(errs...)
}

// enablePacing turns on TCP's internal pacing of a socket: any finite
// SO_MAX_PACING_RATE marks it as needing pacing (tcp_needs_internal_pacing),
// and the kernel then paces at its own rate (1.2 x cwnd / srtt in
// congestion avoidance) under this very high ceiling.
func enablePacing(rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, 1<<40)
	}); err != nil {
		return err
	}
	return serr
}

// socketCookie reads SO_COOKIE (0 if unavailable).
func socketCookie(c net.Conn) uint64 {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	ck, err := datapath.SocketCookie(sc)
	if err != nil {
		return 0
	}
	return ck
}

// waitDrained waits until the socket has no unsent or unacknowledged data
// (SIOCOUTQ = 0), so a transfer's end is when the server has it all.
func waitDrained(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	for i := 0; i < 6000; i++ {
		q := 0
		_ = rc.Control(func(fd uintptr) { q, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
		if q == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends an endless upload (closing its socket at once).
func (u *upload) stop() {
	if tc, ok := u.conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	u.conn.Close()
	<-u.done
}

// streamSink receives timestamped chunks of CBR streams and records each
// chunk's delivery delay (all namespaces share one clock).
type streamSink struct {
	mu     sync.Mutex
	delays []float64 // ms, in arrival order
	times  []float64 // arrival, unix s
}

func (s *streamSink) serve(c net.Conn) {
	defer c.Close()
	hdr := make([]byte, 12)
	body := make([]byte, 64<<10)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		sent := int64(beUint64(hdr[:8]))
		n := int(beUint32(hdr[8:12]))
		if n > len(body) {
			return
		}
		if _, err := io.ReadFull(c, body[:n]); err != nil {
			return
		}
		now := time.Now()
		s.mu.Lock()
		s.delays = append(s.delays, float64(now.UnixNano()-sent)/1e6)
		s.times = append(s.times, float64(now.UnixNano())/1e9)
		s.mu.Unlock()
	}
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, x := range b[:8] {
		v = v<<8 | uint64(x)
	}
	return v
}

func beUint32(b []byte) uint32 {
	var v uint32
	for _, x := range b[:4] {
		v = v<<8 | uint32(x)
	}
	return v
}

func putBE(b []byte, v uint64, n int) {
	for i := n - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// startStream sends a constant-bit-rate stream from host i: one chunk of
// chunk bytes every chunk*8/rate seconds, each stamped with its intended
// send time (so a chunk held back by the socket counts as late).
func (cb *coopBed) startStream(ctx context.Context, i int, rate float64, chunk int, l lane.Lane) (*upload, error) {
	c, err := cb.dialServer(ctx, cb.hosts[i], coopStreamPort, l)
	if err != nil {
		return nil, err
	}
	u := &upload{conn: c, start: time.Now(), done: make(chan struct{})}
	u.cookie = socketCookie(c)
	period := time.Duration(float64(chunk*8) / rate * 1e9)
	go func() {
		defer close(u.done)
		msg := make([]byte, 12+chunk)
		next := time.Now()
		for ctx.Err() == nil {
			putBE(msg[:8], uint64(next.UnixNano()), 8)
			putBE(msg[8:12], uint64(chunk), 4)
			if _, err := c.Write(msg); err != nil {
				return
			}
			next = next.Add(period)
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
	}()
	return u, nil
}
