// sendto.go: the release's sendto(2) without a heap allocation.
// unix.Sendto takes a unix.Sockaddr interface, whose value escapes to the
// heap on every call: one allocation per released datagram, garbage the
// collector must then take from the realtime threads. The raw sockaddr
// lives on the stack here.
// It is an ordinary system call although the releasing thread is pinned
// (pin.go): so the goroutine is in _Gsyscall meanwhile, which sysmon does
// not signal (a raw call looks like running Go code, and a preemption
// signal's IPI in the middle of the send showed in the path's tail).
package rtlane

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendTo sends b to dst on fd (AF_INET for an IPv4 dst, else AF_INET6).
func sendTo(fd int, b []byte, dst netip.AddrPort) error {
	var buf unsafe.Pointer
	if len(b) > 0 {
		buf = unsafe.Pointer(&b[0])
	}
	var e unix.Errno
	if dst.Addr().Is4() {
		sa := unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: dst.Addr().As4()}
		putPort(&sa.Port, dst.Port())
		_, _, e = unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(buf), uintptr(len(b)), 0,
			uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet4)
	} else {
		sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.Addr().As16()}
		putPort(&sa.Port, dst.Port())
		_, _, e = unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(buf), uintptr(len(b)), 0,
			uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet6)
	}
	if e != 0 {
		return e
	}
	return nil
}

// putPort stores port in network byte order.
func putPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(port>>8), byte(port)
}
