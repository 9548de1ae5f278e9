// tick.go: the lab's receiver keeps its P's schedtick fresh.
//
// The receiver is a locked goroutine on a SCHED_FIFO thread that only ever
// blocks in system calls, so it never passes through Go's scheduler and its
// P's schedtick never moves. sysmon (retake in runtime/proc.go) notes the
// tick when it first sees it and, once it has not moved for 10 ms, takes
// the P whenever it finds the goroutine in a system call; from then on
// every pass takes it again, and each return from the receiver's read
// needs an idle P and wakes sysmon, which then polls every 20 µs at normal
// priority on a free CPU. A voluntary yield moves the tick: runtime.Gosched
// on a locked goroutine is a hand-off through another thread and back, so
// it is done after a read, off the measured path, at most every
// freshTickEvery: often enough that sysmon, whose relaxed period is 10 ms,
// never sees the same tick 10 ms apart. (Measured on the daemon's own
// realtime threads before the data path moved to lanes-rtd:
// docs/results/realtime.md, b8fa1f0.)
package deadline

import (
	"runtime"

	"github.com/lanes-net/lanes/internal/rtlane"
)

// freshTickEvery is the longest the receiver goes without a yield (ns).
const freshTickEvery = 4_000_000

// freshTick yields when the last yield, at last, is freshTickEvery or
// more ago, and returns the time of the last yield.
func freshTick(last int64) int64 {
	now := rtlane.Monotonic()
	if now-last < freshTickEvery {
		return last
	}
	runtime.Gosched()
	return rtlane.Monotonic()
}
