// Package schedtick keeps a locked goroutine's P schedtick fresh, so that
// Go's sysmon does not take its P at every system call.
//
// A realtime goroutine (the lab's receiver, a realtime client) is locked to
// its thread and only ever blocks in system calls, so it never passes
// through Go's scheduler and its P's schedtick never moves. sysmon (retake
// in runtime/proc.go) notes the tick when it first sees it and, once it has
// not moved for 10 ms, takes the P whenever it finds the goroutine in a
// system call; from then on every pass takes it again, and each return from
// the goroutine's system call needs an idle P and wakes sysmon, which then
// polls every 20 µs at normal priority on a free CPU. A voluntary yield
// moves the tick: runtime.Gosched on a locked goroutine is a hand-off
// through another thread and back, so it is done after a read or reply,
// off the measured path, at most every Every: often enough that sysmon,
// whose relaxed period is 10 ms, never sees the same tick 10 ms apart
// (docs/realtime.md, "Keeping the schedtick fresh").
package schedtick

import (
	"runtime"
	"time"

	"github.com/lanes-net/lanes/internal/monoclock"
)

// Every is the longest a realtime goroutine goes without a yield: under
// sysmon's 10 ms with room for one missed pass.
const Every = 4 * time.Millisecond

// Fresh yields when the last yield, at last (CLOCK_MONOTONIC ns), is Every
// or more ago, and returns the time of the last yield.
func Fresh(last int64) int64 {
	now := monoclock.Now()
	if now-last < int64(Every) {
		return last
	}
	runtime.Gosched()
	return monoclock.Now()
}
