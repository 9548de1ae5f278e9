// clock.go: Monotonic, the wire's clock (CLOCK_MONOTONIC).
package rt

import "github.com/lanes-net/lanes/internal/monoclock"

// Monotonic returns CLOCK_MONOTONIC in ns, the clock of the wire's
// absolute deadlines and of the times in replies. It costs a time.Now
// (no system call) and matches the kernel's clock to within
// monoclock's calibration (typically well under a microsecond), fixed
// for the process's life.
func Monotonic() int64 { return monoclock.Now() }
