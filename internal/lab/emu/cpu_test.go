// cpu_test.go checks the CPU readers against a thread that spins for a
// known time: its own time and its process's grow by at least that much.
package emu

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestCPUOfSpinningThread(t *testing.T) {
	const spin = 50 * time.Millisecond
	type reading struct{ thread, proc time.Duration }
	done := make(chan [2]reading)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid := unix.Gettid()
		before := reading{ThreadCPU(os.Getpid(), tid), ProcCPU(os.Getpid())}
		// spin until the thread itself has run for spin (wall time would
		// count time other processes took on a loaded machine)
		start := time.Now()
		for ThreadCPU(os.Getpid(), tid)-before.thread < spin && time.Since(start) < 10*time.Second {
		}
		done <- [2]reading{before, {ThreadCPU(os.Getpid(), tid), ProcCPU(os.Getpid())}}
	}()
	r := <-done
	dt, dp := r[1].thread-r[0].thread, r[1].proc-r[0].proc
	t.Logf("thread %v, process %v", dt, dp)
	if dt < spin {
		testutil.TimingErrorf(t, "thread's CPU grew by %v after spinning %v", dt, spin)
	}
	if dp < dt {
		t.Errorf("process's CPU grew by %v, less than its thread's %v", dp, dt)
	}
	if dt > spin+20*time.Millisecond {
		t.Errorf("thread's CPU grew by %v for a spin that stopped at %v: not the thread's own time", dt, spin)
	}
}
