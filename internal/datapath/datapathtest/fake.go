// Package datapathtest is an in-memory host datapath for tests of the
// daemon's logic without root: it keeps the rule map entries, the socket
// lanes and the egress trees the daemon asked for, so a test can compare
// them with the exact state a policy must produce. It checks what the
// kernel would refuse (invalid lanes, an interface that does not exist,
// two trees on one interface) and can be told to refuse egresses, as a
// missing feature would. It has only what every host has (the daemon's
// datapathHost roles); the optional parts (caps, counters, the yield, the
// background class) are the kernel host's alone.
package datapathtest

import (
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
)

// State is everything the fake holds, by map.
type State struct {
	Flows   map[datapath.FlowKey]lane.Lane
	Dsts    map[datapath.DstRule]lane.Lane
	Cgroups map[uint64]lane.Lane
	UIDs    map[uint32]lane.Lane
	DSCP    map[uint8]lane.Lane
	Sockets map[uint64]lane.Lane
	Egress  map[string]datapath.EgressConfig // by interface
}

func newState() State {
	return State{Flows: map[datapath.FlowKey]lane.Lane{}, Dsts: map[datapath.DstRule]lane.Lane{},
		Cgroups: map[uint64]lane.Lane{}, UIDs: map[uint32]lane.Lane{}, DSCP: map[uint8]lane.Lane{},
		Sockets: map[uint64]lane.Lane{}, Egress: map[string]datapath.EgressConfig{}}
}

// FakeHost is a host datapath in memory, for unit tests.
type FakeHost struct {
	mu     sync.Mutex
	st     State
	closed bool
	// Links are the interfaces that exist; OpenEgress refuses others.
	links map[string]bool
	// LaneCgroupIDs are what LaneCgroup reports.
	laneIDs map[lane.Lane]uint64
	// RefuseEgress, if set, fails OpenEgress with this error.
	RefuseEgress error
	// Ops counts the calls that changed state (to see that a no-op
	// reconcile writes nothing).
	Ops int
}

// New returns a fake host whose interfaces are links; lane cgroups get ids
// 9001..9003.
func New(links ...string) *FakeHost {
	h := &FakeHost{st: newState(), links: map[string]bool{}, laneIDs: map[lane.Lane]uint64{}}
	for _, l := range links {
		h.links[l] = true
	}
	for _, l := range lane.All {
		h.laneIDs[l] = 9000 + uint64(l)
	}
	return h
}

// SetLink makes an interface appear or disappear.
func (h *FakeHost) SetLink(name string, up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.links[name] = up
}

// State returns a copy of what the fake holds.
func (h *FakeHost) State() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return State{Flows: maps.Clone(h.st.Flows), Dsts: maps.Clone(h.st.Dsts), Cgroups: maps.Clone(h.st.Cgroups),
		UIDs: maps.Clone(h.st.UIDs), DSCP: maps.Clone(h.st.DSCP), Sockets: maps.Clone(h.st.Sockets), Egress: maps.Clone(h.st.Egress)}
}

// Closed says whether Close ran.
func (h *FakeHost) Closed() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.closed }

var errClosed = errors.New("datapathtest: closed")

func valid(l lane.Lane) error {
	if l < lane.Realtime || l > lane.Background {
		return fmt.Errorf("datapathtest: invalid lane %d", l)
	}
	return nil
}

// put and del are the generic map operations.
func put[K comparable](h *FakeHost, m map[K]lane.Lane, k K, l lane.Lane) error {
	if err := valid(l); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errClosed
	}
	m[k] = l
	h.Ops++
	return nil
}

func del[K comparable](h *FakeHost, m map[K]lane.Lane, k K) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errClosed
	}
	delete(m, k)
	h.Ops++
	return nil
}

