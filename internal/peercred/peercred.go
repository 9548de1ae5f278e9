// Package peercred is who is on the other end of a unix socket, taken once
// when the connection is accepted: uid, gid and pid from SO_PEERCRED and the
// supplementary groups from SO_PEERGROUPS. The kernel records both at
// connect() time, so a later exit of the peer and reuse of its PID cannot
// lend another process's groups to the connection.
//
// Note: SO_PEERGROUPS exists since Linux 4.13, below lanes' 5.10 floor. Where
// a kernel lacks it anyway (ENOPROTOOPT), Groups falls back to the peer's
// /proc/PID/status read once, right after accept, and FromProc says so: the
// weaker path, racy only against a peer that exits between connect and
// accept.
package peercred

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cred is a connected peer's identity as the kernel recorded it.
type Cred struct {
	PID    int32
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
	// FromProc: Groups came from /proc (kernel without SO_PEERGROUPS).
	FromProc bool
}

// InGroup says whether gid is the peer's primary or a supplementary group.
func (c Cred) InGroup(gid uint32) bool {
	if c.GID == gid {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// Of returns the credentials of the peer connected to the unix socket fd.
func Of(fd int) (Cred, error) {
	uc, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Cred{}, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	c := Cred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}
	c.Groups, err = peerGroups(fd)
	if errors.Is(err, unix.ENOPROTOOPT) {
		c.Groups, c.FromProc = procGroups(uc.Pid), true
		return c, nil
	}
	if err != nil {
		return Cred{}, fmt.Errorf("SO_PEERGROUPS: %w", err)
	}
	return c, nil
}

// peerGroups reads SO_PEERGROUPS, growing the buffer when the kernel says
// ERANGE (it then reports the size it needs).
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 64)
	for range 3 {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch e {
		case 0:
			return buf[:n/4], nil
		case unix.ERANGE:
			buf = make([]uint32, n/4+1)
		default:
			return nil, e
		}
	}
	return nil, unix.ERANGE
}

// procGroups is the fallback: the Groups: line of /proc/PID/status.
func procGroups(pid int32) []uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	var out []uint32
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, f := range strings.Fields(rest) {
				if g, err := strconv.ParseUint(f, 10, 32); err == nil {
					out = append(out, uint32(g))
				}
			}
		}
	}
	return out
}
