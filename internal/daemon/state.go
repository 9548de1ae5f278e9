// state.go computes the kernel state the daemon wants (from the compiled
// policy, the API registrations, the lane cgroups and the interfaces and
// cgroups that exist right now) and applies the difference to what it last
// applied. Start, reload, an interface or cgroup appearing, and stop are all
// this one diff: stop is the diff to nothing.
//
// Order of a diff (make-before-break): new egress trees are opened first;
// if one fails on an interface that exists, the trees just opened are
// closed again and nothing else changes (a reload then keeps the old policy
// running). Then trees are updated in place, trees no longer wanted are
// removed, and map entries are written and deleted.
package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/appstate"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
)

// kernelState is the kernel-state applier: the running policy, the host
// datapath, the interfaces' trees and what was last put in the kernel,
// under its lock, which the daemon's other owners take theirs after. It
// reads the registrations, the lane groups and the moves for what it
// applies, and never calls back into the daemon.
type kernelState struct {
	log    *slog.Logger
	env    *env
	regs   *registrations
	groups *laneGroups
	moves  *moves

	mu      sync.Mutex
	pol     *policy.Policy
	host    *datapathHost            // this namespace's BPF programs, maps and lane cgroups (host.go)
	egress  map[string]*managedIface // by device: one tree each, all running host's classifier
	applied desired                  // what applyLocked last put in the kernel
	// waiting and lastApplyErr: what was last logged (links.go)
	waiting, lastApplyErr string
	tasks                 *taskEngine // task rules and exe/comm lane rules; nil if none
	// followKick wakes the follow loop (links.go); nil until it runs
	followKick func()
	// appStates: each uid's Android app state, as last read (appstate.go)
	appStates map[uint32]appstate.State
	// followed: the last changed rule's open-socket listing and moves
	// (rulefollow.go), the app-state watcher's stages (appstate.go)
	followed followTimes
}

func newKernelState(log *slog.Logger, e *env, pol *policy.Policy, regs *registrations, groups *laneGroups,
	mv *moves) *kernelState {
	return &kernelState{log: log, env: e, regs: regs, groups: groups, moves: mv, pol: pol,
		egress: map[string]*managedIface{}, applied: newDesired()}
}

// laneCgroup is lane l's cgroup of the instance (`lanes run`, moves).
func (ks *kernelState) laneCgroup(l lane.Lane) (string, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.host == nil {
		return "", errors.New("no datapath installed")
	}
	path, _, err := ks.host.core.LaneCgroup(l)
	return path, err
}

// setFlowLocked puts one flow entry in the kernel at once (an API
// registration), as the next diff would (ks.mu held, a host installed).
func (ks *kernelState) setFlowLocked(key datapath.FlowKey, e entry) error {
	if err := ks.host.rules.SetFlowLane(key, e.Lane); err != nil {
		return err
	}
	ks.applied.Flows[key] = e
	return nil
}

// ruleMaps are the host datapath's rule maps the diff writes (and an API
// registration's 5-tuple: registrations.go).
type ruleMaps interface {
	SetFlowLane(datapath.FlowKey, lane.Lane) error
	DeleteFlow(datapath.FlowKey) error
	SetDstLane(datapath.DstRule, lane.Lane) error
	DeleteDst(datapath.DstRule) error
	SetCgroupLane(cgroupID uint64, l lane.Lane) error
	DeleteCgroup(cgroupID uint64) error
	SetUIDLane(uid uint32, l lane.Lane) error
	DeleteUID(uid uint32) error
	SetDSCPLane(dscp uint8, l lane.Lane) error // lane.Unset removes
}

// egressTree is one interface's tree (*datapath.Egress): the diff opens,
// updates and closes it; status reads it (daemon.go, bgudp.go).
type egressTree interface {
	Config() datapath.EgressConfig
	// Update changes the tree's parameters and device queue in place.
	Update(datapath.EgressConfig) error
	Stats() (map[lane.Lane]datapath.LaneStats, error)
	// InteractiveLeaf is the interactive lane's leaf qdisc kind.
	InteractiveLeaf() string
	Close() error
}

// entry is a map value and what decided it ("policy:<rule>", "api uid 1000",
// "lane cgroup", "dscp.le_background").
type entry struct {
	Lane   lane.Lane
	Source string
}

// egressWant is the tree one device should have.
type egressWant struct {
	Cfg   datapath.EgressConfig
	Index int              // ifindex: a device that came back is a new device
	Spec  policy.Interface // the policy entry it comes from
	Order int              // its position in the policy
}

// desired is the whole kernel state of this daemon.
type desired struct {
	Flows   map[datapath.FlowKey]entry
	Dsts    map[datapath.DstRule]entry
	Cgroups map[uint64]entry
	UIDs    map[uint32]entry
	DSCP    map[uint8]entry
	Egress  map[string]egressWant // by device name
	// Waiting are policy items that exist only once something appears (a
	// cgroup, an interface, a default route), with why.
	Waiting []string
	// waitCgroups counts the cgroups waited for: no event tells of a new
	// one, so the daemon polls while there are any (links.go).
	waitCgroups int
}

