// netns.go runs datapath operations inside the network namespace the
// Datapath was opened in, whatever thread the caller is on, and gives them a
// sysfs view of that namespace (sysfs shows the devices of the namespace
// that mounted it, so /sys/class/net of the process can be another
// namespace's: BQL lives there).
package datapath

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// nsRef is a network namespace held open by file descriptor.
type nsRef struct{ h netns.NsHandle }

func currentNS() (*nsRef, error) {
	h, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("get current network namespace: %w", err)
	}
	return &nsRef{h: h}, nil
}

func (n *nsRef) close() { n.h.Close() }

// inode identifies the namespace (as in /proc/PID/ns/net).
func (n *nsRef) inode() uint64 {
	var st unix.Stat_t
	if unix.Fstat(int(n.h), &st) != nil {
		return 0
	}
	return st.Ino
}

// do runs fn on a locked thread that is in the namespace.
func (n *nsRef) do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := netns.Get()
	if err != nil {
		return fmt.Errorf("get current network namespace: %w", err)
	}
	defer cur.Close()
	if cur.Equal(n.h) {
		return fn()
	}
	if err := netns.Set(n.h); err != nil {
		return fmt.Errorf("enter network namespace: %w", err)
	}
	defer netns.Set(cur)
	return fn()
}

// errSysfsSetup marks a failure to get a private sysfs (no CAP_SYS_ADMIN,
// seccomp...), as opposed to an error of fn.
var errSysfsSetup = errors.New("private sysfs")

// withSysfs runs fn with sysfsRoot set to a sysfs mounted from inside the
// namespace. Like `ip netns exec`, it uses a throw-away thread with its own
// mount namespace where a fresh sysfs is mounted on /sys; the thread is
// never returned to the Go scheduler (it stays locked and exits).
func (n *nsRef) withSysfs(fn func(sysfsRoot string) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // no Unlock: the thread dies with the goroutine
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("%w: unshare mount namespace: %w", errSysfsSetup, err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
				return fmt.Errorf("%w: make mounts private: %w", errSysfsSetup, err)
			}
			if err := netns.Set(n.h); err != nil {
				return fmt.Errorf("%w: enter network namespace: %w", errSysfsSetup, err)
			}
			if err := unix.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
				// EBUSY: /sys already is this namespace's sysfs (as under
				// `ip netns exec`), and the kernel refuses to stack the same
				// superblock on its own mount point. Use it as it is.
				if err != unix.EBUSY {
					return fmt.Errorf("%w: mount sysfs: %w", errSysfsSetup, err)
				}
			}
			return fn("/sys")
		}()
	}()
	return <-errc
}

// netnsInode returns the namespace's inode number (nsfs), by which the
// sock_ops program recognises it where it cannot use the cookie.
func (n *nsRef) netnsInode() (uint32, error) {
	var st unix.Stat_t
	err := n.do(func() error { return unix.Stat("/proc/thread-self/ns/net", &st) })
	if err != nil {
		return 0, fmt.Errorf("network namespace inode: %w", err)
	}
	return uint32(st.Ino), nil
}

// netnsCookie returns the namespace cookie (SO_NETNS_COOKIE) that BPF's
// bpf_get_netns_cookie reports for sockets of this namespace.
func (n *nsRef) netnsCookie() (uint64, error) {
	var cookie uint64
	err := n.do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		const soNetnsCookie = 71 // SO_NETNS_COOKIE, Linux 5.14
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, soNetnsCookie)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("SO_NETNS_COOKIE: %w", err)
	}
	return cookie, nil
}
