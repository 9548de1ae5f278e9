// clock.go: Monotonic, the wire's clock (CLOCK_MONOTONIC) read through
// time's monotonic reading, anchored to the kernel's clock once.
package rt

import (
	"time"

	"golang.org/x/sys/unix"
)

// anchor pairs a time.Time (with its monotonic reading) with the
// CLOCK_MONOTONIC ns it was taken at; err bounds the pairing's error (ns).
var anchor = newAnchor()

type monoAnchor struct {
	at   time.Time
	mono int64
	err  int64
}

// newAnchor reads CLOCK_MONOTONIC between two time.Now calls and keeps
// the tightest of a few brackets, its midpoint as the pairing. Go's own
// monotonic reading is CLOCK_MONOTONIC too (the runtime's nanotime, read
// through the vDSO), so the pairing holds for the life of the process.
func newAnchor() monoAnchor {
	best := monoAnchor{err: 1 << 62}
	for i := 0; i < 1000 && best.err > 500; i++ {
		var ts unix.Timespec
		a := time.Now()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
			panic("lanes rt: clock_gettime(CLOCK_MONOTONIC) failed")
		}
		b := time.Now()
		half := b.Sub(a) / 2
		if int64(half) < best.err {
			best = monoAnchor{at: a.Add(half), mono: ts.Nano(), err: int64(half)}
		}
	}
	return best
}

// Monotonic returns CLOCK_MONOTONIC in ns, the clock of the wire's
// absolute deadlines and of the times in replies. It costs a time.Now
// (no system call); it matches the kernel's clock to within a
// microsecond or so, fixed for the process's life.
func Monotonic() int64 { return anchor.mono + int64(time.Since(anchor.at)) }
