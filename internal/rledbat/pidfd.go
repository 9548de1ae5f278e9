// pidfd.go: a duplicate of another process's socket, for one system call
// on it. pidfd_open(pid) + pidfd_getfd(fd) give the daemon its own
// descriptor of the same socket (Linux 5.6+, CAP_SYS_PTRACE); it is closed
// at once after use, so the daemon never keeps another process's socket
// alive. The duplicate is checked by its socket cookie: a descriptor
// number the process reused for another file is found out, and the
// socket's descriptor is looked up again in /proc/PID/fd.
package rledbat

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// errGone: the process or the socket is gone (or no longer at that
// descriptor and not found again).
var errGone = errors.New("socket gone")

// owner is where a socket lives: its process and descriptor number there.
type owner struct {
	pid, fd int
}

// dup returns a duplicate of the socket with this cookie and inode held by
// pid (at o.fd, if known, else looked up); o.fd is updated. Close the
// result at once after use.
func (o *owner) dup(cookie uint64, inode uint32) (int, error) {
	pfd, err := unix.PidfdOpen(o.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return -1, errGone
		}
		return -1, fmt.Errorf("pidfd_open %d: %w", o.pid, err)
	}
	defer unix.Close(pfd)
	if o.fd >= 0 {
		if fd, err := getfd(pfd, o.fd, cookie); err == nil {
			return fd, nil
		}
	}
	o.fd = findFD(o.pid, inode)
	if o.fd < 0 {
		return -1, errGone
	}
	fd, err := getfd(pfd, o.fd, cookie)
	if err != nil {
		o.fd = -1
	}
	return fd, err
}

// getfd duplicates fd of the process behind pfd and checks it is the
// socket with this cookie.
func getfd(pfd, fd int, cookie uint64) (int, error) {
	d, err := unix.PidfdGetfd(pfd, fd, 0)
	if err != nil {
		if errors.Is(err, unix.EBADF) || errors.Is(err, unix.ESRCH) {
			return -1, errGone
		}
		return -1, fmt.Errorf("pidfd_getfd: %w", err)
	}
	if c, err := unix.GetsockoptUint64(d, unix.SOL_SOCKET, unix.SO_COOKIE); err != nil || c != cookie {
		unix.Close(d)
		return -1, errGone
	}
	return d, nil
}

// findFD returns the descriptor number of socket inode in pid, -1 if none.
func findFD(pid int, inode uint32) int {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	want := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				return n
			}
		}
	}
	return -1
}
