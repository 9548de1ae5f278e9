// host.go: the namespace's host datapath as the daemon holds it, in the
// small interfaces the daemon's files declare for what each does with it:
// ruleMaps (state.go), socketLanes (livesockets.go), egressTree (state.go)
// and hostCore below. The kernel's host (*datapath.Host) is the wiring of
// its owners (lane maps, trees, background class, yield, caps, cgroup
// programs, congestion controls); each role is taken from the owner that
// has it, a role two owners serve from a struct of both (coopHost,
// rledbatKernelHost, ...). In tests, datapathtest's in-memory host has
// the maps and trees only. The parts a host may lack (hostParts) are set
// when it is wrapped, each checked when the code compiles.
package daemon

import (
	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/coop"
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
	accounts accounter       // account.go: status
}

// cookieLanes is the socket lanes as coop and rLEDBAT read them: one
// socket's, and the map itself for a reader in the kernel.
type cookieLanes interface {
	SocketLane(cookie uint64) (lane.Lane, bool)
	CookieMap() *ebpf.Map
}

// coopHost is coopDatapath from the kernel host's owners.
type coopHost struct {
	cookieLanes
	coop.UplinkSetter
	coop.DownlinkSetter
	coop.AckClassSetter
}

// rwndCaps is the downlink caps rLEDBAT keeps its windows under.
type rwndCaps interface {
	SocketRwndCap(cookie uint64) uint32
}

// capabilities says which of the host's optional capabilities run.
type capabilities interface {
	Capabilities() map[datapath.Capability]string
}

// rledbatKernelHost is rledbatHost from the kernel host's owners.
type rledbatKernelHost struct {
	cookieLanes
	*datapath.FgYield // BackgroundYielding
	rwndCaps
	capabilities
}

// kernelYielder is yielder from the kernel host's owners.
type kernelYielder struct {
	*datapath.FgYield            // ForegroundStates
	*datapath.CongestionControls // BackgroundCC
}

// kernelAppCCs is appCCs from the kernel host's owners.
type kernelAppCCs struct {
	*datapath.CgroupPrograms     // SocketAppCC
	*datapath.CongestionControls // OwnCCs
}

// kernelHost is the daemon's view of the kernel's host datapath: each
// role from the owner that has it.
func kernelHost(h *datapath.Host) *datapathHost {
	coopParts := coopHost{cookieLanes: h.Lanes, UplinkSetter: h.Caps, DownlinkSetter: h.Caps, AckClassSetter: h.Trees}
	rl := rledbatKernelHost{cookieLanes: h.Lanes, FgYield: h.Yield, rwndCaps: h.Caps, capabilities: h}
	yl := kernelYielder{FgYield: h.Yield, CongestionControls: h.CCs}
	ccs := kernelAppCCs{CgroupPrograms: h.Programs, CongestionControls: h.CCs}
	return &datapathHost{core: h, rules: h.Lanes, sockets: h.Lanes, openEgress: func(c datapath.EgressConfig) (egressTree, bgEgress, error) {
		e, err := datapath.OpenEgress(h, c)
		if err != nil {
			return nil, nil, err // nil interfaces, not a nil *Egress in them
		}
		return e, e, nil
	}, parts: hostParts{counters: h, appCCs: ccs, ccAllow: h.Programs, coop: coopParts, yielder: yl, bgudp: h.Background, rledbat: rl,
		liveCC: h.Programs, bgFlows: h.Background, exeLanes: h.Programs, bgTable: h.Background, udpBytes: h.Lanes,
		accounts: h.Yield}}
}

// roles are the host's optional parts; none without a host.
func (h *datapathHost) roles() hostParts {
	if h == nil {
		return hostParts{}
	}
	return h.parts
}
