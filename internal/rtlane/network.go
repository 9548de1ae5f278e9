// network.go: the lane's sockets and what the kernel offers them: the
// clients' listening socket, the UDP senders lanes-rtd sends from, whether
// clients' own sockets can be used (attachProbe), and the link rate when
// the configuration leaves it to the device.
package rtlane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

// openNetwork opens the netlink handle and the sending sockets, which are
// bound to this thread's namespace, and probes what the clients' own
// sockets need.
func (l *Lane) openNetwork() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("realtime: netlink: %w", err)
	}
	l.nl = h
	l.route.nl = h
	l.route.routes.Store(&map[netip.Addr]bool{{}: l.route.lookupClass(netip.Addr{})})
	for fam, af := range []int{unix.AF_INET, unix.AF_INET6} {
		for kind := 0; kind < 2; kind++ {
			fd, err := openSender(af, kind == 1)
			if err != nil {
				if fam == 1 {
					l.log.Info("realtime: no IPv6 sender", "err", err)
					break
				}
				return err
			}
			l.tx[fam][kind] = fd
		}
	}
	if l.netns, l.attachOK = attachProbe(l.tx[0][0]); !l.attachOK {
		l.log.Info("realtime: clients' own sockets unsupported here (SO_PRIORITY control messages need Linux 6.14, SO_NETNS_COOKIE 5.14); their datagrams leave from the lane's")
	}
	if l.rate.Load() == 0 {
		l.rate.Store(l.autoRate())
	}
	return nil
}

// listen binds the clients' socket (0666: grants are checked per peer
// with SO_PEERCRED), replacing a stale one, never a live daemon's.
func (l *Lane) listen() error {
	path := l.cfg.Socket
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("realtime socket dir: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if peerLive(path) {
			return fmt.Errorf("realtime: %s: another daemon is listening there", path)
		}
		_ = os.Remove(path) // stale socket of an earlier run
	}
	lfd, err := listenSeqpacket(path)
	if err != nil {
		return fmt.Errorf("realtime: listen %s: %w", path, err)
	}
	l.lfd = lfd
	if err := os.Chmod(path, 0o666); err != nil {
		return fmt.Errorf("realtime: chmod %s: %w", path, err)
	}
	return nil
}

// listenSeqpacket opens a blocking SOCK_SEQPACKET listener: connections
// and their reads use plain blocking syscalls on their own threads, so a
// request wakes the thread that admits it directly (no netpoller hop).
func listenSeqpacket(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openSender opens an unconnected UDP socket for lanes-rtd; class selects
// SO_PRIORITY = the realtime classid (needs CAP_NET_ADMIN) rather than
// TC_PRIO_INTERACTIVE. A large send buffer: datagrams stay charged to the
// socket until the device frees them. lanes-rtd sends with MSG_DONTWAIT
// and never waits for room (a full socket fails that datagram, counted).
func openSender(af int, class bool) (int, error) {
	fd, err := unix.Socket(af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("realtime: UDP socket (family %d): %w", af, err)
	}
	prio := 6 // TC_PRIO_INTERACTIVE
	if class {
		prio = int(lane.Realtime.ClassID())
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PRIORITY, prio); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("realtime: SO_PRIORITY %#x: %w", prio, err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	}
	return fd, nil
}

// autoRate reads the link speed of the default route's device from sysfs.
func (l *Lane) autoRate() uint64 {
	const fallback = 1_000_000_000
	routes, err := l.nl.RouteList(nil, unix.AF_INET)
	if err != nil {
		return fallback
	}
	for _, r := range routes {
		if r.Dst != nil && r.Dst.IP != nil && !r.Dst.IP.IsUnspecified() {
			continue
		}
		link, err := l.nl.LinkByIndex(r.LinkIndex)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/sys/class/net/" + link.Attrs().Name + "/speed")
		if err != nil {
			continue
		}
		if mbit, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && mbit > 0 {
			return uint64(mbit) * 1_000_000
		}
	}
	return fallback
}

// attachProbe says whether this kernel takes an SO_PRIORITY control
// message on a UDP send (6.14+; before, sendmsg fails with EINVAL), which
// lanes-rtd gives each datagram it sends from a client's own socket, and
// returns the namespace's cookie (SO_NETNS_COOKIE, 5.14+) such a socket
// must have; ok false if either is missing. fd is one of the lane's IPv4
// senders. MSG_PROBE: the kernel parses and routes the datagram and sends
// nothing.
func attachProbe(fd int) (cookie uint64, ok bool) {
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, false
	}
	oob := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SO_PRIORITY
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(oob[unix.CmsgLen(0):], 6)
	err = unix.Sendmsg(fd, nil, oob, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}, msgProbe)
	return cookie, err != unix.EINVAL
}

// msgProbe is MSG_PROBE (linux/socket.h): do not send, only probe the path.
const msgProbe = 0x10
