// Package rtclient is the Go client of the realtime lane: it hands datagrams
// with deadlines to the lanes daemon over its unix SOCK_SEQPACKET socket and
// returns the daemon's immediate admit/reject decision (docs/realtime.md).
// An application hands the daemon its own UDP socket once (Attach); its
// datagrams then leave from that socket, so replies come back to it.
//
//	udp, _ := net.DialUDP("udp", nil, server)
//	c, _ := rtclient.Dial(rtclient.DefaultSocket)
//	c.Attach(udp)
//	res, _ := c.SendWithin(7, netip.AddrPort{}, time.Millisecond, payload) // to udp's peer
//	if !res.Admitted { ... res.Reason ... }
//	n, _ := udp.Read(reply)
//
// One request is in flight at a time per Client (Send is synchronous and
// safe for concurrent use). I/O is plain blocking syscalls on the calling
// thread, so a realtime thread (SCHED_FIFO, locked) is woken by the reply
// directly, not through Go's network poller. Packets admitted but dropped later because they
// would have been late arrive as notices, collected while waiting for
// replies and returned by Notices.
package rtclient

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"time"
	_ "unsafe" // go:linkname

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// DefaultSocket is the daemon's default realtime socket.
const DefaultSocket = "/run/lanes/rt.sock"

// Monotonic is CLOCK_MONOTONIC in ns, the clock of absolute deadlines:
// the runtime's nanotime, which reads exactly that clock through the vDSO
// (no system call).
func Monotonic() int64 { return nanotime() }

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Result is the daemon's answer to one datagram.
type Result struct {
	Admitted bool
	Reason   uint8         // wire.Reason*; wire.ReasonString names it
	Depth    uint32        // realtime queue length after the decision
	Slack    time.Duration // how much the whole queue may still slip
	Time     int64         // CLOCK_MONOTONIC ns of the decision
}

// ReasonString names Reason.
func (r Result) ReasonString() string { return wire.ReasonString(r.Reason) }

// Notice is an asynchronous report: an admitted datagram that was not sent.
type Notice struct {
	Flow, Seq uint32
	Reason    uint8
	Time      int64
}

// Sock names a socket datagrams leave from: DaemonSocket, or one Attach
// returned.
type Sock uint16

// DaemonSocket is the daemon's own UDP socket: the receiver sees the
// daemon's address and port.
const DaemonSocket Sock = 0

// Client is one connection to the daemon.
type Client struct {
	mu      sync.Mutex
	fd      int
	sock    Sock // where Send, SendWithin and SendRelative send from
	seq     uint32
	out     []byte
	in      []byte
	notices []Notice
	ticked  int64 // the last yield (freshTick)
}

// Dial connects to the daemon's realtime socket.
func Dial(path string) (*Client, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("realtime lane: socket: %w", err)
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("realtime lane %s: %w", path, err)
	}
	return &Client{fd: fd, in: make([]byte, wire.ReplySize+1<<20)}, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	_ = unix.Shutdown(c.fd, unix.SHUT_RDWR) // wakes a Send blocked in another goroutine
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// Attach hands the daemon the UDP socket conn (a *net.UDPConn, connected or
// not, IPv4 or IPv6, of the daemon's network namespace) and makes it the
// socket Send, SendWithin and SendRelative send from. The daemon keeps its
// own copy of the descriptor until this Client is closed; conn stays the
// application's to read replies from (and to send on directly, in its own
// class). At most wire.MaxSocks per Client.
func (c *Client) Attach(conn syscall.Conn) (Sock, error) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("realtime lane: attach: %w", err)
	}
	var s Sock
	var aerr error
	if err := rc.Control(func(fd uintptr) { s, aerr = c.AttachFD(int(fd)) }); err != nil {
		return 0, fmt.Errorf("realtime lane: attach: %w", err)
	}
	return s, aerr
}

// AttachFD is Attach for a descriptor (the daemon gets a duplicate; fd
// stays the caller's).
func (c *Client) AttachFD(fd int) (Sock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rep, err := c.roundTrip(&wire.Request{Type: wire.TypeAttach}, unix.UnixRights(fd))
	if err != nil {
		return 0, err
	}
	if rep.Type != wire.TypeAttached {
		return 0, fmt.Errorf("realtime lane: attach refused: %s", wire.ReasonString(rep.Reason))
	}
	c.sock = Sock(rep.Sock)
	return c.sock, nil
}

// Send hands one datagram with an absolute deadline (CLOCK_MONOTONIC ns, by
// which its transmission must be complete) to the daemon. dst unset (the
// zero AddrPort) sends to the peer of the attached connected socket.
func (c *Client) Send(flow uint32, dst netip.AddrPort, deadline int64, payload []byte) (Result, error) {
	return c.do(&wire.Request{Type: wire.TypeSend, Flow: flow, Deadline: uint64(deadline), Dst: dst, Payload: payload}, true)
}

// SendOn is Send from socket s (DaemonSocket, or one Attach returned).
func (c *Client) SendOn(s Sock, flow uint32, dst netip.AddrPort, deadline int64, payload []byte) (Result, error) {
	return c.do(&wire.Request{Type: wire.TypeSend, Sock: uint16(s), Flow: flow, Deadline: uint64(deadline), Dst: dst, Payload: payload}, false)
}

// SendWithin sends with a deadline d from now (taken before the request is
// written, so the socket hop counts against it).
func (c *Client) SendWithin(flow uint32, dst netip.AddrPort, d time.Duration, payload []byte) (Result, error) {
	return c.Send(flow, dst, Monotonic()+int64(d), payload)
}

