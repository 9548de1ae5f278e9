// api.go is the small interface between the daemon and the datapath:
// HostAPI (the per-namespace maps and lane cgroups) and EgressAPI (one
// interface's tree). *Host and *Egress implement it in the kernel;
// internal/datapath/datapathtest implements it in memory, so the daemon's
// policy, reload and registration logic is table-tested without root.
package datapath

import "github.com/lanes-net/lanes/internal/lane"

// HostAPI is what the daemon does with a host datapath.
type HostAPI interface {
	SetFlowLane(FlowKey, lane.Lane) error
	DeleteFlow(FlowKey) error
	SetDstLane(DstRule, lane.Lane) error
	DeleteDst(DstRule) error
	SetCgroupLane(cgroupID uint64, l lane.Lane) error
	DeleteCgroup(cgroupID uint64) error
	SetUIDLane(uid uint32, l lane.Lane) error
	DeleteUID(uid uint32) error
	SetDSCPLane(dscp uint8, l lane.Lane) error // lane.Unset removes

	SocketLane(cookie uint64) (lane.Lane, bool)
	// SocketAppCC and OwnCCs: appcc.go
	SocketAppCC(cookie uint64) (string, bool)
	OwnCCs() map[string]string
	SetSocketLane(cookie uint64, l lane.Lane) error
	RestoreSocketLane(cookie uint64, l lane.Lane) error
	ClearSocketLane(cookie uint64) error
	SetLaneCwndCap(l lane.Lane, segs uint32) error
	SetSocketCwndCap(cookie uint64, segs uint32) error
	SetDownlinkCaps(on bool) error
	SetSocketRwndCap(cookie uint64, bytes uint32) error
	// the downloads' ACK class (ackclass.go): its rate (0 off), the bytes
	// it sent and the bytes the classifier gave it
	SetAckClassEvery(bits uint64) error
	AckClassSent() (uint64, error)
	AckClassBytes() (uint64, error)

	LaneCgroup(l lane.Lane) (path string, id uint64, err error)
	Stats() (HostStats, error)
	OpenEgress(EgressConfig) (EgressAPI, error)
	Close() error
}

// EgressAPI is what the daemon does with one interface's tree.
type EgressAPI interface {
	Config() EgressConfig
	// Update changes the tree's parameters and device queue in place.
	Update(EgressConfig) error
	Stats() (map[lane.Lane]LaneStats, error)
	// InteractiveLeaf is the interactive lane's leaf qdisc kind.
	InteractiveLeaf() string
	Close() error
}

var (
	_ HostAPI   = (*Host)(nil)
	_ EgressAPI = (*Egress)(nil)
)

// OpenEgress installs (or adopts) the tree of cfg.Interface with this
// host's classifier, in the calling thread's network namespace.
func (h *Host) OpenEgress(cfg EgressConfig) (EgressAPI, error) {
	e, err := OpenEgress(h, cfg)
	if err != nil {
		return nil, err
	}
	return e, nil
}
