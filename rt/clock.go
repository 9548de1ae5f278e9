// clock.go: Monotonic, the wire's clock.
package rt

import "github.com/lanes-net/lanes/internal/monoclock"

// Monotonic returns CLOCK_MONOTONIC in ns, the clock of the wire's
// absolute deadlines and of the times in replies: Go's own monotonic
// reading (the same clock, through the vDSO, no system call) from a base
// whose CLOCK_MONOTONIC was measured once at start, exact to well under a
// microsecond.
func Monotonic() int64 { return monoclock.Now() }
