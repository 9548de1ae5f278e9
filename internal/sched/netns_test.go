package sched

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/testutil"
)

// An engine for one network namespace applies its rules to that
// namespace's processes only, found by the scan or by their exec, from the
// proc connector (which reports every namespace's) and from the BPF
// programs alike; another namespace's are neither applied nor tracked.
func TestOwnNetnsOnly(t *testing.T) {
	own, sleeper, elsewhere := twoNamespaces(t, "lnsched-netns")
	for _, bpf := range []bool{false, true} {
		t.Run(map[bool]string{false: "default source", true: "bpf"}[bpf], func(t *testing.T) {
			outside := []int{elsewhere()}
			inside := []*exec.Cmd{startProc(t, sleeper, "30")}
			time.Sleep(50 * time.Millisecond) // both exec'd before the scan
			rule := config.TaskRule{Comm: "lnsched-netns", Policy: "idle"}
			r := startEngine(t, config.TaskSections{Tasks: []config.TaskRule{rule}}, Options{NoWatchdog: true, BPFEvents: bpf, Netns: own})
			t.Logf("source: %s", r.e.Status().Mode)
			r.waitApplied(t, inside[0].Process.Pid, 3*time.Second)
			outside = append(outside, elsewhere()) // exec'd before the own one
			inside = append(inside, startProc(t, sleeper, "30"))
			r.waitApplied(t, inside[1].Process.Pid, 3*time.Second)
			r.mu.Lock()
			for _, pid := range outside {
				if _, ok := r.applied[pid]; ok {
					t.Errorf("rule applied to pid %d of another network namespace", pid)
				}
			}
			r.mu.Unlock()
			if tr := r.e.Status().Tracked; len(tr) != 2 {
				t.Errorf("tracked %+v, want the 2 processes of its namespace", tr)
			}
		})
	}
}

// A process whose exec event came while it lived here but which is read
// after it entered another namespace (ip netns exec: the event of ip's
// exec, read once it has set its namespace and exec'd the program) is
// not the engine's: the namespace is read with the process, whatever the
// event's source checked.
func TestEventReadAfterSetns(t *testing.T) {
	own, _, elsewhere := twoNamespaces(t, "lnsched-setns")
	rule := config.TaskRule{Comm: "lnsched-setns", Policy: "idle"}
	r := startEngine(t, config.TaskSections{Tasks: []config.TaskRule{rule}}, Options{NoWatchdog: true, Netns: own})
	pid := elsewhere()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if ino, err := netnsInode(pid); err == nil && ino != own {
			if p, err := readProc(pid, r.e.rules.need); err == nil && p.Comm == "lnsched-setns" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not enter the other namespace and exec within 3 s", pid)
		}
	}
	for _, source := range []string{"exec", "comm", "fork", "scan"} {
		r.e.consider(pid, source, 0)
	}
	r.mu.Lock()
	_, applied := r.applied[pid]
	r.mu.Unlock()
	if applied {
		t.Errorf("rule applied to pid %d, which lives in another network namespace", pid)
	}
	for _, tr := range r.e.Status().Tracked {
		if tr.PID == pid {
			t.Errorf("tracked pid %d of another network namespace: %+v", pid, tr)
		}
	}
}

// twoNamespaces is the test's own network namespace's inode, a copy of
// sleep named comm, and a function that starts it (30 s, killed at the
// test's end) in another namespace with ip netns exec, returning its pid.
func twoNamespaces(t *testing.T, comm string) (own uint64, sleeper string, elsewhere func() int) {
	t.Helper()
	testutil.RequireRoot(t)
	own, err := netnsInode(syscall.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sleeper = copyBinary(t, "/bin/sleep", comm)
	other := testutil.NewNetNS(t)
	return own, sleeper, func() int {
		cmd := other.Command(sleeper, "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
}
