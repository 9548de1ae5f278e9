// schedmove_test.go: `lanes move` gives a process the lane's CPU
// treatment and says so; moving it back gives each thread what it had
// (a policy and nice other than the defaults, so that "restored" cannot
// pass by leaving the defaults alone); --keep-sched leaves it as it is.
package daemon_test

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

// schedOf is a process's scheduling policy and nice.
func schedOf(t *testing.T, pid int) (uint32, int32) {
	t.Helper()
	a, err := unix.SchedGetAttr(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	return a.Policy, a.Nice
}

func TestMoveCPUTreatment(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	d, sock := startDaemon(t, ns, devicePolicy("lo"))
	defer d.stop(t, syscall.SIGTERM)
	sleeper := func(policy uint32, nice int32) int {
		cmd := exec.Command("sleep", "120")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy, Nice: nice}
		if err := unix.SchedSetAttr(cmd.Process.Pid, &a, 0); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid
	}
	move := func(pid int, ln string, flags ...string) string {
		t.Helper()
		// in the daemon's network namespace only (see moveOnce)
		args := append([]string{"--net=" + ns.Path(), lanesBin, "move", "--socket", sock, "--lane", ln}, flags...)
		out, err := exec.Command("nsenter", append(args, strconv.Itoa(pid))...).CombinedOutput()
		if err != nil {
			t.Fatalf("lanes move %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	want := func(pid int, what string, policy uint32, nice int32) {
		t.Helper()
		if p, n := schedOf(t, pid); p != policy || n != nice {
			t.Errorf("%s: policy %d nice %d, want policy %d nice %d", what, p, n, policy, nice)
		}
	}

	batch := sleeper(unix.SCHED_BATCH, 5)
	out := move(batch, "background")
	t.Logf("into background: %s", out)
	if !strings.HasSuffix(out, "-> background: open sockets 0 tcp, 0 udp; cpu nice 19") {
		t.Errorf("lanes move into background says %q, want the lane's CPU treatment named", out)
	}
	want(batch, "moved into background", unix.SCHED_NORMAL, 19)
	out = move(batch, "interactive")
	t.Logf("back to interactive: %s", out)
	if !strings.HasSuffix(out, "cpu restored") {
		t.Errorf("lanes move back says %q, want its CPU treatment restored", out)
	}
	want(batch, "moved back to interactive", unix.SCHED_BATCH, 5)

	kept := sleeper(unix.SCHED_NORMAL, 3)
	out = move(kept, "background", "--keep-sched")
	t.Logf("into background, --keep-sched: %s", out)
	if !strings.HasSuffix(out, "cpu kept") {
		t.Errorf("lanes move --keep-sched says %q, want its CPU treatment kept", out)
	}
	want(kept, "moved into background with --keep-sched", unix.SCHED_NORMAL, 3)
	out = move(kept, "interactive")
	if !strings.HasSuffix(out, "cpu unchanged") {
		t.Errorf("lanes move back of a process moved with --keep-sched says %q, want nothing to restore", out)
	}
	want(kept, "moved back after --keep-sched", unix.SCHED_NORMAL, 3)
}
