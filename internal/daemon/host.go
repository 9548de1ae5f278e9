// host.go: the namespace's host datapath as the daemon holds it. One value
// (*datapath.Host; in tests, datapathtest's in-memory host) is seen
// through the small interfaces the daemon's files declare for what each
// does with it: ruleMaps (state.go), socketLanes (livesockets.go),
// egressTree (state.go) and hostCore below. The parts a host may lack
// (hostParts) are set when it is wrapped, each checked when the code
// compiles: the kernel's host has every one of them; the in-memory host
// none.
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
	core    hostCore    // the host itself
	rules   ruleMaps    // state.go, register.go
	sockets socketLanes // livesockets.go, livemove.go, explain.go, udpflows.go
	// openEgress installs (or adopts) an interface's tree running the
	// host's classifier, in the calling thread's network namespace; bg is
	// its background class's part (bgudp.go), nil where the tree lacks it.
	openEgress func(datapath.EgressConfig) (tree egressTree, bg bgEgress, err error)
	parts      hostParts
}

// hostParts are the roles a host datapath may lack, each declared where it
// is used; nil where the host lacks it.
type hostParts struct {
	counters hostCounters    // daemon.go: status
	appCCs   appCCs          // cookies.go
	ccAllow  ccAllowSyncer   // daemon.go: reload
	coop     coopDatapath    // components.go
	yielder  yielder         // components.go
	bgudp    bgudp.Datapath  // components.go, bgudp.go
	rledbat  rledbatHost     // rledbat.go
	liveCC   liveApplier     // livemove.go, livesockets.go
	bgFlows  bgFlowForgetter // livemove.go
	exeLanes exeLaner        // livemove.go
	bgTable  bgTable         // udpflows.go
	udpBytes udpByteCounts   // udpflows.go
}

// kernelHost is the daemon's view of the kernel's host datapath.
func kernelHost(h *datapath.Host) *datapathHost {
	return &datapathHost{core: h, rules: h, sockets: h, openEgress: func(c datapath.EgressConfig) (egressTree, bgEgress, error) {
		e, err := datapath.OpenEgress(h, c)
		if err != nil {
			return nil, nil, err // nil interfaces, not a nil *Egress in them
		}
		return e, e, nil
	}, parts: hostParts{counters: h, appCCs: h, ccAllow: h, coop: h, yielder: h, bgudp: h, rledbat: h, liveCC: h, bgFlows: h,
		exeLanes: h, bgTable: h, udpBytes: h}}
}

// roles are the host's optional parts; none without a host.
func (h *datapathHost) roles() hostParts {
	if h == nil {
		return hostParts{}
	}
	return h.parts
}
