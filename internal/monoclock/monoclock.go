// Package monoclock reads CLOCK_MONOTONIC, the clock of the realtime lane's
// deadlines, of lanes-rtd, of the kernel's timestamps (bpf_ktime_get_ns)
// and of clock_nanosleep, in nanoseconds, without reaching into the
// runtime's internals.
//
// Go's monotonic reading (time.Since of a time.Time from time.Now) is that
// same clock through the vDSO, ~30 ns a read, but counted from an instant of
// the runtime's choosing; the clock_gettime system call gives the absolute
// value but costs ~400 ns on the project's VM. Now is the absolute value at
// the vDSO's cost: time.Since a base instant plus the base's
// CLOCK_MONOTONIC, measured once at start between two monotonic reads.
//
// NowNoSplit reads the clock by a raw system call instead, for a loop that
// must have no stack check (latency's measuring loop): Go's monotonic read
// passes through a function that has one, a point where a cooperative
// preemption parks the thread.
//
// Note: the base is exact to within half the tightest of a few bracketed
// calibration reads (Uncertainty, typically well under 1 µs); every reading
// shares the same offset, so differences between two Now are exact.
package monoclock

import (
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	base        time.Time // a monotonic instant
	baseNs      int64     // CLOCK_MONOTONIC at base
	uncertainty time.Duration
)

func init() { base, baseNs, uncertainty = calibrate() }

// Now returns CLOCK_MONOTONIC in nanoseconds.
func Now() int64 { return baseNs + int64(time.Since(base)) }

// NowNoSplit returns CLOCK_MONOTONIC in nanoseconds by a raw
// clock_gettime system call (no vDSO, no entersyscall): ~10x the cost of
// Now, but callable from go:nosplit code without a preemption point.
//
//go:nosplit
func NowNoSplit() int64 {
	var ts unix.Timespec
	syscall.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Sec*1e9 + ts.Nsec
}

// Uncertainty bounds |Now - clock_gettime(CLOCK_MONOTONIC)| read at the
// same instant.
func Uncertainty() time.Duration { return uncertainty }

// calibrate brackets a clock_gettime between two monotonic reads, keeps
// the tightest of a few (one preempted read would widen its bracket), and
// places the system call's reading at its bracket's middle.
func calibrate() (time.Time, int64, time.Duration) {
	var (
		at   time.Time
		ns   int64
		best = time.Duration(1 << 62)
	)
	for i := 0; i < 16; i++ {
		var ts unix.Timespec
		a := time.Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			panic("monoclock: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
		}
		w := time.Since(a)
		if w < best {
			at, ns, best = a, ts.Nano()-int64(w/2), w
		}
	}
	return at, ns, best/2 + 1
}