func newDesired() desired {
	return desired{Flows: map[datapath.FlowKey]entry{}, Dsts: map[datapath.DstRule]entry{}, Cgroups: map[uint64]entry{},
		UIDs: map[uint32]entry{}, DSCP: map[uint8]entry{}, Egress: map[string]egressWant{}}
}

// desiredFor is what pol, the registrations and the world call for now.
func (ks *kernelState) desiredFor(pol *policy.Policy) desired {
	w := newDesired()
	if ks.host != nil {
		for _, l := range lane.All {
			if _, id, err := ks.host.core.LaneCgroup(l); err == nil {
				w.Cgroups[id] = entry{l, "lane cgroup (lanes run, process rules)"}
			}
		}
	}
	if *pol.DSCP.LowerEffortBackground {
		w.DSCP[lane.DSCPLowerEffort] = entry{lane.Background, "dscp.le_background"}
	}
	if pol.DSCP.ExpeditedRealtime {
		w.DSCP[lane.DSCPExpedited] = entry{lane.Realtime, "dscp.ef_realtime"}
	}
	for _, m := range pol.Matches {
		src := "policy:" + m.Rule
		switch m.Kind {
		case policy.MatchTuple:
			w.Flows[datapath.FlowKey{Src: m.Src, Dst: m.Dst.Addr(), DPort: m.DPort, SPort: m.SPort}] = entry{m.Lane, src}
		case policy.MatchDst:
			w.Dsts[datapath.DstRule{Prefix: m.Dst, DPort: m.DPort}] = entry{m.Lane, src}
		case policy.MatchCgroup:
			id, err := ks.env.cgroupID(m.Cgroup)
			if err != nil {
				w.Waiting = append(w.Waiting, fmt.Sprintf("%s: cgroup %s does not exist yet", src, m.Cgroup))
				w.waitCgroups++
				continue
			}
			w.Cgroups[id] = entry{m.Lane, src}
		case policy.MatchUID:
			w.UIDs[m.UID] = entry{m.Lane, src}
		case policy.MatchDSCP:
			w.DSCP[m.DSCP] = entry{m.Lane, src}
		}
	}
	// after the uid rules, which win (appstate.go)
	ks.addAppStates(pol, w)
	for rel, g := range ks.groups.all() { // lane groups inside host cgroups (cgmove.go)
		w.Cgroups[g.id] = entry{g.lane, "lane group " + rel}
	}
	// API registrations beat a policy 3-tuple of the same key.
	for _, fi := range ks.regs.all() {
		if key, err := flowKey(fi.Flow); err == nil {
			w.Flows[key] = entry{fi.Lane, fmt.Sprintf("api (uid %d)", fi.UID)}
		}
	}
	for i, it := range pol.Interfaces {
		name, why := ks.resolveInterface(it.Name)
		if name == "" {
			w.Waiting = append(w.Waiting, why)
			continue
		}
		idx, ok := ks.env.links.Index(name)
		if !ok {
			w.Waiting = append(w.Waiting, fmt.Sprintf("interface %s does not exist (yet)", name))
			continue
		}
		if _, dup := w.Egress[name]; dup {
			continue // default-route and a named entry are the same device
		}
		w.Egress[name] = egressWant{Cfg: egressConfig(name, it), Index: idx, Spec: it, Order: i}
	}
	return w
}

func (ks *kernelState) resolveInterface(name string) (string, string) {
	if name != policy.DefaultRouteInterface {
		return name, ""
	}
	n, err := ks.env.links.DefaultRoute()
	if err != nil {
		return "", "default-route: " + err.Error()
	}
	return n, ""
}

func egressConfig(name string, it policy.Interface) datapath.EgressConfig {
	cfg := datapath.EgressConfig{Interface: name, DeviceQueueBytes: int(it.DeviceQueue), Mode: datapath.DeviceBottleneck}
	if it.Mode == policy.Shaped {
		cfg.Mode = datapath.Shaped
		cfg.UplinkBps = it.Uplink.Bits()
		cfg.BackgroundFloorBps = it.BackgroundFloor.Bits()
	}
	return cfg
}

// egressOpenError is a wanted tree that could not be opened on an
// interface that exists (a foreign root qdisc, a kernel refusal).
type egressOpenError struct{ err error }

func (e *egressOpenError) Error() string { return e.err.Error() }
func (e *egressOpenError) Unwrap() error { return e.err }

