// measure.go: the receiving end used by tests and the lab: a UDP socket with
// kernel receive timestamps (SO_TIMESTAMPNS) converted to CLOCK_MONOTONIC,
// so that one machine's namespaces compare all five of the paper's
// timestamps on one clock.
package rtlane

import (
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/monoclock"
)

// Arrival is one received datagram.
type Arrival struct {
	Payload []byte
	From    netip.AddrPort
	Kernel  int64 // kernel receive timestamp (paper's point 4), CLOCK_MONOTONIC ns
	User    int64 // after recvmsg returned (point 5), CLOCK_MONOTONIC ns
}

// Receiver reads datagrams with kernel timestamps.
type Receiver struct {
	fd     int
	offset int64 // CLOCK_REALTIME - CLOCK_MONOTONIC at open
	buf    []byte
	oob    []byte
	Addr   netip.AddrPort
}

// ListenReceiver opens a UDP receiver on addr (in the calling thread's
// network namespace) with SO_TIMESTAMPNS and a large receive buffer.
func ListenReceiver(addr netip.AddrPort) (*Receiver, error) {
	fam := unix.AF_INET
	if addr.Addr().Is6() {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("receiver socket: %w", err)
	}
	r := &Receiver{fd: fd, buf: make([]byte, 65536), oob: make([]byte, 128)}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		r.Close()
		return nil, fmt.Errorf("SO_TIMESTAMPNS: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	var sa unix.Sockaddr
	if fam == unix.AF_INET {
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		r.Close()
		return nil, fmt.Errorf("receiver bind %v: %w", addr, err)
	}
	got, _ := unix.Getsockname(fd)
	switch s := got.(type) {
	case *unix.SockaddrInet4:
		r.Addr = netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
	case *unix.SockaddrInet6:
		r.Addr = netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(s.Port))
	}
	r.offset = RealtimeOffset()
	return r, nil
}

// RealtimeOffset samples CLOCK_REALTIME - CLOCK_MONOTONIC, taking the
// tightest of a few bracketed reads (one read preempted between its clocks
// would shift kernel TX/RX timestamps against the other side's clock).
func RealtimeOffset() int64 {
	best, off := int64(1<<62), int64(0)
	for i := 0; i < 7; i++ {
		var a, b, m unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &a)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &m)
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &b)
		if w := b.Nano() - a.Nano(); w < best {
			best, off = w, m.Nano()-(a.Nano()+b.Nano())/2
		}
	}
	return off
}

// SetTimeout bounds each Read; 0 blocks forever.
func (r *Receiver) SetTimeout(d time.Duration) error {
	tv := unix.NsecToTimeval(d.Nanoseconds())
	return unix.SetsockoptTimeval(r.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// Read blocks for one datagram (EAGAIN after the timeout). Payload aliases an internal buffer valid
// until the next Read.
func (r *Receiver) Read() (Arrival, error) {
	n, oobn, _, from, err := unix.Recvmsg(r.fd, r.buf, r.oob, 0)
	// A signal (Go's preemption) ends a read on a socket with SO_RCVTIMEO
	// even with SA_RESTART: read again.
	for err == unix.EINTR {
		n, oobn, _, from, err = unix.Recvmsg(r.fd, r.buf, r.oob, 0)
	}
	user := monoclock.Now()
	if err != nil {
		return Arrival{}, err
	}
	a := Arrival{Payload: r.buf[:n], User: user}
	switch s := from.(type) {
	case *unix.SockaddrInet4:
		a.From = netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
	case *unix.SockaddrInet6:
		a.From = netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(s.Port))
	}
	msgs, _ := unix.ParseSocketControlMessage(r.oob[:oobn])
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
			ts := (*unix.Timespec)(unsafePointer(&m.Data[0]))
			a.Kernel = ts.Nano() - r.offset
		}
	}
	return a, nil
}

// Close closes the socket (unblocking nothing: use SetTimeout for loops).
func (r *Receiver) Close() error { return unix.Close(r.fd) }

// UDPAddr is the receiver's address as a net.UDPAddr.
func (r *Receiver) UDPAddr() *net.UDPAddr { return net.UDPAddrFromAddrPort(r.Addr) }

func unsafePointer(b *byte) unsafe.Pointer { return unsafe.Pointer(b) }
