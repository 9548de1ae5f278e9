// connector.go: the netlink process-events connector (CONFIG_PROC_EVENTS).
// The kernel multicasts a message for every fork, exec, comm change and exit;
// we join group CN_IDX_PROC, send PROC_CN_MCAST_LISTEN and decode:
//
//	nlmsghdr (16) | cn_msg: id.idx id.val seq ack len flags (20) |
//	proc_event: what cpu timestamp_ns(u64) | union (fork: 4 x pid, exec/exit: 2 x pid, comm: 2 x pid + comm[16])
//
// timestamp_ns is ktime_get_ns(), i.e. CLOCK_MONOTONIC, which lets us
// measure the reaction time from exec to applied policy.
package sched

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	cnIdxProc = 1
	cnValProc = 1

	procCnMcastListen = 1
	procCnMcastIgnore = 2

	procEventFork = 0x00000001
	procEventExec = 0x00000002
	procEventComm = 0x00000200
	procEventExit = 0x80000000

	nlHdrLen    = 16
	cnMsgLen    = 20
	evHeaderLen = 16
)

// Event is one decoded process event.
type Event struct {
	What      uint32
	TimeNS    uint64 // CLOCK_MONOTONIC of the event
	PID, TGID int    // the process (exec, comm, exit) or the child (fork)
	ParentPID int    // fork only
	ParentTG  int    // fork only
	Comm      string // comm only
}

func (e Event) String() string {
	switch e.What {
	case procEventFork:
		return fmt.Sprintf("fork %d/%d -> %d/%d", e.ParentTG, e.ParentPID, e.TGID, e.PID)
	case procEventExec:
		return fmt.Sprintf("exec %d/%d", e.TGID, e.PID)
	case procEventComm:
		return fmt.Sprintf("comm %d/%d %q", e.TGID, e.PID, e.Comm)
	case procEventExit:
		return fmt.Sprintf("exit %d/%d", e.TGID, e.PID)
	}
	return fmt.Sprintf("event %#x", e.What)
}

// Connector is an open proc-connector socket.
type Connector struct {
	fd  int
	buf []byte
}

// OpenConnector subscribes to process events (needs CAP_NET_ADMIN).
func OpenConnector() (*Connector, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("proc connector socket (%s): %w", connectorHint(err), err)
	}
	c := &Connector{fd: fd, buf: make([]byte, 64*1024)}
	// A burst of forks must not overflow us; ask for a large receive buffer.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc, Pid: 0}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("proc connector bind (%s): %w", connectorHint(err), err)
	}
	if err := c.control(procCnMcastListen); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("proc connector listen (%s): %w", connectorHint(err), err)
	}
	return c, nil
}

// ErrConnectorNamespace: the proc connector has no kernel end in this
// network namespace. The kernel creates it in the initial one only, so a
// daemon in any other namespace gets no process events from it, whatever
// the kernel was built with.
var ErrConnectorNamespace = errors.New("this network namespace is not the initial one, the only one the kernel sends process events to")

// procEventsBuiltOut: a kernel configured without CONFIG_PROC_EVENTS
// (CONFIG_CONNECTOR alone) accepts the listen request and never sends an
// event, so its config is read first; an unreadable config (cfg empty)
// leaves the connector to be tried.
func procEventsBuiltOut(cfg map[string]string) error {
	if len(cfg) > 0 && cfg["CONFIG_PROC_EVENTS"] != "y" {
		return errors.New("the kernel's config has no CONFIG_PROC_EVENTS: the proc connector sends no process events")
	}
	return nil
}

// connectorHint says why the connector refused, from the error itself:
// the listen request's ECONNREFUSED is a namespace without the kernel's
// connector socket (the initial namespace's /proc/1/ns/net may be
// unreadable, in a container, so the namespaces are not compared).
func connectorHint(err error) string {
	switch {
	case errors.Is(err, unix.ECONNREFUSED):
		return ErrConnectorNamespace.Error()
	case errors.Is(err, unix.EPROTONOSUPPORT):
		return "kernel without CONFIG_CONNECTOR"
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return "without CAP_NET_ADMIN"
	}
	return "unexpected: the kernel's connector refused the request"
}

func (c *Connector) control(op uint32) error {
	msg := make([]byte, nlHdrLen+cnMsgLen+4)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.NLMSG_DONE)
	binary.NativeEndian.PutUint32(msg[12:], uint32(os.Getpid()))
	cn := msg[nlHdrLen:]
	binary.NativeEndian.PutUint32(cn[0:], cnIdxProc)
	binary.NativeEndian.PutUint32(cn[4:], cnValProc)
	binary.NativeEndian.PutUint16(cn[16:], 4)
	binary.NativeEndian.PutUint32(cn[cnMsgLen:], op)
	return unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// SetReadTimeout bounds each Read so the caller can notice cancellation.
func (c *Connector) SetReadTimeout(d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	return unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// ErrOverrun means the socket buffer overflowed and events were lost; the
// caller should rescan /proc.
var ErrOverrun = errors.New("proc connector: events lost (receive buffer overrun)")

// errTimeout is returned by Read when the read timeout passed without events.
var errTimeout = errors.New("timeout")

// Read blocks for the next datagram and appends its events to evs.
func (c *Connector) Read(evs []Event) ([]Event, error) {
	n, _, err := unix.Recvfrom(c.fd, c.buf, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			return evs, errTimeout
		case errors.Is(err, unix.ENOBUFS):
			return evs, ErrOverrun
		}
		return evs, fmt.Errorf("proc connector read: %w", err)
	}
	return ParseEvents(c.buf[:n], evs)
}

// ParseEvents decodes the netlink messages of one datagram.
func ParseEvents(b []byte, evs []Event) ([]Event, error) {
	for len(b) >= nlHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < nlHdrLen || l > len(b) {
			return evs, fmt.Errorf("proc connector: bad netlink length %d", l)
		}
		msg := b[nlHdrLen:l]
		b = b[min(len(b), (l+3)&^3):]
		if len(msg) < cnMsgLen+evHeaderLen {
			continue
		}
		if binary.NativeEndian.Uint32(msg[0:]) != cnIdxProc || binary.NativeEndian.Uint32(msg[4:]) != cnValProc {
			continue
		}
		ev := msg[cnMsgLen:]
		e := Event{What: binary.NativeEndian.Uint32(ev[0:]), TimeNS: binary.NativeEndian.Uint64(ev[8:])}
		u := ev[evHeaderLen:]
		i32 := func(off int) int {
			if off+4 > len(u) {
				return 0
			}
			return int(int32(binary.NativeEndian.Uint32(u[off:])))
		}
		switch e.What {
		case procEventFork:
			e.ParentPID, e.ParentTG, e.PID, e.TGID = i32(0), i32(4), i32(8), i32(12)
		case procEventExec, procEventExit:
			e.PID, e.TGID = i32(0), i32(4)
		case procEventComm:
			e.PID, e.TGID = i32(0), i32(4)
			if len(u) >= 24 {
				e.Comm = strings.TrimRight(string(u[8:24]), "\x00")
				if i := strings.IndexByte(e.Comm, 0); i >= 0 {
					e.Comm = e.Comm[:i]
				}
			}
		default:
			continue
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// Close unsubscribes and closes the socket.
func (c *Connector) Close() error {
	_ = c.control(procCnMcastIgnore)
	return unix.Close(c.fd)
}