// SendRelative sends with a deadline of us microseconds after the daemon
// receives the request (the wire's relative form).
func (c *Client) SendRelative(flow uint32, dst netip.AddrPort, us uint64, payload []byte) (Result, error) {
	return c.do(&wire.Request{Type: wire.TypeSend, Flags: wire.FlagRelative, Flow: flow, Deadline: us, Dst: dst, Payload: payload}, true)
}

// Stats returns the daemon's counters as JSON.
func (c *Client) Stats() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rep, err := c.roundTrip(&wire.Request{Type: wire.TypeStats}, nil)
	if err != nil {
		return nil, err
	}
	if rep.Type != wire.TypeStatsOK {
		return nil, fmt.Errorf("realtime lane: stats: reply type %#x (%s)", rep.Type, wire.ReasonString(rep.Reason))
	}
	return append([]byte(nil), rep.Body...), nil
}

// Notices returns and forgets the drop notices received so far; with poll
// it first reads any that are waiting on the socket without blocking.
func (c *Client) Notices(poll bool) []Notice {
	c.mu.Lock()
	defer c.mu.Unlock()
	if poll {
		for {
			n, _, err := c.recv(unix.MSG_DONTWAIT)
			if err != nil || n == 0 {
				break
			}
			if rep, err := wire.ParseReply(c.in[:n]); err == nil && rep.Type == wire.TypeDropped {
				c.notices = append(c.notices, Notice{rep.Flow, rep.Seq, rep.Reason, int64(rep.Time)})
			}
		}
	}
	out := c.notices
	c.notices = nil
	return out
}

// do runs one datagram request; attached: from the attached socket.
func (c *Client) do(r *wire.Request, attached bool) (Result, error) {
	c.mu.Lock()
	if attached {
		r.Sock = uint16(c.sock)
	}
	rep, err := c.roundTrip(r, nil)
	yield := c.tickStale()
	c.mu.Unlock()
	if yield {
		runtime.Gosched() // after the reply, off the path
	}
	if err != nil {
		return Result{}, err
	}
	res := Result{Admitted: rep.Type == wire.TypeAdmit, Reason: rep.Reason, Depth: rep.Depth,
		Slack: time.Duration(rep.Slack), Time: int64(rep.Time)}
	if rep.Type == wire.TypeError {
		return res, fmt.Errorf("realtime lane: %s", wire.ReasonString(rep.Reason))
	}
	return res, nil
}

var errShort = errors.New("realtime lane: connection closed")

// roundTrip writes r (with the control data oob: descriptors) and reads
// until the reply of its sequence number, stashing notices; c.mu held.
// An attach goes with sequence number 0, so that the datagrams and stats
// requests are numbered 1, 2, ... whether or not a socket was attached
// (the lab matches the lane's trace to its records by that number).
func (c *Client) roundTrip(r *wire.Request, oob []byte) (wire.Reply, error) {
	if r.Type != wire.TypeAttach {
		c.seq++
		r.Seq = c.seq
	}
	if c.fd < 0 {
		return wire.Reply{}, errShort
	}
	c.out = wire.AppendRequest(c.out[:0], r)
	for {
		err := unix.Sendmsg(c.fd, c.out, oob, nil, unix.MSG_NOSIGNAL)
		if err == nil {
			break
		}
		if err != unix.EINTR {
			return wire.Reply{}, fmt.Errorf("realtime lane: send: %w", err)
		}
	}
	for {
		n, _, err := c.recv(0)
		if err != nil {
			return wire.Reply{}, fmt.Errorf("realtime lane: receive: %w", err)
		}
		if n == 0 {
			return wire.Reply{}, errShort
		}
		rep, err := wire.ParseReply(c.in[:n])
		if err != nil {
			return wire.Reply{}, fmt.Errorf("realtime lane: %w", err)
		}
		if rep.Type == wire.TypeDropped {
			c.notices = append(c.notices, Notice{rep.Flow, rep.Seq, rep.Reason, int64(rep.Time)})
			continue
		}
		if rep.Seq == r.Seq || rep.Type == wire.TypeError && rep.Seq == 0 {
			return rep, nil
		}
	}
}

// freshTickEvery is the longest a client goes without a yield (ns).
const freshTickEvery = 4_000_000

// tickStale reports whether the calling goroutine should yield after a
// reply, the last yield being freshTickEvery or more ago, and if so counts
// the yield as done now; c.mu held. A realtime client is
// typically a locked goroutine that only ever blocks in system calls (its
// sleep, Send), so its P's schedtick never moves, and once it has not
// moved for 10 ms Go's sysmon takes the P at each pass that finds the
// goroutine in a system call, sleeps deeply, and is woken again by the
// client's next return from one; it then runs at normal priority on
// another CPU, often the one where the daemon's reader is to be woken by
// the client's next request, which then needs a reschedule IPI instead of
// finding an idle CPU (docs/realtime.md, "Keeping the schedtick fresh"). A yield moves the
// tick; on a locked goroutine it is a hand-off through another thread,
// done here after the reply, not before the request.
func (c *Client) tickStale() bool {
	now := Monotonic()
	if now-c.ticked < freshTickEvery {
		return false
	}
	c.ticked = now
	return true
}

// recv reads one message; c.mu held.
func (c *Client) recv(flags int) (int, int, error) {
	if c.fd < 0 {
		return 0, 0, errShort
	}
	for {
		n, _, err := unix.Recvfrom(c.fd, c.in, flags)
		if err != unix.EINTR {
			return n, 0, err
		}
	}
}
