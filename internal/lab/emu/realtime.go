// realtime.go: real-time scheduling of the emulator's own threads.
//
// The emulator moves every packet of a testbed in user space. On a busy
// machine its threads wait for a CPU like any other, and a link that runs
// late delivers late: measured on a 2-core machine at load 11–14 (other
// builds and tests), 2 hosts through 20 Mbit/s, RTT 256 ms: deliveries up to
// 245 ms late, 40 late stretches (>= StallLate) in 45 s. With the link and
// TUN-reader threads at SCHED_FIFO the same run had at most 6 ms and none.
// So when RealTime is set, each link goroutine and each TUN reader locks its
// OS thread and gives it SCHED_FIFO at that priority, with
// SCHED_RESET_ON_FORK so that nothing started from it inherits the policy;
// the thread ends with its goroutine (never returned to the Go scheduler's
// pool). The kernel's real-time throttling (sched_rt_runtime_us) still
// leaves the rest of the machine its share. Where it is not permitted
// (no CAP_SYS_NICE, a container), the emulator runs at normal priority and
// RealTimeErr says why.
package emu

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRealTimePriority is the SCHED_FIFO priority the lab uses: above
// every normal task, below the kernel's own threaded interrupts (50).
const DefaultRealTimePriority = 10

// realTimeThread locks the calling goroutine to its thread and makes that
// thread SCHED_FIFO at prio. The goroutine must not unlock it.
func realTimeThread(prio int) error {
	runtime.LockOSThread()
	return unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(prio),
		Flags: unix.SCHED_FLAG_RESET_ON_FORK}, 0)
}

// RealTimeProcess gives every thread of this process SCHED_FIFO at prio
// (with SCHED_RESET_ON_FORK: child processes start at normal priority), now
// and then every second until released, so threads the Go runtime starts
// later (timers and the network poller run on any of them, and they wake
// the link threads) are promoted too. Calls nest; the last release returns
// every thread to normal scheduling.
func RealTimeProcess(prio int) (release func(), err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err := promoteThreads(prio); err != nil {
		_ = demoteThreads()
		return func() {}, err
	}
	if rt.users == 0 {
		stop := make(chan struct{})
		rt.stop = stop
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					_ = promoteThreads(prio)
				}
			}
		}()
	}
	rt.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			if rt.users--; rt.users == 0 {
				close(rt.stop)
				_ = demoteThreads()
			}
		})
	}, nil
}

var rt struct {
	mu    sync.Mutex
	users int
	stop  chan struct{}
}

func promoteThreads(prio int) error {
	return eachThread(func(tid int) error {
		if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Policy == unix.SCHED_FIFO {
			return nil
		}
		return unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(prio),
			Flags: unix.SCHED_FLAG_RESET_ON_FORK}, 0)
	})
}

func demoteThreads() error {
	return eachThread(func(tid int) error {
		return unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_NORMAL}, 0)
	})
}

// eachThread calls fn for every thread of this process; threads that ended
// meanwhile are skipped. It returns the first error.
func eachThread(fn func(tid int) error) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var first error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := fn(tid); err != nil && first == nil && !errors.Is(err, unix.ESRCH) {
			first = err
		}
	}
	return first
}
