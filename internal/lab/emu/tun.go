// tun.go: TUN devices created inside a network namespace, read and written
// from the emulator's process.
//
// The device is created by a thread switched into the namespace (TUNSETIFF
// creates it in the caller's namespace); the file descriptor keeps working
// after the thread returns, so one emulator process serves hosts in many
// namespaces. Packets are bare IP (IFF_NO_PI).
package emu

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TUN is an open TUN device.
type TUN struct {
	Name string
	f    *os.File
}

type ifreq struct {
	name  [unix.IFNAMSIZ]byte
	flags uint16
	_     [22]byte
}

// OpenTUN creates (or attaches to) TUN device name inside namespace ns
// (a handle from netns; netns.None() for the current one).
func OpenTUN(ns netns.NsHandle, name string) (*TUN, error) {
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tun name %q too long", name)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if ns.IsOpen() {
		orig, err := netns.Get()
		if err != nil {
			return nil, fmt.Errorf("get netns: %w", err)
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			return nil, fmt.Errorf("enter netns: %w", err)
		}
		defer netns.Set(orig)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	var req ifreq
	copy(req.name[:], name)
	req.flags = unix.IFF_TUN | unix.IFF_NO_PI
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req))); e != 0 {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, e)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nonblock: %w", err)
	}
	return &TUN{Name: name, f: os.NewFile(uintptr(fd), "tun:"+name)}, nil
}

// Read reads one packet (blocks through the Go poller).
func (t *TUN) Read(b []byte) (int, error) { return t.f.Read(b) }

// Write writes one packet.
func (t *TUN) Write(b []byte) (int, error) { return t.f.Write(b) }

// Close closes the device (a non-persistent TUN disappears).
func (t *TUN) Close() error { return t.f.Close() }
