// wake.go: the lane's CPU wake-up latency request (Config.PMLatencyUS).
// A granted client's request wakes the reader thread that admits it; on an
// idle machine the CPU it wakes on may be in an idle state (in a VM, a
// halted vCPU), and leaving it adds tens to hundreds of µs to the daemon
// path. While at least one granted client is connected, the lane holds a
// PM QoS request (internal/pmqos) that keeps idle CPUs shallow; the last
// granted client's leaving ends it. connMu guards the fields below.
package rtlane

import (
	"github.com/lanes-net/lanes/internal/pmqos"
)

// wakeState is the request and what status shows of it.
type wakeState struct {
	grantedConns int
	pm           *pmqos.Request
	pmErr        string // why the last request failed, "" if none
}

// grantedJoined counts a granted connection in; the first one makes the
// request. Called with connMu held.
func (l *Lane) grantedJoined() {
	l.wake.grantedConns++
	if l.wake.grantedConns != 1 || l.cfg.PMLatencyUS < 0 {
		return
	}
	pm, err := pmqos.Hold(l.cfg.PMLatencyUS)
	if err != nil {
		l.wake.pmErr = err.Error()
		l.log.Warn("realtime: cannot hold the CPU wake-up latency (pm_latency_us); reader wake-ups may be slower",
			"pm_latency_us", l.cfg.PMLatencyUS, "err", err)
		return
	}
	l.wake.pm, l.wake.pmErr = pm, ""
}

// grantedLeft counts a granted connection out; the last one ends the
// request. Called with connMu held.
func (l *Lane) grantedLeft() {
	if l.wake.grantedConns--; l.wake.grantedConns > 0 {
		return
	}
	_ = l.wake.pm.Close()
	l.wake.pm = nil
}

// wakeStats is what a Snapshot shows of the request: the latency held
// now (-1: none) and the last error.
func (l *Lane) wakeStats() (heldUS int, err string) {
	if l.wake.pm == nil {
		return -1, l.wake.pmErr
	}
	return l.cfg.PMLatencyUS, l.wake.pmErr
}
