package procevents

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// An exec, the fork before it and the exit after it arrive as records
// with the child's pid; the comm hook names the new comm.
func TestExecForkExit(t *testing.T) {
	testutil.RequireRoot(t)
	s, err := Open()
	if err != nil {
		t.Skipf("process event programs do not load here: %v", err)
	}
	defer s.Close()
	cmd := exec.Command("/bin/sh", "-c", "exit 0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	seen := map[uint32]bool{}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !(seen[0x1] && seen[0x2] && seen[0x80000000]); {
		e, err := s.Read(100 * time.Millisecond)
		if errors.Is(err, ErrTimeout) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Tgid == pid {
			seen[e.What] = true
		}
	}
	for what, name := range map[uint32]string{0x1: "fork", 0x2: "exec", 0x80000000: "exit"} {
		if !seen[what] {
			t.Errorf("no %s event of pid %d (seen %v)", name, pid, seen)
		}
	}
}
