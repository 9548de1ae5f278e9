// wake.go: the lane's CPU wake-up latency request (Config.PMLatencyUS).
// A granted client's request wakes the reader thread that admits it; on an
// idle machine the CPU it wakes on may be in an idle state (in a VM, a
// halted vCPU), and leaving it adds tens to hundreds of µs to the daemon
// path. While at least one granted client is connected, the lane holds a
// PM QoS request (internal/pmqos) that keeps idle CPUs shallow; the last
// granted client's leaving ends it. The connection table's lock (conn.go)
// guards the fields below.
package rtlane

import (
	"log/slog"

	"github.com/lanes-net/lanes/internal/pmqos"
)

// wakeState is the request and what status shows of it.
type wakeState struct {
	latencyUS    int // Config.PMLatencyUS: below 0, no request
	log          *slog.Logger
	grantedConns int
	pm           *pmqos.Request
	pmErr        string // why the last request failed, "" if none
}

// grantedJoined counts a granted connection in; the first one makes the
// request. Called with the connection table's lock held.
func (w *wakeState) grantedJoined() {
	w.grantedConns++
	if w.grantedConns != 1 || w.latencyUS < 0 {
		return
	}
	pm, err := pmqos.Hold(w.latencyUS)
	if err != nil {
		w.pmErr = err.Error()
		w.log.Warn("realtime: cannot hold the CPU wake-up latency (pm_latency_us); reader wake-ups may be slower",
			"pm_latency_us", w.latencyUS, "err", err)
		return
	}
	w.pm, w.pmErr = pm, ""
}

// grantedLeft counts a granted connection out; the last one ends the
// request. Called with the connection table's lock held.
func (w *wakeState) grantedLeft() {
	if w.grantedConns--; w.grantedConns > 0 {
		return
	}
	_ = w.pm.Close()
	w.pm = nil
}

// wakeStats is what a Snapshot shows of the request: the latency held
// now (-1: none) and the last error.
func (w *wakeState) wakeStats() (heldUS int, err string) {
	if w.pm == nil {
		return -1, w.pmErr
	}
	return w.latencyUS, w.pmErr
}
