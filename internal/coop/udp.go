// udp.go: the real Transport — UDP on the managed LAN interface, IPv4
// broadcast and IPv6 link-local multicast side by side.
//
//   - IPv4: one socket bound to 0.0.0.0:port and to the interface
//     (SO_BINDTODEVICE), with SO_BROADCAST to send to the interface's IPv4
//     broadcast address;
//   - IPv6: one socket bound to [::]:port (IPV6_V6ONLY) and to the
//     interface, member of the link-local group ff02::6c61:6e65 ("lane") on
//     it, sending there with IPV6_MULTICAST_IF set to the interface (hop
//     limit 1: the group is link-local);
//   - both set SO_REUSEPORT, not SO_REUSEADDR: a listening tool (`lanes
//     coop peers`) run by root can share the port with the daemon
//     (broadcast and multicast are delivered to every bound socket), but
//     the kernel lets only the same user join a SO_REUSEPORT group, and
//     refuses any other bind of the port while a socket lacking
//     SO_REUSEADDR holds it. With SO_REUSEADDR, any local user could bind
//     the port (with SO_BINDTODEVICE on the managed interface) and take
//     unicast announcements (unicast_peers). Unicast datagrams are spread
//     over the group's sockets, so a running `lanes coop peers` takes a
//     share of them while it runs.
//
// With both families every announcement goes out twice; receivers accept the
// first copy and count the second as a duplicate (peers.go). A family that
// cannot be opened (IPv6 disabled, no IPv4 on the link, its port held by
// another user's socket) is left out with a warning, so the other still
// works, and Reopen (the controller calls it each interval) tries it again;
// Send fails only if every family fails.
package coop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Transports (config `transport`).
const (
	TransportIPv4 = "ipv4"
	TransportIPv6 = "ipv6"
	TransportBoth = "both"
)

// GroupIPv6 is the link-local multicast group of announcements.
var GroupIPv6 = netip.MustParseAddr("ff02::6c61:6e65")

type datagram struct {
	b    []byte
	from netip.Addr
}

// UDPTransport is the announcement sockets on one interface.
type UDPTransport struct {
	ifname    string
	ifindex   int
	transport string
	mu        sync.RWMutex // v4, v6 (Reopen sets one) and Warning
	port      uint16
	v4, v6    *net.UDPConn
	unicast   []netip.Addr
	rx        chan datagram
	done      chan struct{}
	once      sync.Once
	// Warning says which family could not be opened ("" if none failed);
	// read it through Missing once the transport is in use.
	Warning string
}

// SetUnicast makes Send go to each of addrs instead of the broadcast
// address and the group (for networks that drop broadcast between
// stations, and for the lab, whose point-to-point TUN links have none).
func (t *UDPTransport) SetUnicast(addrs []netip.Addr) {
	t.unicast = append([]netip.Addr(nil), addrs...)
}

// ListenUDP opens the IPv4 broadcast socket only.
func ListenUDP(ifname string, port uint16) (*UDPTransport, error) {
	return ListenUDPOn(ifname, port, TransportIPv4)
}

// ListenUDPOn opens the announcement sockets of the given transport.
func ListenUDPOn(ifname string, port uint16, transport string) (*UDPTransport, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("coop: interface %s: %w", ifname, err)
	}
	t := &UDPTransport{ifname: ifname, ifindex: ifi.Index, transport: transport, port: port,
		rx: make(chan datagram, 64), done: make(chan struct{})}
	var errs []error
	if transport != TransportIPv6 {
		if t.v4, err = listen4(ifname, port); err != nil {
			errs = append(errs, err)
		}
	}
	if transport != TransportIPv4 {
		if t.v6, err = listen6(ifname, ifi.Index, port); err != nil {
			errs = append(errs, err)
		}
	}
	if t.v4 == nil && t.v6 == nil {
		return nil, errors.Join(errs...)
	}
	if len(errs) > 0 {
		t.Warning = errors.Join(errs...).Error()
	}
	for _, c := range []*net.UDPConn{t.v4, t.v6} {
		if c != nil {
			go t.read(c)
		}
	}
	return t, nil
}

func sockopts(ifname string, v6 bool) func(_, _ string, rc syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			s := int(fd)
			if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil {
				return
			}
			if v6 {
				serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
			} else {
				serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
			}
			if serr == nil {
				serr = unix.BindToDevice(s, ifname)
			}
		})
		return errors.Join(err, serr)
	}
}

func listen4(ifname string, port uint16) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: sockopts(ifname, false)}
	pc, err := lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, fmt.Errorf("coop: listen udp4 :%d on %s: %w", port, ifname, err)
	}
	return pc.(*net.UDPConn), nil
}

func listen6(ifname string, ifindex int, port uint16) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: sockopts(ifname, true)}
	pc, err := lc.ListenPacket(context.Background(), "udp6", fmt.Sprintf("[::]:%d", port))
	if err != nil {
		return nil, fmt.Errorf("coop: listen udp6 :%d on %s: %w", port, ifname, err)
	}
	c := pc.(*net.UDPConn)
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		s := int(fd)
		mreq := &unix.IPv6Mreq{Interface: uint32(ifindex), Multiaddr: GroupIPv6.As16()}
		if serr = unix.SetsockoptIPv6Mreq(s, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, mreq); serr != nil {
			return
		}
		if serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, ifindex); serr != nil {
			return
		}
		serr = unix.SetsockoptInt(s, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_HOPS, 1)
	})
	if err = errors.Join(err, serr); err != nil {
		c.Close()
		return nil, fmt.Errorf("coop: join %v on %s: %w", GroupIPv6, ifname, err)
	}
	return c, nil
}

