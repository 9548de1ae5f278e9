// appsock.go: the applications' own UDP sockets. A granted client hands
// the lane its socket once (wire.TypeAttach, the descriptor in SCM_RIGHTS
// over its connection); the lane then releases that client's datagrams
// from it, so the receiver sees the application's address and port and
// its replies reach the application's socket.
//
// Trust (the socket is 0666, a granted client is trusted with the lane,
// not with the daemon's privileges):
//   - only granted clients' readers pass a control buffer to recvmsg, so
//     only they ever receive a descriptor; anyone else's are discarded by
//     the kernel. The buffer holds at most two; a message other than an
//     attach that carries any has them closed at once.
//   - a descriptor is taken only if it is a socket of type SOCK_DGRAM,
//     domain AF_INET or AF_INET6, protocol IPPROTO_UDP (SO_TYPE,
//     SO_DOMAIN, SO_PROTOCOL), of the daemon's own network namespace
//     (SO_NETNS_COOKIE): the admission test models this namespace's
//     egress. At most wire.MaxSocks per connection; all are closed when
//     the connection ends, or when the last of its datagrams still queued
//     has left (refs).
//   - the send is sendmsg(2) on the client's socket: the kernel applies
//     that socket's rules (its bound address and port, its namespace and
//     routes, SO_BROADCAST, its cgroup's BPF hooks, netfilter's owner
//     match on its creator's uid), so the lane sends nowhere the client
//     could not. The one thing the lane adds is the datagram's priority
//     (the realtime class 1:11, which needs CAP_NET_ADMIN), given per
//     datagram as an SO_PRIORITY control message (Linux 6.14+), never set
//     on the socket: the client's own sends on it keep their class. A
//     kernel without the control message refuses attaches (unsupported).
//   - sends never wait (MSG_DONTWAIT): a client's full socket buffer
//     drops its datagram as a send error, never stalls the releaser.
//   - a corked socket (UDP_CORK) is not sent on (a send error): the
//     datagram would wait in the socket with the realtime priority, and
//     the client's own later sends, appended to it, would leave in the
//     realtime class unadmitted. Checked before each send (one
//     getsockopt); a client that corks between the check and the send can
//     still append to that one datagram, a payload's worth of bytes the
//     admission test did not count.
package rtlane

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// appSock is one attached socket.
type appSock struct {
	fd   int
	fam  int            // AF_INET or AF_INET6
	peer netip.AddrPort // the connected peer at attach (zero: unconnected)
	refs atomic.Int32   // the connection's, and one per queued datagram
	open *atomic.Int64  // the lane's count of attached sockets
}

// put drops a reference; the last closes the descriptor (raw: the caller
// may be pinned).
func (s *appSock) put() {
	if s.refs.Add(-1) == 0 {
		_, _, _ = syscall.RawSyscall(unix.SYS_CLOSE, uintptr(s.fd), 0, 0)
		s.open.Add(-1)
	}
}

// attachProbe says whether this kernel takes an SO_PRIORITY control
// message on a UDP send (6.14+; before, sendmsg fails with EINVAL), and
// returns the namespace's cookie (SO_NETNS_COOKIE, 5.14+); ok false if
// either is missing. fd is one of the lane's IPv4 senders. MSG_PROBE:
// the kernel parses and routes the datagram and sends nothing.
func attachProbe(fd int) (cookie uint64, ok bool) {
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, false
	}
	s := &appSock{fd: fd, fam: unix.AF_INET}
	err = sendOn(s, nil, netip.MustParseAddrPort("127.0.0.1:9"), 6, msgProbe)
	return cookie, err != unix.EINVAL
}

// msgProbe is MSG_PROBE (linux/socket.h): do not send, only probe the path.
const msgProbe = 0x10

// attach takes the descriptors an attach request carried; the reply says
// whether the connection now has the socket, and under which number.
// Every descriptor not kept is closed.
func (c *conn) attach(fds []int, r *wire.Request) wire.Reply {
	rep := wire.Reply{Type: wire.TypeReject, Flow: r.Flow, Seq: r.Seq}
	slot := -1
	for i, s := range c.socks {
		if s == nil {
			slot = i
			break
		}
	}
	switch {
	case !c.granted:
		rep.Reason = wire.ReasonNotGranted
	case !c.l.cfg.Enabled:
		rep.Reason = wire.ReasonDisabled
	case !c.l.attachOK:
		rep.Reason = wire.ReasonUnsupported
	case len(fds) != 1:
		rep.Reason = wire.ReasonBadSocket
	case slot < 0:
		rep.Reason = wire.ReasonTooMany
	default:
		if s := c.l.checkSock(fds[0]); s != nil {
			c.socks[slot] = s
			c.l.appSocks.Add(1)
			return wire.Reply{Type: wire.TypeAttached, Sock: uint8(slot + 1), Flow: r.Flow, Seq: r.Seq}
		}
		rep.Reason = wire.ReasonBadSocket
	}
	closeFds(fds)
	return rep
}

// checkSock returns fd as an attached socket if it is a UDP socket of
// IPv4 or IPv6 in the lane's network namespace, else nil.
func (l *Lane) checkSock(fd int) *appSock {
	typ, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	fam, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	proto, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	cookie, err4 := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || typ != unix.SOCK_DGRAM ||
		fam != unix.AF_INET && fam != unix.AF_INET6 || proto != unix.IPPROTO_UDP || cookie != l.netns {
		return nil
	}
	s := &appSock{fd: fd, fam: fam, open: &l.appSocks}
	s.refs.Store(1)
	switch sa := peerOf(fd).(type) {
	case *unix.SockaddrInet4:
		s.peer = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		s.peer = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return s
}

func peerOf(fd int) unix.Sockaddr {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return nil
	}
	return sa
}

