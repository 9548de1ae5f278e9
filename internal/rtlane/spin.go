// spin.go: the lock of the realtime path.
//
// The admitting readers and the releaser are locked goroutines on SCHED_FIFO
// threads. A sync.Mutex or channel that makes one of them wait parks the
// goroutine, and waking it again goes through Go's scheduler: some other M,
// at normal priority, must notice and hand the P over, which on a busy
// machine takes milliseconds (measured: admitted 1 ms datagrams released
// 9 ms later). SpinLock waits in the kernel's terms instead: it spins for a
// few microseconds, then sleeps 10 µs at a time with a raw nanosleep on its
// own thread, so a preempted holder gets the CPU, and wakes by the kernel
// timer, not by the Go scheduler.
//
// A holder is pinned (procPin, pin.go) from Lock to Unlock, and so is a
// waiter: the realtime threads hold it in pinned sections, where Go's
// runtime cannot preempt them, and a holder the runtime could stop (for a
// stop-the-world, which itself waits for the pinned thread) would never
// release it. Critical sections must stay short and must not block in the
// runtime: no I/O through Go, no mutex, no channel.
package rtlane

import "sync/atomic"

// SpinLock is a mutual-exclusion lock for short critical sections shared by
// realtime threads (also usable by trace hooks). The zero value is unlocked.
type SpinLock struct{ v atomic.Int32 }

// Lock acquires the lock.
func (s *SpinLock) Lock() {
	procPin()
	for i := 0; !s.v.CompareAndSwap(0, 1); i++ {
		if i >= 200 {
			rawSleep(10_000)
		}
	}
}

// Unlock releases the lock.
func (s *SpinLock) Unlock() {
	s.v.Store(0)
	procUnpin()
}
