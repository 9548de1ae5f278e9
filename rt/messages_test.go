// messages_test.go: Dial says whether the lane is off or the daemon is not
// running, and a refusal says what fixes it (the words: messages.go).
package rt_test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/rt"
)

func TestDialSaysWhatFixesIt(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "rt.sock")
	_, err := rt.Dial(sock)
	if !errors.Is(err, rt.ErrNoDaemon) || !strings.Contains(err.Error(), "systemctl start lanes") {
		t.Errorf("no daemon: %v, want %q", err, rt.MsgNoDaemon)
	}
	api, err := net.Listen("unix", filepath.Join(dir, "lanes.sock")) // the daemon, its lane off
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	_, err = rt.Dial(sock)
	if !errors.Is(err, rt.ErrLaneOff) || !strings.Contains(err.Error(), "realtime.enabled") ||
		!strings.Contains(err.Error(), sock) {
		t.Errorf("lane off: %v, want %q and the path", err, rt.MsgLaneOff)
	}
	t.Logf("lane off: %v", err)
}

func TestRefusalSaysWhatFixesIt(t *testing.T) {
	err := &rt.RefusedError{Op: "attach", Reason: rt.ReasonNotGranted}
	if !strings.Contains(err.Error(), "realtime.grants") {
		t.Errorf("not granted: %q, want realtime.grants named", err)
	}
	if rt.ReasonQueueFull.Help() != "" || rt.ReasonDisabled.Help() != rt.MsgLaneOff {
		t.Errorf("help: queue-full %q, disabled %q", rt.ReasonQueueFull.Help(), rt.ReasonDisabled.Help())
	}
}
