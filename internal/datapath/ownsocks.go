// ownsocks.go: the daemon's own sockets whose packets are no user's
// foreground (lanes_own_socks, the classifier's bgclass.h): the QUIC/UDP
// class's delay probes leave in their lane but do not stamp the
// foreground present, so the class never shares with its own probes.
package datapath

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// OwnSocket marks c's packets as the daemon's own until the returned
// release is called (before c closes: a closed socket's cookie is never
// reused, but its entry would stay).
func (b *BackgroundClass) OwnSocket(c syscall.Conn) (release func(), err error) {
	cookie, err := SocketCookie(c)
	if err != nil {
		return func() {}, err
	}
	err = b.guard.use(func() error { return b.cls.LanesOwnSocks.Put(cookie, uint8(1)) })
	if err != nil {
		return func() {}, fmt.Errorf("own socket %d: %w", cookie, err)
	}
	return func() {
		_ = b.guard.use(func() error {
			if err := b.cls.LanesOwnSocks.Delete(cookie); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
			return nil
		})
	}, nil
}

// SocketCookie reads c's SO_COOKIE, the key of the classifier's
// per-socket maps.
func SocketCookie(c syscall.Conn) (uint64, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cookie uint64
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cookie, serr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("SO_COOKIE: %w", serr)
	}
	return cookie, nil
}
