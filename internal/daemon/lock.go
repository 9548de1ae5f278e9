// lock.go: one daemon per network namespace. A daemon holds an exclusive
// flock on /run/lanes/<instance>.lock for its life (the kernel drops it when
// the process dies, even by SIGKILL); a second daemon in the same namespace
// and `lanes reset` take the same lock without waiting and refuse while it
// is held, naming the holder's pid. The file is root's, in a root-owned
// directory, opened without following links.
package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RunDir holds the daemon's runtime files: its socket by default, the
// instance locks, cgroup2 mounts of its own.
const RunDir = "/run/lanes"

// instanceLock is a held lock; release unlinks and unlocks it.
type instanceLock struct {
	f    *os.File
	path string
}

// ErrDaemonRunning: another daemon holds this namespace's lock.
var ErrDaemonRunning = errors.New("a lanes daemon is already running in this network namespace")

// lockInstance takes inst's lock without waiting.
func lockInstance(inst string) (*instanceLock, error) {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(RunDir, inst+".lock")
	for range 8 { // a holder that unlinks between our open and flock: retry
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("instance lock %s: %w", path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			pid := readPID(f)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w (pid %s, lock %s)", ErrDaemonRunning, pid, path)
			}
			return nil, fmt.Errorf("instance lock %s: %w", path, err)
		}
		var held, now unix.Stat_t
		if unix.Fstat(fd, &held) == nil && unix.Lstat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return &instanceLock{f: f, path: path}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("instance lock %s: replaced while taking it", path)
}

func readPID(f *os.File) string {
	b := make([]byte, 16)
	n, _ := f.ReadAt(b, 0)
	if s := strings.TrimSpace(string(b[:n])); s != "" {
		return s
	}
	return "unknown"
}

// release removes the lock file and drops the lock.
func (l *instanceLock) release() {
	_ = os.Remove(l.path)
	l.f.Close()
}
