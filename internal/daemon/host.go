// host.go: the namespace's host datapath as the daemon holds it. One value
// (*datapath.Host; in tests, datapathtest's in-memory host) is seen
// through the small interfaces the daemon's files declare for what each
// does with it: ruleMaps (state.go), socketLanes (livesockets.go),
// egressTree (state.go) and hostCore below. The parts a host may lack are
// found on it by type assertion (hostPart); the kernel's host has every
// one of them, which the declarations at the end check when it compiles.
package daemon

import (
	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
)

// hostCore is what the daemon does with any host datapath beside its
// maps: the lane cgroups (their rule entries, `lanes run`) and closing it.
type hostCore interface {
	LaneCgroup(l lane.Lane) (path string, id uint64, err error)
	Close() error
}

// datapathHost is the host datapath the daemon runs on, one value in
// each of its roles.
type datapathHost struct {
	core    hostCore    // the host itself: hostPart looks for the optional parts on it
	rules   ruleMaps    // state.go, registrations.go
	sockets socketLanes // livesockets.go, livemove.go, explain.go, udpflows.go
	// openEgress installs (or adopts) an interface's tree running the
	// host's classifier, in the calling thread's network namespace.
	openEgress func(datapath.EgressConfig) (egressTree, error)
}

// kernelHost is the daemon's view of the kernel's host datapath.
func kernelHost(h *datapath.Host) *datapathHost {
	return &datapathHost{core: h, rules: h, sockets: h, openEgress: func(c datapath.EgressConfig) (egressTree, error) {
		e, err := datapath.OpenEgress(h, c)
		if err != nil {
			return nil, err // a nil interface, not a nil *Egress in one
		}
		return e, nil
	}}
}

// hostPart returns the host's optional part T; false without a host or
// when the host lacks it.
func hostPart[T any](h *datapathHost) (T, bool) {
	if h == nil {
		var none T
		return none, false
	}
	p, ok := h.core.(T)
	return p, ok
}

// The optional parts, each declared where it is used; the kernel's host
// has them all.
var (
	_ hostCounters    = (*datapath.Host)(nil) // daemon.go: status
	_ appCCs          = (*datapath.Host)(nil) // cookies.go
	_ coopDatapath    = (*datapath.Host)(nil) // components.go
	_ yielder         = (*datapath.Host)(nil) // components.go
	_ bgudp.Datapath  = (*datapath.Host)(nil) // components.go, bgudp.go
	_ rledbatHost     = (*datapath.Host)(nil) // rledbat.go
	_ liveApplier     = (*datapath.Host)(nil) // livemove.go
	_ bgFlowForgetter = (*datapath.Host)(nil) // livemove.go
	_ exeLaner        = (*datapath.Host)(nil) // livemove.go
	_ bgTable         = (*datapath.Host)(nil) // udpflows.go
)
