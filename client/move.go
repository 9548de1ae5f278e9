// move.go: processes in lanes: Move a running process, Start or Run a
// command in a lane (what `lanes run` does).
package client

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/lanes-net/lanes/internal/api"
)

// Move puts a running process in a lane: its cgroup (the children it starts
// later follow it), the sockets it holds open, at once, and, unless
// keepSched, the lane's CPU scheduling (background: nice 19; moving out
// gives back what it had). It says what moved.
func (c *Client) Move(pid int, l Lane, keepSched bool) (Moved, error) {
	r, err := c.do(api.Request{Op: api.OpMovePID, PID: pid, Lane: l, KeepSched: keepSched})
	if err != nil || r.Moved == nil {
		return Moved{}, err
	}
	return *r.Moved, nil
}

// gate holds a started command before it execs its program until the
// client writes a line to fd $1 (its pipe among cmd.ExtraFiles): the
// process the daemon moves is the one that then becomes the program. If
// the client goes away first, the program never runs.
const gate = `read _ <&$1 || exit 125; eval "exec $1<&-"; shift; exec "$0" "$@"`

// Start starts cmd in lane l with the lane's CPU scheduling, as `lanes
// run` does: the process is moved by the daemon before it runs cmd's
// program, so that the program and every process it starts are in the
// lane from their first packet. It runs /bin/sh to hold the program that
// long (the program's argv[0] is its path). Wait for cmd as after
// exec.Cmd.Start.
func (c *Client) Start(cmd *exec.Cmd, l Lane) (Moved, error) {
	if cmd.Path == "" || cmd.Process != nil {
		return Moved{}, errors.New("lanes client: Start needs an exec.Cmd with a path, not yet started")
	}
	if cmd.Err != nil {
		return Moved{}, cmd.Err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return Moved{}, fmt.Errorf("lanes client: gate pipe: %w", err)
	}
	defer r.Close()
	defer w.Close()
	fd := strconv.Itoa(3 + len(cmd.ExtraFiles))
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	args := []string{"sh", "-c", gate, cmd.Path, fd}
	if len(cmd.Args) > 1 {
		args = append(args, cmd.Args[1:]...)
	}
	cmd.Args = args
	cmd.Path = "/bin/sh"
	if err := cmd.Start(); err != nil {
		return Moved{}, err
	}
	m, err := c.Move(cmd.Process.Pid, l, false)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return Moved{}, fmt.Errorf("lanes client: moving the command to %s: %w", l, err)
	}
	if _, err := w.Write([]byte("\n")); err != nil {
		return m, fmt.Errorf("lanes client: releasing the command: %w", err)
	}
	return m, nil
}

// Run is Start, then waits for the command to end.
func (c *Client) Run(cmd *exec.Cmd, l Lane) error {
	if _, err := c.Start(cmd, l); err != nil {
		return err
	}
	return cmd.Wait()
}