// applyLocked moves the kernel from d.applied to want (see the file
// comment for the order). With strict (start, reload), a tree that cannot
// be opened makes it return an *egressOpenError having changed nothing;
// otherwise (following the device) that tree is left out and retried later.
func (ks *kernelState) applyLocked(want desired, strict bool) error {
	if ks.host == nil {
		return errors.New("no datapath installed")
	}
	var errs []error
	if err := ks.openEgressesLocked(want, strict); err != nil {
		if strict {
			return &egressOpenError{err}
		}
		errs = append(errs, err)
	}
	for name, m := range ks.egress {
		w, ok := want.Egress[name]
		if ok && w.Index != m.index {
			continue // a failed reopen of a device that came back
		}
		switch {
		case !ok:
			errs = append(errs, ks.closeEgressLocked(name))
		case w.Cfg != m.eg.Config():
			if err := m.eg.Update(w.Cfg); err != nil {
				errs = append(errs, fmt.Errorf("interface %s: %w", name, err))
			} else {
				m.cfg, m.order = w.Spec, w.Order
			}
		default:
			m.cfg, m.order = w.Spec, w.Order
		}
	}
	h := ks.host.rules
	oldUIDs, oldCgroups := maps.Clone(ks.applied.UIDs), maps.Clone(ks.applied.Cgroups)
	defer ks.followRulesLocked(oldUIDs, oldCgroups, want)
	errs = append(errs,
		diffMap(ks.applied.Flows, want.Flows, h.SetFlowLane, h.DeleteFlow),
		diffMap(ks.applied.Dsts, want.Dsts, h.SetDstLane, h.DeleteDst),
		diffMap(ks.applied.Cgroups, want.Cgroups, h.SetCgroupLane, h.DeleteCgroup),
		diffMap(ks.applied.UIDs, want.UIDs, h.SetUIDLane, h.DeleteUID),
		diffMap(ks.applied.DSCP, want.DSCP, h.SetDSCPLane, func(k uint8) error { return h.SetDSCPLane(k, lane.Unset) }))
	ks.logWaiting(want.Waiting)
	return errors.Join(errs...)
}

// openEgressesLocked opens the wanted trees that are not open (or whose
// device is a new one under the same name). On a failure, with strict it
// closes what it opened and returns at once; without, it goes on with the
// others and returns the failures.
func (ks *kernelState) openEgressesLocked(want desired, strict bool) error {
	var opened []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(want.Egress)) {
		w := want.Egress[name]
		if m, ok := ks.egress[name]; ok {
			if m.index == w.Index {
				continue
			}
			// the device went away and came back: its tree went with it
			_ = ks.closeEgressLocked(name)
		}
		eg, bg, err := ks.host.openEgress(w.Cfg)
		if err != nil {
			err = fmt.Errorf("interface %s: %w", name, err)
			if !strict {
				errs = append(errs, err)
				continue
			}
			for _, n := range opened {
				err = errors.Join(err, ks.closeEgressLocked(n))
			}
			return err
		}
		ks.egress[name] = &managedIface{name: name, cfg: w.Spec, order: w.Order, index: w.Index, eg: eg, bg: bg}
		opened = append(opened, name)
		ks.log.Info("interface managed", "interface", name, "mode", w.Cfg.Mode)
	}
	return errors.Join(errs...)
}

func (ks *kernelState) closeEgressLocked(name string) error {
	m, ok := ks.egress[name]
	if !ok {
		return nil
	}
	delete(ks.egress, name)
	ks.log.Info("interface released", "interface", name)
	if err := m.eg.Close(); err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
	}
	return nil
}

// diffMap makes applied equal to want through set and del, keeping in
// applied only what the datapath took.
func diffMap[K comparable](applied, want map[K]entry, set func(K, lane.Lane) error, del func(K) error) error {
	var errs []error
	for k := range applied {
		if _, ok := want[k]; !ok {
			if err := del(k); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(applied, k)
		}
	}
	for k, e := range want {
		if cur, ok := applied[k]; ok && cur.Lane == e.Lane {
			applied[k] = e // the source may change, the kernel entry not
			continue
		}
		if err := set(k, e.Lane); err != nil {
			errs = append(errs, err)
			continue
		}
		applied[k] = e
	}
	return errors.Join(errs...)
}

// logWaiting logs what the policy waits for, once per change.
func (ks *kernelState) logWaiting(w []string) {
	slices.Sort(w)
	s := strings.Join(w, "; ")
	if s != ks.waiting && s != "" {
		ks.log.Info("waiting for", "items", s)
	}
	ks.waiting = s
}

// policyFlows lists the policy's 3-tuple and destination rules for status,
// as protocol any: they match UDP (a realtime lane's flows, QUIC) as TCP.
func policyFlows(pol *policy.Policy) []api.FlowInfo {
	var out []api.FlowInfo
	for _, m := range pol.Matches {
		var f api.Flow
		switch m.Kind {
		case policy.MatchTuple:
			f = api.Flow{Dst: m.Dst.Addr().String(), DPort: m.DPort, SPort: m.SPort, Proto: api.ProtoAny}
		case policy.MatchDst:
			dst := m.Dst.String()
			if m.Dst.IsSingleIP() {
				dst = m.Dst.Addr().String()
			}
			f = api.Flow{Dst: dst, DPort: m.DPort, Proto: api.ProtoAny}
		default:
			continue
		}
		out = append(out, api.FlowInfo{Flow: f, Lane: m.Lane, Source: "policy:" + m.Rule})
	}
	return out
}
