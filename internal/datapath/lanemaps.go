// lanemaps.go: the host's lane maps, which the classifier and sock_ops
// share (internal/bpf/include/lanes_maps.h): the rules the daemon writes
// (5-tuple, destination prefix, cgroup, uid, DSCP) and the lane of a
// socket by cookie, which beats them all. LaneMaps owns them; every access
// runs under the host's read lock (guard.go): after Close it returns
// errClosed.
package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lane"
)

// LaneMaps is the host's lane maps: the rules and the socket lanes.
type LaneMaps struct {
	guard  *guard
	cls    *classifier.ClassifierObjects
	ops    *sockops.Objects // nil without CapSockops: no socket is known seen
	shapes tupleShapes      // lanes_tuple's keys per shape (tupleshapes.go)
}

// laneValue is a lane as the maps store it; Unset and values past
// background are refused.
func laneValue(l lane.Lane) (uint32, error) {
	if l < lane.Realtime || l > lane.Background {
		return 0, fmt.Errorf("datapath: invalid lane %d", l)
	}
	return uint32(l), nil
}

// SetFlowLane puts a 5-tuple in a lane (replacing any earlier lane).
func (m *LaneMaps) SetFlowLane(f FlowKey, l lane.Lane) error {
	k, err := f.key()
	if err != nil {
		return err
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return m.guard.use(func() error {
		if err := m.shapes.put(m.cls.LanesTuple, m.cls.LanesTupleShapes, k, v); err != nil {
			return fmt.Errorf("register flow %s: %w", f, err)
		}
		return nil
	})
}

// DeleteFlow removes a registered 5-tuple; a missing one is not an error.
func (m *LaneMaps) DeleteFlow(f FlowKey) error {
	k, err := f.key()
	if err != nil {
		return err
	}
	return m.guard.use(func() error {
		return ignoreNotExist(m.shapes.del(m.cls.LanesTuple, m.cls.LanesTupleShapes, k), "unregister flow "+f.String())
	})
}

// Flows lists the registered 5-tuples.
func (m *LaneMaps) Flows() ([]FlowEntry, error) {
	var out []FlowEntry
	err := m.guard.use(func() error {
		var k abi.FlowKey
		var v uint32
		it := m.cls.LanesTuple.Iterate()
		for it.Next(&k, &v) {
			out = append(out, FlowEntry{FlowKey: FlowKey{Src: k.Src(), Dst: k.Addr(), DPort: k.Dport, SPort: k.Sport, Proto: k.Proto}, Lane: lane.Lane(v)})
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("list flows: %w", err)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b FlowEntry) int {
		return cmp.Or(a.Dst.Compare(b.Dst), cmp.Compare(a.DPort, b.DPort), cmp.Compare(a.SPort, b.SPort), a.Src.Compare(b.Src), cmp.Compare(a.Proto, b.Proto))
	})
	return out, err
}

// DstRule is a destination prefix and port (0 = any port).
type DstRule struct {
	Prefix netip.Prefix `json:"prefix"`
	DPort  uint16       `json:"dport,omitempty"`
}

func (r DstRule) String() string {
	if r.DPort == 0 {
		return r.Prefix.String()
	}
	return fmt.Sprintf("%s port %d", r.Prefix, r.DPort)
}

// SetDstLane puts the traffic to a destination prefix (and port) in a
// lane. Longest prefix wins; a rule with the packet's port beats one for
// any port.
func (m *LaneMaps) SetDstLane(r DstRule, l lane.Lane) error {
	if !r.Prefix.IsValid() {
		return errors.New("datapath: destination rule without a prefix")
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return m.guard.use(func() error {
		if err := m.cls.LanesDst.Put(abi.NewDstKey(r.Prefix, r.DPort), v); err != nil {
			return fmt.Errorf("destination %s -> %s: %w", r, l, err)
		}
		return nil
	})
}

// DeleteDst removes a destination rule; a missing one is not an error.
func (m *LaneMaps) DeleteDst(r DstRule) error {
	return m.guard.use(func() error {
		return ignoreNotExist(m.cls.LanesDst.Delete(abi.NewDstKey(r.Prefix, r.DPort)), "delete destination "+r.String())
	})
}

// SetCgroupLane puts every socket of the cgroup v2 with this id in a lane.
func (m *LaneMaps) SetCgroupLane(cgroupID uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return m.guard.use(func() error {
		if err := m.cls.LanesCgroup.Put(cgroupID, v); err != nil {
			return fmt.Errorf("cgroup %d -> %s: %w", cgroupID, l, err)
		}
		return nil
	})
}

// DeleteCgroup forgets a cgroup's lane.
func (m *LaneMaps) DeleteCgroup(cgroupID uint64) error {
	return m.guard.use(func() error {
		return ignoreNotExist(m.cls.LanesCgroup.Delete(cgroupID), fmt.Sprintf("delete cgroup %d", cgroupID))
	})
}

// SetUIDLane puts every socket owned by uid in a lane.
func (m *LaneMaps) SetUIDLane(uid uint32, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return m.guard.use(func() error {
		if err := m.cls.LanesUid.Put(uid, v); err != nil {
			return fmt.Errorf("uid %d -> %s: %w", uid, l, err)
		}
		return nil
	})
}

// DeleteUID forgets a uid's lane.
func (m *LaneMaps) DeleteUID(uid uint32) error {
	return m.guard.use(func() error {
		return ignoreNotExist(m.cls.LanesUid.Delete(uid), fmt.Sprintf("delete uid %d", uid))
	})
}

// SetDSCPLane maps a DSCP code point to a lane, for the classifier (each
// packet) and sock_ops (a TCP socket's own marking at connect); lane.Unset
// removes the mapping. A new host maps none.
func (m *LaneMaps) SetDSCPLane(dscp uint8, l lane.Lane) error {
	if dscp > 63 {
		return fmt.Errorf("datapath: DSCP %d out of range", dscp)
	}
	v := uint32(0)
	if l != lane.Unset {
		var err error
		if v, err = laneValue(l); err != nil {
			return err
		}
	}
	return m.guard.use(func() error {
		if err := m.cls.LanesDscp.Put(uint32(dscp), v); err != nil {
			return fmt.Errorf("dscp %d -> %s: %w", dscp, l, err)
		}
		// sock_ops reads the same table for a socket's own marking at
		// connect (dscp.h): its congestion control follows the lane
		if m.ops != nil && m.ops.LanesOpsDscp != nil {
			if err := m.ops.LanesOpsDscp.Put(uint32(dscp), v); err != nil {
				return fmt.Errorf("dscp %d -> %s (sock_ops): %w", dscp, l, err)
			}
		}
		return nil
	})
}

// SocketLane returns the lane sock_ops (or SetSocketLane) stored for a
// socket cookie; false when the socket has none (it is then classified per
// packet, by default interactive).
func (m *LaneMaps) SocketLane(cookie uint64) (lane.Lane, bool) {
	var v uint32
	if m.guard.use(func() error { return m.cls.LanesCookie.Lookup(cookie, &v) }) != nil || v < 1 || v > 3 {
		return lane.Unset, false
	}
	return lane.Lane(v), true
}

// CookieMap is the socket cookie -> lane map itself, for a reader that
// resolves lanes in the kernel (the monitor's BPF iterator); it stays valid
// for the reader after the datapath closes (the kernel holds a reference).
func (m *LaneMaps) CookieMap() *ebpf.Map { return m.cls.LanesCookie }

// SetSocketLane puts one socket (by cookie) in a lane; it beats every other rule.
// A socket sock_ops knew that closes meanwhile keeps no entry: its close
// removed its entries before or after the write, and a write after it is
// undone (lanes_sock_seen is gone by then).
func (m *LaneMaps) SetSocketLane(cookie uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return m.guard.use(func() error {
		managed := m.sockSeen(cookie)
		if err := m.cls.LanesCookie.Put(cookie, v); err != nil {
			return fmt.Errorf("socket %d -> %s: %w", cookie, l, err)
		}
		if managed && !m.sockSeen(cookie) {
			return ignoreNotExist(m.cls.LanesCookie.Delete(cookie), fmt.Sprintf("socket %d closed", cookie))
		}
		return nil
	})
}

// RestoreSocketLane gives a socket back a lane only while it still has an
// entry: the entry of a socket that closed is gone (sock_ops removed it)
// and no restore brings it back.
func (m *LaneMaps) RestoreSocketLane(cookie uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return m.guard.use(func() error {
		return ignoreNotExist(m.cls.LanesCookie.Update(cookie, v, ebpf.UpdateExist), fmt.Sprintf("socket %d -> %s", cookie, l))
	})
}

// sockSeen: sock_ops has seen the socket and it has not closed.
func (m *LaneMaps) sockSeen(cookie uint64) bool {
	var seen uint8
	return m.ops != nil && m.ops.LanesSockSeen.Lookup(cookie, &seen) == nil
}

// ClearSocketLane forgets a socket's lane (by cookie): its packets are then
// classified by 3-tuple, cgroup, uid or marking again. A socket never seen is
// not an error.
func (m *LaneMaps) ClearSocketLane(cookie uint64) error {
	return m.guard.use(func() error {
		return ignoreNotExist(m.cls.LanesCookie.Delete(cookie), fmt.Sprintf("socket %d", cookie))
	})
}
