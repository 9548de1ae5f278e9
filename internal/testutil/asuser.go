// asuser.go: acting as an unprivileged local user inside a root test, for
// the attack tests of the trust boundary (issue: no local user can crash or
// subvert the daemon).
package testutil

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Nobody is the uid and gid attack tests act as by default.
const Nobody = 65534

// AsUser runs fn on a fresh OS thread whose credentials are those of an
// unprivileged user: uid, gid and supplementary groups (none if nil). Only
// that thread changes (raw setgroups/setresgid/setresuid, not Go's
// process-wide wrappers) and it is thrown away afterwards, so the rest of the
// test stays root. Sockets fn connects carry the user's credentials
// (SO_PEERCRED, SO_PEERGROUPS) and stay open after AsUser returns.
func AsUser(t testing.TB, uid, gid uint32, groups []uint32, fn func() error) {
	t.Helper()
	RequireRoot(t)
	if err := asUser(-1, uid, gid, groups, fn); err != nil {
		t.Fatalf("as uid %d: %v", uid, err)
	}
}

// AsUserIn is AsUser inside the network namespace ns: sockets fn opens are
// the user's sockets in ns.
func AsUserIn(t testing.TB, ns *NetNS, uid, gid uint32, groups []uint32, fn func() error) {
	t.Helper()
	RequireRoot(t)
	if err := asUser(int(ns.Handle), uid, gid, groups, fn); err != nil {
		t.Fatalf("as uid %d in %s: %v", uid, ns.Name, err)
	}
}

func asUser(nsFd int, uid, gid uint32, groups []uint32, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the goroutine's end takes the thread with it
		// (or, on the main thread, wedges it), so no other goroutine
		// ever runs with these credentials. Go starts new threads from a
		// clean template thread, not from a locked one.
		runtime.LockOSThread()
		if nsFd >= 0 {
			if err := unix.Setns(nsFd, unix.CLONE_NEWNET); err != nil {
				errc <- fmt.Errorf("setns: %w", err)
				return
			}
		}
		var gp uintptr
		if len(groups) > 0 {
			gp = uintptr(unsafe.Pointer(&groups[0]))
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), gp, 0); e != 0 {
			errc <- fmt.Errorf("setgroups: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			errc <- fmt.Errorf("setresgid: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			errc <- fmt.Errorf("setresuid: %w", e)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
