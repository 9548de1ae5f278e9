// Package rt is the Go client of the lanes realtime lane: it hands UDP
// datagrams with deadlines to the lanes daemon over its unix
// SOCK_SEQPACKET socket and returns the daemon's immediate decision,
// admitted (sent by its deadline, or reported dropped) or refused with a
// Reason. The wire format is docs/realtime.md's; include/lanes_rt.h is the
// same client for C.
//
// An application hands the daemon its own UDP socket once (Attach); its
// datagrams then leave from that socket, so the receiver sees the
// application's address and port and the replies come back to it:
//
//	udp, _ := net.DialUDP("udp", nil, server)
//	c, _ := rt.Dial(rt.SocketPath())
//	c.Attach(udp)
//	res, _ := c.SendWithin(7, netip.AddrPort{}, time.Millisecond, payload) // to udp's peer
//	if !res.Admitted { ... res.Reason ... }
//	n, _ := udp.Read(reply)
//
// A Client is one connection; one request is in flight at a time (Send is
// synchronous and safe for concurrent use). Its I/O is blocking system
// calls on the calling goroutine's thread, not Go's network poller, so a
// realtime thread (runtime.LockOSThread, SCHED_FIFO) is woken by the
// reply directly. Datagrams admitted but dropped later because they would
// have been late arrive as notices, collected while waiting for replies
// and returned by Notices.
package rt

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// DefaultSocket is the daemon's default realtime socket.
const DefaultSocket = "/run/lanes/rt.sock"

// SocketPath is the environment's LANES_RT_SOCKET, or DefaultSocket.
func SocketPath() string {
	if p := os.Getenv("LANES_RT_SOCKET"); p != "" {
		return p
	}
	return DefaultSocket
}

// Limits of the wire.
const (
	MaxPayload = wire.MaxPayload // the largest datagram payload (UDP over IPv4)
	MaxSocks   = wire.MaxSocks   // sockets one Client may attach
)

// Result is the daemon's answer to one datagram.
type Result struct {
	Admitted bool
	Reason   Reason        // why it was refused (ReasonNone when admitted)
	Depth    uint32        // realtime queue length after the decision
	Slack    time.Duration // how much the whole queue may still slip
	Time     int64         // CLOCK_MONOTONIC ns of the decision (Monotonic's clock)
}

// Notice is an asynchronous report: an admitted datagram that was not sent.
type Notice struct {
	Flow, Seq uint32
	Reason    Reason
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
}

// Dial connects to the daemon's realtime socket (SocketPath, usually). When
// there is none, its error wraps ErrLaneOff or ErrNoDaemon, whose words say
// what fixes it.
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
		return nil, dialError(path, err)
	}
	return &Client{fd: fd, in: make([]byte, wire.MaxReply)}, nil
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
// class). At most MaxSocks per Client. A refusal is a *RefusedError.
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
		return 0, &RefusedError{Op: "attach", Reason: Reason(rep.Reason)}
	}
	c.sock = Sock(rep.Sock)
	return c.sock, nil
}

// Send hands one datagram with an absolute deadline (Monotonic ns, by
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

// Stats returns the daemon's counters as JSON (`lanes rt stats --json`).
func (c *Client) Stats() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rep, err := c.roundTrip(&wire.Request{Type: wire.TypeStats}, nil)
	if err != nil {
		return nil, err
	}
	if rep.Type != wire.TypeStatsOK {
		return nil, &RefusedError{Op: "stats", Reason: Reason(rep.Reason)}
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
			n, err := c.recv(unix.MSG_DONTWAIT)
			if err != nil || n == 0 {
				break
			}
			if rep, err := wire.ParseReply(c.in[:n]); err == nil && rep.Type == wire.TypeDropped {
				c.notices = append(c.notices, Notice{rep.Flow, rep.Seq, Reason(rep.Reason), int64(rep.Time)})
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
	c.mu.Unlock()
	if err != nil {
		return Result{}, err
	}
	res := Result{Admitted: rep.Type == wire.TypeAdmit, Reason: Reason(rep.Reason), Depth: rep.Depth,
		Slack: time.Duration(rep.Slack), Time: int64(rep.Time)}
	if rep.Type == wire.TypeError {
		return res, &RefusedError{Op: "send", Reason: res.Reason}
	}
	return res, nil
}

var errClosed = errors.New("realtime lane: connection closed")

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
		return wire.Reply{}, errClosed
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
		n, err := c.recv(0)
		if err != nil {
			return wire.Reply{}, fmt.Errorf("realtime lane: receive: %w", err)
		}
		if n == 0 {
			return wire.Reply{}, errClosed
		}
		rep, err := wire.ParseReply(c.in[:n])
		if err != nil {
			return wire.Reply{}, fmt.Errorf("realtime lane: %w", err)
		}
		if rep.Type == wire.TypeDropped {
			c.notices = append(c.notices, Notice{rep.Flow, rep.Seq, Reason(rep.Reason), int64(rep.Time)})
			continue
		}
		if rep.Seq == r.Seq || rep.Type == wire.TypeError && rep.Seq == 0 {
			return rep, nil
		}
	}
}

// recv reads one message; c.mu held.
func (c *Client) recv(flags int) (int, error) {
	if c.fd < 0 {
		return 0, errClosed
	}
	for {
		n, _, err := unix.Recvfrom(c.fd, c.in, flags)
		if err != unix.EINTR {
			return n, err
		}
	}
}
