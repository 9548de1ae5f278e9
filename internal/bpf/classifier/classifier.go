// classifier.go loads the lanes egress classifier: it sets the program's
// constant (HTB class minor base) and builds the
// map keys the program looks up. Attaching it is the datapath's job.
package classifier

import (
	"fmt"
	"net/netip"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
)

// Kind says how the classifier found a packet's lane (enum match_kind of
// lanes_abi.h); it indexes the counters.
type Kind uint32

const (
	KindCookie  = Kind(abi.AbiMatchKindMATCH_COOKIE)
	KindTuple   = Kind(abi.AbiMatchKindMATCH_TUPLE)
	KindCgroup  = Kind(abi.AbiMatchKindMATCH_CGROUP)
	KindUID     = Kind(abi.AbiMatchKindMATCH_UID)
	KindDSCP    = Kind(abi.AbiMatchKindMATCH_DSCP)
	KindDefault = Kind(abi.AbiMatchKindMATCH_DEFAULT)
	KindDst     = Kind(abi.AbiMatchKindMATCH_DST)
	NumKinds    = abi.MatchKinds
)

// kindNames are the header's names: "cookie", "tuple", ...
var kindNames = abi.MustNames("match_kind", "MATCH_", "MATCH_KINDS")

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind%d", uint32(k))
}

// Config is set into the program before load. The program reads headers
// relative to the network header, so one program serves Ethernet and
// raw-IP (TUN, WireGuard) devices alike.
type Config struct {
	// HoldArrivals holds the background non-TCP class's arrivals at the
	// yield's rate beside any present foreground, not only a harmed one
	// (bgclass.h's CLS_F_HOLD_ARRIVALS; a lab switch, to pair the share of
	// arrivals with the hold it replaced)
	HoldArrivals bool
	// UntoldHeld holds the background non-TCP class at the yield's rate
	// beside a present foreground no TCP RTT sample speaks for, and leaves
	// foreground non-TCP arrivals out of the presence stamp (bgclass.h's
	// CLS_F_UNTOLD_HELD; a lab switch, to pair the share beside an untold
	// foreground with the hold it replaced)
	UntoldHeld bool
	// DirectionsJoined holds the class both ways for either direction's
	// harm (bgclass.h's CLS_F_DIRS_JOINED; a lab switch, the rule
	// directions apart replaced)
	DirectionsJoined bool
	// QuietFixed: a foreground is quiet FG_QUIET_NS after its last stamp,
	// not six gaps between its stamps (bgclass.h's CLS_F_QUIET_FIXED;
	// a lab switch, the rule the measured quiet replaced)
	QuietFixed bool
}

// flagHoldArrivals, flagUntoldHeld, flagDirsJoined and flagQuietFixed are
// bgclass.h's CLS_F_HOLD_ARRIVALS, CLS_F_UNTOLD_HELD, CLS_F_DIRS_JOINED and
// CLS_F_QUIET_FIXED.
const (
	flagHoldArrivals = 1
	flagUntoldHeld   = 2
	flagDirsJoined   = 4
	flagQuietFixed   = 8
)

// Capacities are the entries each rule map of the classifier holds, read
// from its object: what a policy (and the API's registrations) may fill.
func Capacities() (map[string]uint32, error) {
	spec, err := LoadClassifier()
	if err != nil {
		return nil, err
	}
	out := map[string]uint32{}
	for _, name := range []string{"lanes_tuple", "lanes_dst", "lanes_cgroup", "lanes_uid"} {
		m, ok := spec.Maps[name]
		if !ok {
			return nil, fmt.Errorf("classifier object has no map %s", name)
		}
		out[name] = m.MaxEntries
	}
	return out, nil
}

