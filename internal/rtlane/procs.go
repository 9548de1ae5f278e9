// procs.go: enough of Go's Ps for the lane's realtime threads.
//
// A thread blocked in a system call keeps its P until sysmon takes it
// (docs/realtime.md has the runtime's rules), and a woken reader whose P was
// taken needs an idle one at once; if there is none it waits for a
// normal-priority thread to hand it one, however high its own priority.
// The releaser and every granted client's reader spend nearly all their
// time blocked, so each may be holding a P at any moment: the lane keeps
// GOMAXPROCS at the CPUs, plus procsSpare for the daemon's own goroutines,
// plus one per realtime thread (the releaser and up to procsMaxReaders
// readers; more readers share the spare Ps). It only ever raises
// GOMAXPROCS (a stop-the-world, once per new granted client at most).
package rtlane

import (
	"runtime"
	"sync"
)

const (
	procsSpare      = 2 // Ps beyond the CPUs kept free of realtime threads
	procsMaxReaders = 8 // readers counted; beyond, the GC's dedicated workers (a quarter of the Ps) would outnumber the CPUs too far
)

var procsMu sync.Mutex // serializes GOMAXPROCS changes of all lanes

// wantProcs is the GOMAXPROCS the lane needs with this many granted readers.
func wantProcs(readers int) int {
	return runtime.NumCPU() + procsSpare + 1 + min(max(readers, 1), procsMaxReaders)
}

// ensureProcs raises GOMAXPROCS to what the lane's threads need now.
func (l *Lane) ensureProcs() {
	l.connMu.Lock()
	want := wantProcs(l.wake.grantedConns)
	l.connMu.Unlock()
	procsMu.Lock()
	defer procsMu.Unlock()
	if runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}
