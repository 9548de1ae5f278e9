package procevents

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// An exec, the fork before it and the exit after it arrive as records
// with the child's pid; the comm hook names the new comm.
func TestExecForkExit(t *testing.T) {
	testutil.RequireRoot(t)
	s, err := Open(0)
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

// TestRenamesHeldBack (audit N16): a process looping prctl(PR_SET_NAME) put
// every rename on the ring, and the daemon reading them took 81-97 % of a
// core. Fix: a process's renames go out at most one per 100 ms; the rest
// are marked pending, for PendingRenames.
func TestRenamesHeldBack(t *testing.T) {
	testutil.RequireRoot(t)
	s, err := Open(0)
	if err != nil {
		t.Skipf("process event programs do not load here: %v", err)
	}
	defer s.Close()
	loop := exec.Command("/usr/bin/python3", "-c", `import ctypes, time
libc = ctypes.CDLL(None)
end = time.time() + 1
i = 0
while time.time() < end:
    libc.prctl(15, b"r%d" % (i % 1000), 0, 0, 0)
    i += 1
print(i)
`)
	out, err := loop.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Start(); err != nil {
		t.Skipf("python3: %v", err)
	}
	pid := uint32(loop.Process.Pid)
	renames := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		e, err := s.Read(100 * time.Millisecond)
		if errors.Is(err, ErrTimeout) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Tgid == pid && e.What == 0x200 {
			renames++
		}
	}
	var looped int
	fmt.Fscan(out, &looped)
	loop.Wait()
	if bound := 1 + 15; renames > bound || looped < 100 {
		t.Errorf("a 1 s rename loop (%d renames): %d rename events, bound %d (one per 100 ms)", looped, renames, bound)
	}
	t.Logf("a 1 s rename loop: %d renames, %d events", looped, renames)
}

// Opened for one network namespace, the programs report its tasks' exec
// and fork only: a process of another namespace makes no event but its
// leader's exit (a daemon's rules reach its own namespace's processes).
func TestOtherNamespaceSilent(t *testing.T) {
	ns := testutil.NewNetNS(t)
	var st syscall.Stat_t
	if err := syscall.Stat(ns.Path(), &st); err != nil {
		t.Fatal(err)
	}
	s, err := Open(uint32(st.Ino))
	if err != nil {
		t.Skipf("process event programs do not load here: %v", err)
	}
	defer s.Close()
	other := exec.Command("/bin/sh", "-c", "exit 0") // this test's namespace
	if err := other.Run(); err != nil {
		t.Fatal(err)
	}
	// ip's own exec is in this namespace too; sh's, after setns, in ns
	own := ns.Command("/bin/sh", "-c", "exit 0")
	if err := own.Run(); err != nil {
		t.Fatal(err)
	}
	otherPID, ownPID := uint32(other.Process.Pid), uint32(own.Process.Pid)
	var fromOther []uint32
	ownExecs := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && ownExecs == 0; {
		e, err := s.Read(100 * time.Millisecond)
		if errors.Is(err, ErrTimeout) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Tgid == otherPID && e.What != 0x80000000:
			fromOther = append(fromOther, e.What)
		case e.Tgid == ownPID && e.What == 0x2:
			ownExecs++
		}
	}
	if ownExecs == 0 {
		t.Fatalf("no exec event of pid %d, which ran in the namespace", ownPID)
	}
	if len(fromOther) > 0 {
		t.Errorf("pid %d of another namespace made events %#x", otherPID, fromOther)
	}
}