// Load loads the classifier and its maps into the kernel, unattached.
func Load(cfg Config) (*ClassifierObjects, error) {
	spec, err := LoadClassifier()
	if err != nil {
		return nil, err
	}
	c := ClassifierClsConfig{MinorBase: abi.ClassMinor}
	if cfg.HoldArrivals {
		c.Flags |= flagHoldArrivals
	}
	if cfg.UntoldHeld {
		c.Flags |= flagUntoldHeld
	}
	if cfg.DirectionsJoined {
		c.Flags |= flagDirsJoined
	}
	if cfg.QuietFixed {
		c.Flags |= flagQuietFixed
	}
	if err := spec.Variables[ClassifierVarCFG].Set(c); err != nil {
		return nil, fmt.Errorf("set classifier config: %w", err)
	}
	var objs ClassifierObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("load classifier: %w", err)
	}
	return &objs, nil
}

// Shared returns the maps of lanes_maps.h by name, for the programs that
// share them (sock_ops) to load with.
func (o *ClassifierObjects) Shared() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		ClassifierMapLanesCookie:      o.LanesCookie,
		ClassifierMapLanesTuple:       o.LanesTuple,
		ClassifierMapLanesTupleShapes: o.LanesTupleShapes,
		ClassifierMapLanesDst:         o.LanesDst,
		ClassifierMapLanesCgroup:      o.LanesCgroup,
		ClassifierMapLanesUid:         o.LanesUid,
		ClassifierMapLanesSockRwnd:    o.LanesSockRwnd,
		ClassifierMapLanesFgActive:    o.LanesFgActive,
		ClassifierMapLanesFgOpen:      o.LanesFgOpen,
		ClassifierMapLanesFgHarm:      o.LanesFgHarm,
		ClassifierMapLanesRlFloor:     o.LanesRlFloor,
	}
}

// StatsIndex is the key of the (kind, lane) counter in lanes_cls_stats.
func StatsIndex(k Kind, l lane.Lane) uint32 { return uint32(k)*uint32(abi.LaneSlots) + uint32(l) }

// PutFlow puts a lanes_tuple key and adds its shape to lanes_tuple_shapes
// (never removing one: for tools and tests; the datapath's Host counts
// its keys per shape and clears a shape's bit with its last key).
func (m *ClassifierMaps) PutFlow(k abi.FlowKey, l lane.Lane) error {
	var mask uint32
	if err := m.LanesTupleShapes.Lookup(uint32(0), &mask); err != nil {
		return err
	}
	if err := m.LanesTupleShapes.Put(uint32(0), mask|FlowShape(k)); err != nil {
		return err
	}
	return m.LanesTuple.Put(k, uint32(l))
}

// FlowShape is the bit of lanes_tuple_shapes for k's shape (lanes_maps.h):
// bit 0 protocol and local address, 1 protocol only, 2 local address only,
// 3 neither.
func FlowShape(k abi.FlowKey) uint32 {
	i := 0
	if k.Proto == 0 {
		i += 2
	}
	if k.Saddr == ([16]uint8{}) {
		i++
	}
	return 1 << i
}

// FlowKey builds the lanes_tuple key of a 5-tuple; an invalid src is any
// local address, proto 0 any protocol (abi.NewFlowKey).
func FlowKey(src, dst netip.Addr, dport, sport uint16, proto uint8) abi.FlowKey {
	return abi.NewFlowKey(src, dst, dport, sport, proto)
}

// SumCounters adds up a per-CPU counter.
func SumCounters(per []abi.Counter) abi.Counter {
	var s abi.Counter
	for _, c := range per {
		s.Packets += c.Packets
		s.Bytes += c.Bytes
	}
	return s
}

// ReadStats returns the summed counters indexed by StatsIndex.
func ReadStats(m *ebpf.Map) ([NumKinds * abi.LaneSlots]abi.Counter, error) {
	var out [NumKinds * abi.LaneSlots]abi.Counter
	for i := range out {
		var per []abi.Counter
		if err := m.Lookup(uint32(i), &per); err != nil {
			return out, fmt.Errorf("read classifier counter %d: %w", i, err)
		}
		out[i] = SumCounters(per)
	}
	return out, nil
}

// Probe loads the classifier as the datapath does and unloads it: whether
// this kernel runs the real object (lanes doctor).
func Probe() error {
	objs, err := Load(Config{})
	if err != nil {
		return err
	}
	return objs.Close()
}
