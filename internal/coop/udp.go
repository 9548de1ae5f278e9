// udp.go: the real Transport — UDP broadcast on the managed LAN interface.
//
// One socket bound to 0.0.0.0:port and to the interface (SO_BINDTODEVICE),
// with SO_BROADCAST to send to the interface's IPv4 broadcast address and
// SO_REUSEADDR so a listening tool (`lanes coop peers`) can share the port
// with the daemon (broadcasts are delivered to every bound socket).
package coop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// UDPTransport is a broadcast UDP socket on one interface.
type UDPTransport struct {
	ifname  string
	port    uint16
	conn    *net.UDPConn
	unicast []netip.Addr
}

// SetUnicast makes Send go to each of addrs instead of the broadcast
// address (for networks that drop broadcast between stations, and for the
// lab, whose point-to-point TUN links have no broadcast).
func (t *UDPTransport) SetUnicast(addrs []netip.Addr) {
	t.unicast = append([]netip.Addr(nil), addrs...)
}

// ListenUDP opens the announcement socket on ifname.
func ListenUDP(ifname string, port uint16) (*UDPTransport, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			s := int(fd)
			if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
				return
			}
			if serr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr != nil {
				return
			}
			serr = unix.BindToDevice(s, ifname)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, fmt.Errorf("coop: listen udp :%d on %s: %w", port, ifname, err)
	}
	return &UDPTransport{ifname: ifname, port: port, conn: pc.(*net.UDPConn)}, nil
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
func (t *UDPTransport) broadcast() (netip.Addr, error) {
	rc, err := t.conn.SyscallConn()
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

// Send broadcasts one announcement (or sends it to each unicast peer).
func (t *UDPTransport) Send(b []byte) error {
	if len(t.unicast) > 0 {
		var errs []error
		for _, a := range t.unicast {
			if _, err := t.conn.WriteToUDPAddrPort(b, netip.AddrPortFrom(a, t.port)); err != nil {
				errs = append(errs, fmt.Errorf("coop: send to %v: %w", a, err))
			}
		}
		return errors.Join(errs...)
	}
	dst, err := t.broadcast()
	if err != nil {
		return err
	}
	_, err = t.conn.WriteToUDPAddrPort(b, netip.AddrPortFrom(dst, t.port))
	if err != nil {
		return fmt.Errorf("coop: broadcast to %v: %w", dst, err)
	}
	return nil
}

// Recv reads one datagram; longer ones than b are truncated, which the
// decoder then refuses (b is twice MaxSize, so truncation means oversized).
func (t *UDPTransport) Recv(b []byte) (int, netip.Addr, error) {
	n, from, err := t.conn.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, netip.Addr{}, err
	}
	return n, from.Addr().Unmap(), nil
}

// Close closes the socket (unblocking Recv).
func (t *UDPTransport) Close() error { return t.conn.Close() }
