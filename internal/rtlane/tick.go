// tick.go: a granted reader keeps its P's schedtick fresh.
//
// A locked goroutine that only ever blocks in system calls never passes
// through Go's scheduler, so its P's schedtick never moves. sysmon
// (retake in runtime/proc.go) notes the tick when it first sees it and,
// once it has not moved for 10 ms, takes the P whenever it finds the
// goroutine in a system call; the note is not renewed by that, so from
// then on every sysmon pass takes it again. With no P in use sysmon then
// sleeps deeply, and the reader's next return from its read wakes it
// (exitsyscallTryGetP: the P lost, an idle one taken under sched.lock,
// sysmon's note woken); sysmon then polls every 20 µs at normal priority
// on a free CPU, on a 2-core machine the one where the client's next
// request wakes the reader, which then has to preempt it: a reschedule
// IPI to a running vCPU, tens of µs in this project's VM, where an idle,
// polling CPU needs none (docs/results/realtime.md, b8fa1f0). sysmon also
// marks every goroutine in a system call that holds its P at each pass
// (setBlockOnExitSyscall); preempted while it does, it leaves that thread
// spinning in exitsyscall, so the fewer passes the better.
//
// A voluntary yield moves the tick: runtime.Gosched on a locked goroutine
// is a hand-off through another thread and back (stoplockedm), tens of µs
// on a normal-priority thread, so it is done after a reply, off the path,
// and at most every FreshTickEvery: often enough that sysmon, whose
// relaxed period is 10 ms, never sees the same tick 10 ms apart.
package rtlane

import "runtime"

// FreshTickEvery is the longest a granted reader goes without a yield
// while it has requests (ns).
const FreshTickEvery = 4_000_000

// FreshTick yields when the last yield, at last, is FreshTickEvery or
// more ago, and returns the time of the last yield. Any locked realtime
// goroutine of the daemon's process that blocks only in system calls
// (the lab's deadline receiver too) calls it after its work, off the path.
func FreshTick(last int64) int64 {
	now := Monotonic()
	if now-last < FreshTickEvery {
		return last
	}
	runtime.Gosched()
	return Monotonic()
}
