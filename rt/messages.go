// messages.go: what a client says when it cannot use the lane, each
// naming what fixes it. The words are lanes_rt.h's LANES_RT_MSG_* (the one
// table; examples/reasons_test.go checks every client against it).
package rt

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The messages.
const (
	MsgLaneOff = "the realtime lane is off: set realtime.enabled: true in /etc/lanes/policy.yaml, " +
		"then reload the daemon (systemctl reload lanes)"
	MsgNoDaemon   = "the daemon is not running: start it (systemctl start lanes)"
	MsgNotGranted = "not granted: add the uid, or a group of it, to realtime.grants in " +
		"/etc/lanes/policy.yaml, then reload the daemon"
)

// apiSocketName is the daemon's API socket, beside the realtime socket.
const apiSocketName = "lanes.sock"

var (
	// ErrLaneOff: Dial found no realtime socket, but the daemon runs.
	ErrLaneOff = errors.New(MsgLaneOff)
	// ErrNoDaemon: Dial found neither the realtime socket nor the daemon.
	ErrNoDaemon = errors.New(MsgNoDaemon)
)

// Help says what fixes a refusal of reason r, or "" when nothing in the
// policy does.
func (r Reason) Help() string {
	switch r {
	case ReasonNotGranted:
		return MsgNotGranted
	case ReasonDisabled:
		return MsgLaneOff
	}
	return ""
}

// dialError explains a failed connect to the realtime socket at path: the
// lane off when the daemon's API socket beside it answers, the daemon not
// running when it does not either.
func dialError(path string, err error) error {
	if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ECONNREFUSED) {
		return fmt.Errorf("realtime lane %s: %w", path, err)
	}
	why := ErrNoDaemon
	if fd, e := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); e == nil {
		api := filepath.Join(filepath.Dir(path), apiSocketName)
		if unix.Connect(fd, &unix.SockaddrUnix{Name: api}) == nil {
			why = ErrLaneOff
		}
		unix.Close(fd)
	}
	return fmt.Errorf("%w (%s: %w)", why, path, err)
}
