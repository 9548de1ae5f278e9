// lanemaps.go: the host's lane maps, which the classifier and sock_ops
// share (internal/bpf/include/lanes_maps.h): the rules the daemon writes
// (5-tuple, destination prefix, cgroup, uid, DSCP) and the lane of a
// socket by cookie, which beats them all. Every access runs under the
// host's read lock (use): after Close it returns errClosed.
package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
)

// laneValue is a lane as the maps store it; Unset and values past
// background are refused.
func laneValue(l lane.Lane) (uint32, error) {
	if l < lane.Realtime || l > lane.Background {
		return 0, fmt.Errorf("datapath: invalid lane %d", l)
	}
	return uint32(l), nil
}

// SetFlowLane puts a 5-tuple in a lane (replacing any earlier lane).
func (h *Host) SetFlowLane(f FlowKey, l lane.Lane) error {
	k, err := f.key()
	if err != nil {
		return err
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.shapes.put(h.cls.LanesTuple, h.cls.LanesTupleShapes, k, v); err != nil {
			return fmt.Errorf("register flow %s: %w", f, err)
		}
		return nil
	})
}

// DeleteFlow removes a registered 5-tuple; a missing one is not an error.
func (h *Host) DeleteFlow(f FlowKey) error {
	k, err := f.key()
	if err != nil {
		return err
	}
	return h.use(func() error {
		return ignoreNotExist(h.shapes.del(h.cls.LanesTuple, h.cls.LanesTupleShapes, k), "unregister flow "+f.String())
	})
}

// Flows lists the registered 5-tuples.
func (h *Host) Flows() ([]FlowEntry, error) {
	var out []FlowEntry
	err := h.use(func() error {
		var k abi.FlowKey
		var v uint32
		it := h.cls.LanesTuple.Iterate()
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
func (h *Host) SetDstLane(r DstRule, l lane.Lane) error {
	if !r.Prefix.IsValid() {
		return errors.New("datapath: destination rule without a prefix")
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.cls.LanesDst.Put(abi.NewDstKey(r.Prefix, r.DPort), v); err != nil {
			return fmt.Errorf("destination %s -> %s: %w", r, l, err)
		}
		return nil
	})
}

// DeleteDst removes a destination rule; a missing one is not an error.
func (h *Host) DeleteDst(r DstRule) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesDst.Delete(abi.NewDstKey(r.Prefix, r.DPort)), "delete destination "+r.String())
	})
}

// SetCgroupLane puts every socket of the cgroup v2 with this id in a lane.
func (h *Host) SetCgroupLane(cgroupID uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.cls.LanesCgroup.Put(cgroupID, v); err != nil {
			return fmt.Errorf("cgroup %d -> %s: %w", cgroupID, l, err)
		}
		return nil
	})
}

// DeleteCgroup forgets a cgroup's lane.
func (h *Host) DeleteCgroup(cgroupID uint64) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesCgroup.Delete(cgroupID), fmt.Sprintf("delete cgroup %d", cgroupID))
	})
}

// SetUIDLane puts every socket owned by uid in a lane.
func (h *Host) SetUIDLane(uid uint32, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.cls.LanesUid.Put(uid, v); err != nil {
			return fmt.Errorf("uid %d -> %s: %w", uid, l, err)
		}
		return nil
	})
}

// DeleteUID forgets a uid's lane.
func (h *Host) DeleteUID(uid uint32) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesUid.Delete(uid), fmt.Sprintf("delete uid %d", uid))
	})
}

// SetDSCPLane maps a DSCP code point to a lane, for the classifier (each
// packet) and sock_ops (a TCP socket's own marking at connect); lane.Unset
// removes the mapping. A new host maps none.
func (h *Host) SetDSCPLane(dscp uint8, l lane.Lane) error {
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
	return h.use(func() error {
		if err := h.cls.LanesDscp.Put(uint32(dscp), v); err != nil {
			return fmt.Errorf("dscp %d -> %s: %w", dscp, l, err)
		}
		// sock_ops reads the same table for a socket's own marking at
		// connect (dscp.h): its congestion control follows the lane
		if h.ops != nil && h.ops.LanesOpsDscp != nil {
			if err := h.ops.LanesOpsDscp.Put(uint32(dscp), v); err != nil {
				return fmt.Errorf("dscp %d -> %s (sock_ops): %w", dscp, l, err)
			}
		}
		return nil
	})
}

// SocketLane returns the lane sock_ops (or SetSocketLane) stored for a
// socket cookie; false when the socket has none (it is then classified per
// packet, by default interactive).
func (h *Host) SocketLane(cookie uint64) (lane.Lane, bool) {
	var v uint32
	if h.use(func() error { return h.cls.LanesCookie.Lookup(cookie, &v) }) != nil || v < 1 || v > 3 {
		return lane.Unset, false
	}
	return lane.Lane(v), true
}

// CookieMap is the socket cookie -> lane map itself, for a reader that
// resolves lanes in the kernel (the monitor's BPF iterator); it stays valid
// for the reader after the datapath closes (the kernel holds a reference).
func (h *Host) CookieMap() *ebpf.Map { return h.cls.LanesCookie }

// SetSocketLane puts one socket (by cookie) in a lane; it beats every other rule.
// A socket sock_ops knew that closes meanwhile keeps no entry: its close
// removed its entries before or after the write, and a write after it is
// undone (lanes_sock_seen is gone by then).
func (h *Host) SetSocketLane(cookie uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		managed := h.sockSeen(cookie)
		if err := h.cls.LanesCookie.Put(cookie, v); err != nil {
			return fmt.Errorf("socket %d -> %s: %w", cookie, l, err)
		}
		if managed && !h.sockSeen(cookie) {
			return ignoreNotExist(h.cls.LanesCookie.Delete(cookie), fmt.Sprintf("socket %d closed", cookie))
		}
		return nil
	})
}

// RestoreSocketLane gives a socket back a lane only while it still has an
// entry: the entry of a socket that closed is gone (sock_ops removed it)
// and no restore brings it back.
func (h *Host) RestoreSocketLane(cookie uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesCookie.Update(cookie, v, ebpf.UpdateExist), fmt.Sprintf("socket %d -> %s", cookie, l))
	})
}

// sockSeen: sock_ops has seen the socket and it has not closed.
func (h *Host) sockSeen(cookie uint64) bool {
	var seen uint8
	return h.ops != nil && h.ops.LanesSockSeen.Lookup(cookie, &seen) == nil
}

// ClearSocketLane forgets a socket's lane (by cookie): its packets are then
// classified by 3-tuple, cgroup, uid or marking again. A socket never seen is
// not an error.
func (h *Host) ClearSocketLane(cookie uint64) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesCookie.Delete(cookie), fmt.Sprintf("socket %d", cookie))
	})
}
