// owners_lanes_test.go: which processes are lanes' own (only root moves them).
package daemon

import (
	"os"
	"os/exec"
	"testing"
)

// TestLanesProcess (N17): the daemon and the processes it starts are lanes'
// own; its parent and an unrelated process are not.
func TestLanesProcess(t *testing.T) {
	o := procOwners{proc: "/proc"}
	child := exec.Command("sleep", "100")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	for pid, want := range map[int]bool{os.Getpid(): true, child.Process.Pid: true, os.Getppid(): false, 1: false} {
		if got := o.LanesProcess(pid); got != want {
			t.Errorf("pid %d: lanes' own %v, want %v", pid, got, want)
		}
	}
}
