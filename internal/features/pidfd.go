// pidfd.go probes what the daemon's own rLEDBAT (internal/rledbat) needs to
// set TCP_WINDOW_CLAMP on another process's background socket where
// sock_ops cannot (before 5.11): pidfd_open (5.3) and pidfd_getfd (5.6) to
// duplicate the socket's descriptor, and the right to do so
// (CAP_SYS_PTRACE: ptrace access to the owning process; Yama's
// ptrace_scope 3 forbids it to everyone).
package features

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// PidfdFeature is the probe's name in the report.
const PidfdFeature = "pidfd_getfd (daemon rLEDBAT)"

// capSysPtrace is CAP_SYS_PTRACE's bit in /proc/PID/status CapEff.
const capSysPtrace = 19

// ProbePidfdGetfd returns nil when this process may duplicate other
// processes' descriptors with pidfd_getfd, else why not.
func ProbePidfdGetfd() error {
	pfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return errors.New("pidfd_open missing (Linux 5.3+)")
		}
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pfd)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("not probed: %w", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	fd, err := unix.PidfdGetfd(pfd, p[0], 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return errors.New("pidfd_getfd missing (Linux 5.6+)")
		}
		return fmt.Errorf("pidfd_getfd: %w", err)
	}
	unix.Close(fd)
	if !hasCap(capSysPtrace) {
		return errors.New("no CAP_SYS_PTRACE (needed to take other processes' sockets)")
	}
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) == "3" {
		return errors.New("kernel.yama.ptrace_scope = 3 forbids pidfd_getfd on other processes")
	}
	return nil
}

// hasCap reports whether this process has capability bit c in its
// effective set.
func hasCap(c uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<c) != 0
		}
	}
	return false
}