func (h *FakeHost) SetFlowLane(f datapath.FlowKey, l lane.Lane) error {
	return put(h, h.st.Flows, f, l)
}
func (h *FakeHost) DeleteFlow(f datapath.FlowKey) error              { return del(h, h.st.Flows, f) }
func (h *FakeHost) SetDstLane(r datapath.DstRule, l lane.Lane) error { return put(h, h.st.Dsts, r, l) }
func (h *FakeHost) DeleteDst(r datapath.DstRule) error               { return del(h, h.st.Dsts, r) }
func (h *FakeHost) SetCgroupLane(id uint64, l lane.Lane) error       { return put(h, h.st.Cgroups, id, l) }
func (h *FakeHost) DeleteCgroup(id uint64) error                     { return del(h, h.st.Cgroups, id) }
func (h *FakeHost) SetUIDLane(uid uint32, l lane.Lane) error         { return put(h, h.st.UIDs, uid, l) }
func (h *FakeHost) DeleteUID(uid uint32) error                       { return del(h, h.st.UIDs, uid) }
func (h *FakeHost) SetSocketLane(c uint64, l lane.Lane) error        { return put(h, h.st.Sockets, c, l) }
func (h *FakeHost) ClearSocketLane(c uint64) error                   { return del(h, h.st.Sockets, c) }

// RestoreSocketLane changes only a socket that still has a lane (as the
// real host: a closed socket's entry is gone and stays gone).
func (h *FakeHost) RestoreSocketLane(c uint64, l lane.Lane) error {
	if _, ok := h.SocketLane(c); !ok {
		return nil
	}
	return put(h, h.st.Sockets, c, l)
}

func (h *FakeHost) SetDSCPLane(d uint8, l lane.Lane) error {
	if d > 63 {
		return fmt.Errorf("datapathtest: DSCP %d", d)
	}
	if l == lane.Unset {
		return del(h, h.st.DSCP, d)
	}
	return put(h, h.st.DSCP, d, l)
}

func (h *FakeHost) SocketLane(c uint64) (lane.Lane, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.st.Sockets[c]
	return l, ok
}

func (h *FakeHost) LaneCgroup(l lane.Lane) (string, uint64, error) {
	id, ok := h.laneIDs[l]
	if !ok {
		return "", 0, fmt.Errorf("datapathtest: no cgroup for lane %s", l)
	}
	return "/fake/lanes/" + l.String(), id, nil
}

func (h *FakeHost) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}

// OpenEgress records the tree, refusing a missing interface or a second
// tree on one interface (as the kernel's root qdisc would be ours already).
func (h *FakeHost) OpenEgress(cfg datapath.EgressConfig) (*FakeEgress, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed
	}
	if h.RefuseEgress != nil {
		return nil, h.RefuseEgress
	}
	if !h.links[cfg.Interface] {
		return nil, fmt.Errorf("interface %s: Link not found", cfg.Interface)
	}
	if _, dup := h.st.Egress[cfg.Interface]; dup {
		return nil, fmt.Errorf("datapathtest: %s already has a tree", cfg.Interface)
	}
	h.st.Egress[cfg.Interface] = cfg
	h.Ops++
	return &FakeEgress{h: h, cfg: cfg}, nil
}

// FakeEgress is an egress tree in memory, for unit tests.
type FakeEgress struct {
	h      *FakeHost
	cfg    datapath.EgressConfig
	closed bool
}

func (e *FakeEgress) Config() datapath.EgressConfig { return e.cfg }

func (e *FakeEgress) Update(cfg datapath.EgressConfig) error {
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	if e.closed || cfg.Interface != e.cfg.Interface {
		return errors.New("datapathtest: bad update")
	}
	e.cfg = cfg
	e.h.st.Egress[cfg.Interface] = cfg
	e.h.Ops++
	return nil
}

func (e *FakeEgress) Stats() (map[lane.Lane]datapath.LaneStats, error) {
	return map[lane.Lane]datapath.LaneStats{}, nil
}

// InteractiveLeaf: the fake installs no qdisc.
func (e *FakeEgress) InteractiveLeaf() string { return "" }

func (e *FakeEgress) Close() error {
	e.h.mu.Lock()
	defer e.h.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	delete(e.h.st.Egress, e.cfg.Interface)
	e.h.Ops++
	return nil
}
