// watch.go: a write into any group's member files, by inotify. Every
// write through the VFS (ActivityManager's, a test's) raises IN_MODIFY
// on the file written, on cgroupfs as on any other file system; the
// descriptor is in Go's poller, so a waiting watcher is one blocked
// epoll wait: no timer, no wake-up while nothing moves.
package appstate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Watcher reports writes into the groups' `tasks` and `cgroup.procs`.
type Watcher struct {
	f *os.File
}

// Watch watches the groups under root that exist now (ErrNoGroups: none).
func Watch(root string) (*Watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &Watcher{f: os.NewFile(uintptr(fd), "appstate-inotify")}
	n := 0
	for g := range Groups {
		for _, name := range []string{"tasks", "cgroup.procs"} {
			p := filepath.Join(root, g, name)
			if _, err := unix.InotifyAddWatch(fd, p, unix.IN_MODIFY); err == nil {
				n++
			} else if !errors.Is(err, unix.ENOENT) {
				w.Close()
				return nil, fmt.Errorf("inotify on %s: %w", p, err)
			}
		}
	}
	if n == 0 {
		w.Close()
		return nil, fmt.Errorf("%w under %s (mount the cpuset hierarchy there, or give its path)", ErrNoGroups, root)
	}
	return w, nil
}

// Wait blocks until a group's member file was written since the last
// Wait (the events queued meanwhile count as one), or ctx ends.
func (w *Watcher) Wait(ctx context.Context) error {
	if err := w.f.SetReadDeadline(time.Time{}); err != nil { // an earlier Wait's end
		return fmt.Errorf("inotify: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 4096) // events on watched files carry no name: 16 bytes each
	if _, err := w.f.Read(buf); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("inotify read: %w", err)
	}
	return nil
}

// Close releases the watch.
func (w *Watcher) Close() error { return w.f.Close() }