// detachAll drops the connection's references to its sockets (its reader,
// at the end).
func (c *conn) detachAll() {
	for i, s := range c.socks {
		if s != nil {
			s.put()
			c.socks[i] = nil
		}
	}
}

// sockRefusal is why request r cannot go out of the connection's socket
// r.Sock (> 0), or wire.ReasonNone.
func (c *conn) sockRefusal(r *wire.Request) uint8 {
	if int(r.Sock) > len(c.socks) || c.socks[r.Sock-1] == nil {
		return wire.ReasonBadSocket
	}
	s := c.socks[r.Sock-1]
	switch {
	case !r.Dst.IsValid():
		if !s.peer.IsValid() {
			return wire.ReasonBadDest // unconnected: a destination is needed
		}
	case r.Dst.Port() == 0 || r.Dst.Addr().IsUnspecified():
		return wire.ReasonBadDest
	case r.Dst.Addr().Is6() && s.fam == unix.AF_INET:
		return wire.ReasonBadDest
	}
	return wire.ReasonNone
}

// takeFds collects the descriptors of the SCM_RIGHTS messages in oob into
// out, closing any beyond its room; it returns how many it kept. No
// allocation: it runs on a granted reader's path.
func takeFds(oob []byte, out []int) int {
	n := 0
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < unix.SizeofCmsghdr || l > len(oob) {
			break
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_RIGHTS {
			for off := unix.SizeofCmsghdr; off+4 <= l; off += 4 {
				fd := int(*(*int32)(unsafe.Pointer(&oob[off])))
				if n < len(out) {
					out[n] = fd
					n++
				} else {
					closeFds([]int{fd})
				}
			}
		}
		next := (l + 7) &^ 7
		if next >= len(oob) {
			break
		}
		oob = oob[next:]
	}
	return n
}

// closeFds closes descriptors, raw.
func closeFds(fds []int) {
	for _, fd := range fds {
		_, _, _ = syscall.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
	}
}

// errCorked: the client's socket has UDP_CORK set (send).
var errCorked = errors.New("the client's socket is corked (UDP_CORK)")

// corked reports whether fd has UDP_CORK set.
func corked(fd int) bool {
	v, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_CORK)
	return err == nil && v != 0
}

// prioCmsg is an SO_PRIORITY control message, aligned for the kernel.
type prioCmsg struct {
	h    unix.Cmsghdr
	prio uint32
	_    uint32
}

// sendOn sends b on the attached socket s with priority prio, to dst, or
// to the socket's peer when dst is unset; never waiting. An IPv4 dst on an
// IPv6 socket goes as its mapped address. No heap allocation: an ordinary
// system call with everything on the stack, like sendTo (sendto.go).
func sendOn(s *appSock, b []byte, dst netip.AddrPort, prio uint32, flags int) error {
	var sa4 unix.RawSockaddrInet4
	var sa6 unix.RawSockaddrInet6
	msg := unix.Msghdr{}
	switch {
	case !dst.IsValid():
	case s.fam == unix.AF_INET:
		sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Addr().As4()}
		putPort(&sa4.Port, dst.Port())
		msg.Name, msg.Namelen = (*byte)(unsafe.Pointer(&sa4)), unix.SizeofSockaddrInet4
	default:
		sa6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.Addr().As16()}
		putPort(&sa6.Port, dst.Port())
		msg.Name, msg.Namelen = (*byte)(unsafe.Pointer(&sa6)), unix.SizeofSockaddrInet6
	}
	cm := prioCmsg{h: unix.Cmsghdr{Level: unix.SOL_SOCKET, Type: unix.SO_PRIORITY}, prio: prio}
	cm.h.SetLen(unix.CmsgLen(4))
	var iov unix.Iovec
	if len(b) > 0 {
		iov.Base = &b[0]
		iov.SetLen(len(b))
	}
	msg.Iov, msg.Iovlen = &iov, 1
	msg.Control = (*byte)(unsafe.Pointer(&cm))
	msg.SetControllen(int(unsafe.Sizeof(cm)))
	_, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&msg)),
		uintptr(flags|unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL))
	if e != 0 {
		return e
	}
	return nil
}

// recvWithFds reads one message and its control data from fd in an
// ordinary blocking system call (a granted reader's read); flags has
// MSG_TRUNC when the message was longer than buf, MSG_CTRUNC when
// descriptors were left out for want of room (the kernel closed them).
// Received descriptors are close-on-exec.
func recvWithFds(fd int, buf, oob []byte) (n, oobn, flags int, err error) {
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	msg := unix.Msghdr{Iov: &iov, Iovlen: 1, Control: &oob[0]}
	msg.SetControllen(len(oob))
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)),
		unix.MSG_TRUNC|unix.MSG_CMSG_CLOEXEC)
	if e != 0 {
		return 0, 0, 0, e
	}
	n, flags = int(r), int(msg.Flags)
	if n > len(buf) {
		n = len(buf)
	}
	return n, int(msg.Controllen), flags, nil
}