// read feeds one socket's datagrams to Recv until the socket closes.
func (t *UDPTransport) read(c *net.UDPConn) {
	buf := make([]byte, 2*MaxSize)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		select {
		case t.rx <- datagram{b: append([]byte(nil), buf[:n]...), from: from.Addr().Unmap()}:
		case <-t.done:
			return
		}
	}
}

// BroadcastAddr returns the IPv4 broadcast address computed from the
// interface's first IPv4 address and mask, in the caller's namespace
// (255.255.255.255 when it has none).
func BroadcastAddr(ifname string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("coop: interface %s: %w", ifname, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("coop: addresses of %s: %w", ifname, err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip4 := ipn.IP.To4()
		if ip4 == nil || len(ipn.Mask) != 4 {
			continue
		}
		var b [4]byte
		for i := range b {
			b[i] = ip4[i] | ^ipn.Mask[i]
		}
		return netip.AddrFrom4(b), nil
	}
	return netip.AddrFrom4([4]byte{255, 255, 255, 255}), nil
}

// broadcast asks the kernel for the interface's broadcast address through
// the socket itself (SIOCGIFBRDADDR), which works in the socket's network
// namespace from any thread; 255.255.255.255 if it has none.
func (t *UDPTransport) broadcast(v4 *net.UDPConn) (netip.Addr, error) {
	rc, err := v4.SyscallConn()
	if err != nil {
		return netip.Addr{}, err
	}
	ifr, err := unix.NewIfreq(t.ifname)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("coop: interface name %q: %w", t.ifname, err)
	}
	var ioErr error
	if err := rc.Control(func(fd uintptr) { ioErr = unix.IoctlIfreq(int(fd), unix.SIOCGIFBRDADDR, ifr) }); err != nil {
		return netip.Addr{}, err
	}
	if ioErr != nil {
		if ioErr == unix.EADDRNOTAVAIL {
			return netip.AddrFrom4([4]byte{255, 255, 255, 255}), nil
		}
		return netip.Addr{}, fmt.Errorf("coop: broadcast address of %s: %w", t.ifname, ioErr)
	}
	a, err := ifr.Inet4Addr()
	if err != nil {
		return netip.Addr{}, err
	}
	addr, _ := netip.AddrFromSlice(a)
	if !addr.IsValid() || addr.IsUnspecified() {
		return netip.AddrFrom4([4]byte{255, 255, 255, 255}), nil
	}
	return addr, nil
}

// Send broadcasts one announcement on every family (or sends it to each
// unicast peer); it fails only when no copy could be sent.
func (t *UDPTransport) Send(b []byte) error {
	t.mu.RLock()
	v4, v6 := t.v4, t.v6
	t.mu.RUnlock()
	var errs []error
	sent := 0
	send := func(c *net.UDPConn, dst netip.AddrPort) {
		if c == nil {
			errs = append(errs, fmt.Errorf("coop: no socket for %v", dst.Addr()))
			return
		}
		if _, err := c.WriteToUDPAddrPort(b, dst); err != nil {
			errs = append(errs, fmt.Errorf("coop: send to %v: %w", dst.Addr(), err))
			return
		}
		sent++
	}
	if len(t.unicast) > 0 {
		for _, a := range t.unicast {
			if a.Is4() {
				send(v4, netip.AddrPortFrom(a, t.port))
			} else {
				send(v6, netip.AddrPortFrom(a.WithZone(t.ifname), t.port))
			}
		}
		return errors.Join(errs...)
	}
	if v4 != nil {
		dst, err := t.broadcast(v4)
		if err != nil {
			errs = append(errs, err)
		} else {
			send(v4, netip.AddrPortFrom(dst, t.port))
		}
	}
	if v6 != nil {
		send(v6, netip.AddrPortFrom(GroupIPv6.WithZone(t.ifname), t.port))
	}
	if sent > 0 {
		return nil
	}
	return errors.Join(errs...)
}

// Recv returns the next datagram from either family; longer ones than b
// are truncated, which the decoder then refuses (b is twice MaxSize, so
// truncation means oversized).
func (t *UDPTransport) Recv(b []byte) (int, netip.Addr, error) {
	select {
	case d := <-t.rx:
		return copy(b, d.b), d.from, nil
	case <-t.done:
		return 0, netip.Addr{}, net.ErrClosed
	}
}

// Reopen opens each family of the transport that could not be opened
// before, in the calling thread's network namespace (the daemon's); it
// reports whether one was.
func (t *UDPTransport) Reopen() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.done:
		return false
	default:
	}
	if t.Warning == "" {
		return false
	}
	opened := false
	var errs []error
	if t.transport != TransportIPv6 && t.v4 == nil {
		if c, err := listen4(t.ifname, t.port); err != nil {
			errs = append(errs, err)
		} else {
			t.v4, opened = c, true
			go t.read(c)
		}
	}
	if t.transport != TransportIPv4 && t.v6 == nil {
		if c, err := listen6(t.ifname, t.ifindex, t.port); err != nil {
			errs = append(errs, err)
		} else {
			t.v6, opened = c, true
			go t.read(c)
		}
	}
	t.Warning = ""
	if len(errs) > 0 {
		t.Warning = errors.Join(errs...).Error()
	}
	return opened
}

// Missing says which family is not open and why ("" if none).
func (t *UDPTransport) Missing() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.Warning
}

// Close closes the sockets (unblocking Recv).
func (t *UDPTransport) Close() error {
	var err error
	t.once.Do(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		close(t.done)
		for _, c := range []*net.UDPConn{t.v4, t.v6} {
			if c != nil {
				err = errors.Join(err, c.Close())
			}
		}
	})
	return err
}
