// gchold.go: garbage collections held off while a first walk fills its
// table (holdGC). A collection that starts while the table fills ends
// only when the fill does (every flow written gives it more to mark) and
// its idle worker spins on the other core meanwhile (78-81 ms of CPU at
// 100,000 sockets); a forced collection before the fill
// instead marked the whole heap on the sampler's own path (4-18 ms at
// 100,000 sockets in the benchmark). Held off, the process's
// next collection comes after the first sample, in the time between two
// samples.
package tcpmon

import (
	"runtime/debug"
	"sync"
)

// gcHold counts the holds in force (several samplers may fill a table at
// once) and keeps the GC percentage to restore when the last one ends.
var gcHold struct {
	sync.Mutex
	n       int
	percent int
}

// holdGC turns collections off (debug.SetGCPercent(-1), which also waits
// for one in progress to end) until the returned function is called.
// A memory limit (GOMEMLIMIT) still applies.
func holdGC() (release func()) {
	gcHold.Lock()
	defer gcHold.Unlock()
	if gcHold.n == 0 {
		gcHold.percent = debug.SetGCPercent(-1)
	}
	gcHold.n++
	var once sync.Once
	return func() { once.Do(releaseGC) }
}

// releaseGC ends one hold; the last restores the GC percentage.
func releaseGC() {
	gcHold.Lock()
	defer gcHold.Unlock()
	gcHold.n--
	if gcHold.n == 0 {
		debug.SetGCPercent(gcHold.percent)
	}
}
