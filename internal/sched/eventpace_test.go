// eventpace_test.go: one user's process events cost the engine a bounded
// amount, and overruns do not rescan /proc each time (N16).
package sched

import (
	"os/exec"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// TestEventsPacedPerUID (audit N16): a nice-19 process looping
// prctl(PR_SET_NAME) kept the daemon at 81 % of a core: every rename was
// read from /proc, and each of 1,308 overruns rescanned /proc with a WARN
// line. Fix: a uid's exec/comm events are considered at uidEventRate a
// second, the rest wait as one entry per process; overruns rescan at most
// once per rescanEvery.
func TestEventsPacedPerUID(t *testing.T) {
	testutil.RequireRoot(t)
	user := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "100")
	root := exec.Command("sleep", "100")
	for _, c := range []*exec.Cmd{user, root} {
		if err := c.Start(); err != nil {
			t.Skipf("start %v: %v", c.Args, err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	waitOwner(t, user.Process.Pid, 65534)
	var p eventPacer
	now := time.Unix(1000, 0)
	admitted, rootAdmitted := 0, 0
	const renames = 10000 // in one second
	for i := range renames {
		at := now.Add(time.Duration(i) * time.Second / renames)
		if p.admit(Event{What: procEventComm, PID: user.Process.Pid, TGID: user.Process.Pid}, at) {
			admitted++
		}
		if p.admit(Event{What: procEventComm, PID: root.Process.Pid, TGID: root.Process.Pid}, at) {
			rootAdmitted++
		}
	}
	if bound := uidEventBurst + uidEventRate; admitted > bound {
		t.Errorf("a user's %d renames in 1 s: %d considered, bound %d", renames, admitted, bound)
	}
	if len(p.deferred) != 1 {
		t.Errorf("%d waiting entries for one process's renames, want 1", len(p.deferred))
	}
	if rootAdmitted != renames {
		t.Errorf("root's events considered: %d of %d", rootAdmitted, renames)
	}
	// the waiting one is considered once the uid's budget allows
	if due := p.due(now.Add(2 * time.Second)); len(due) != 1 || len(p.deferred) != 0 {
		t.Errorf("after the budget refilled: %d due, %d still waiting", len(due), len(p.deferred))
	}
	// overruns: one rescan per rescanEvery, covering them all
	scans := 0
	for i := range 1308 {
		p.overruns++
		p.rescan = true
		if run, _, _ := p.rescanNow(now.Add(time.Duration(i) * 10 * time.Millisecond)); run {
			scans++
		}
	}
	if want := 1 + int(13080*time.Millisecond/rescanEvery); scans > want {
		t.Errorf("1,308 overruns in 13 s: %d rescans of /proc, want at most %d", scans, want)
	}
}

// waitOwner waits until process pid's /proc entry is uid's (setpriv ran).
func waitOwner(t *testing.T, pid int, uid uint32) {
	t.Helper()
	for end := time.Now().Add(testutil.Patience(5 * time.Second)); ; time.Sleep(10 * time.Millisecond) {
		if got, ok := procOwner(pid); ok && got == uid {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("process %d never became uid %d's", pid, uid)
		}
	}
}
