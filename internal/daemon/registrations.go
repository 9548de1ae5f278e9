// registrations.go: flow registrations made through the API, and the rules
// that keep any local user from borrowing or exhausting them.
//
//   - ownership: an unprivileged caller (not root, not in the access group)
//     may register only flows whose every matching socket is theirs
//     (apiserver.Authorize; so may a granted member in realtime), always with
//     their sockets' local address in the datapath's key (pinSrc), may not
//     override a registration made by someone else or a policy flow rule
//     that covers its key (the same key, or the same without a local
//     address: the address pinSrc filled in must not make theirs the more
//     specific, winning entry), and may unregister only their own
//     registrations. A privileged registration supersedes the
//     unprivileged ones of other uids it covers.
//   - bounds: maxRegsPerUID registrations per uid other than root
//     (members of the access group too, whose registrations of flows with
//     no socket yet live unseenGracePrivileged) and maxUserRegs of all of
//     them together: apiRegs less rootRegs, which root always finds in the
//     datapath's flow map.
//   - lifetime: a registration is tied to the sockets that matched it
//     (their inodes, from /proc/net): the sweep every sweepEvery removes it
//     once all of them have closed, so it never captures a later flow that
//     reuses the ports. A socket counts as closed when two sweeps in a row
//     miss it (a read of /proc/net/tcp under churn can skip a live one). A
//     registration that never matched a socket is removed after unseenGrace
//     (30 s), or unseenGracePrivileged (10 min) for a privileged one made
//     before connect.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
)

const (
	apiRegs               = 4096 // the flow map's entries kept for API registrations (capacity.go)
	rootRegs              = 512  // of apiRegs, root's alone
	maxUserRegs           = apiRegs - rootRegs
	maxRegsPerUID         = 256
	sweepEvery            = 2 * time.Second
	unseenGrace           = 30 * time.Second
	unseenGracePrivileged = 10 * time.Minute
)

// regLife is what ties an API registration to its sockets.
type regLife struct {
	since      time.Time
	privileged bool
	inodes     map[uint64]bool // sockets that matched; empty until one did
	missed     int             // sweeps in a row that found none of them
}

// Register puts a flow in a lane for the caller (authorized by the server).
func (d *Daemon) Register(c apiserver.Cred, f api.Flow, l lane.Lane) error {
	if f.Src == "" && (!c.Privileged || (l == lane.Realtime && c.UID != 0)) {
		var err error
		if f, err = d.pinSrc(f); err != nil {
			return err
		}
	}
	key, err := flowKey(f)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.mayRegisterLocked(c, f); err != nil {
		return err
	}
	if d.host == nil {
		return errors.New("no datapath installed")
	}
	if c.Privileged {
		d.supersedeLocked(c, f)
	}
	if err := d.host.rules.SetFlowLane(key, l); err != nil {
		return err
	}
	d.flows[f] = api.FlowInfo{Flow: f, Lane: l, Source: "api", UID: c.UID}
	d.applied.Flows[key] = entry{l, fmt.Sprintf("api (uid %d)", c.UID)}
	life := &regLife{since: time.Now(), privileged: c.Privileged, inodes: map[uint64]bool{}}
	for try := 0; try < 2 && len(life.inodes) == 0; try++ { // a read under churn can skip it: once more
		if socks, err := (procOwners{proc: "/proc"}).socketsOf(f); err == nil {
			for _, s := range socks {
				life.inodes[s.inode] = true
			}
		}
	}
	d.regs[f] = life
	d.kickSweep()
	d.moveLiveSocketsLocked(c, f, l)
	d.log.Info("flow registered", "flow", f.String(), "lane", l, "uid", c.UID, "pid", c.PID,
		"privileged", c.Privileged, "sockets", len(life.inodes), "live_sockets", len(d.liveSockets[f]))
	return nil
}

// pinSrc gives a flow the caller owns (an unprivileged caller's, or a
// granted member's realtime one) the local address of its sockets (all of
// them the caller's, apiserver.Authorize), so that the datapath's key names it:
// without one the key would also match a later socket of another user on
// another local address with the same ports.
func (d *Daemon) pinSrc(f api.Flow) (api.Flow, error) {
	addrs, err := d.env.localAddrs(f)
	if err != nil {
		return f, err
	}
	var src netip.Addr
	for _, a := range addrs {
		if a = a.Unmap(); src.IsValid() && a != src {
			return f, fmt.Errorf("flow %s: its sockets have several local addresses (%s, %s); name one with src", f, src, a)
		}
		src = a.Unmap()
	}
	if !src.IsValid() {
		return f, fmt.Errorf("no local %s socket %s", protoOf(f), f)
	}
	f.Src = src.String()
	return f, nil
}

// registeredLocked finds the registration an unregister names: f itself,
// or, when f has no src, the one registration that differs from f only by
// its pinned local address (pinSrc) and that the caller may remove.
func (d *Daemon) registeredLocked(c apiserver.Cred, f api.Flow) (api.Flow, api.FlowInfo, bool) {
	if fi, ok := d.flows[f]; ok || f.Src != "" {
		return f, fi, ok
	}
	var found api.Flow
	n := 0
	for g, fi := range d.flows {
		h := g
		h.Src = ""
		if h == f && g.Src != "" && (c.Privileged || (fi.Source == "api" && fi.UID == c.UID)) {
			found, n = g, n+1
		}
	}
	if n != 1 {
		return f, api.FlowInfo{}, false
	}
	return found, d.flows[found], true
}

// covers reports whether datapath key g matches every socket key k does
// and is the same entry or a less specific one (no local address, or no
// protocol for a policy rule): then k would win over g (datapath.md).
func covers(g, k datapath.FlowKey) bool {
	return g.Dst == k.Dst && g.DPort == k.DPort && g.SPort == k.SPort &&
		(g.Proto == 0 || g.Proto == k.Proto) && (!g.Src.IsValid() || g.Src == k.Src)
}

// mayRegisterLocked applies the no-override rule to an unprivileged
// caller and the bounds to any but root (d.mu held).
func (d *Daemon) mayRegisterLocked(c apiserver.Cred, f api.Flow) error {
	if c.UID == 0 {
		return nil
	}
	key, err := flowKey(f)
	if err != nil {
		return err
	}
	if !c.Privileged {
		if err := d.overridesLocked(c, f, key); err != nil {
			return err
		}
	}
	mine, users := 0, 0
	for _, fi := range d.flows {
		if fi.UID != 0 {
			users++
			if fi.UID == c.UID {
				mine++
			}
		}
	}
	if _, again := d.flows[f]; again {
		return nil
	}
	if mine >= maxRegsPerUID {
		return fmt.Errorf("uid %d has %d registrations, the most one uid but root may have", c.UID, mine)
	}
	if users >= maxUserRegs {
		return fmt.Errorf("uids other than root hold %d registrations, the most the daemon gives them (root keeps %d)", users, rootRegs)
	}
	return nil
}

// overridesLocked refuses an unprivileged registration whose key another
// uid's registration or a policy flow rule covers (d.mu held).
func (d *Daemon) overridesLocked(c apiserver.Cred, f api.Flow, key datapath.FlowKey) error {
	for g, fi := range d.flows {
		if gk, err := flowKey(g); err == nil && covers(gk, key) && fi.UID != c.UID {
			return fmt.Errorf("%w: flow %s is registered by %s (uid %d) as %s", apiserver.ErrPermission, f, fi.Source, fi.UID, g)
		}
	}
	for _, m := range d.pol.Matches {
		if m.Kind == policy.MatchTuple && covers(datapath.FlowKey{Src: m.Src, Dst: m.Dst.Addr(), DPort: m.DPort, SPort: m.SPort}, key) {
			return fmt.Errorf("%w: flow %s is in lane %s by policy rule %s", apiserver.ErrPermission, f, m.Lane, m.Rule)
		}
	}
	return nil
}

// supersedeLocked removes the unprivileged registrations of other uids
// that privileged caller c's registration of f covers: theirs, more
// specific, would win over it (d.mu held).
func (d *Daemon) supersedeLocked(c apiserver.Cred, f api.Flow) {
	key, err := flowKey(f)
	if err != nil {
		return
	}
	for g, fi := range d.flows {
		gk, err := flowKey(g)
		if err != nil || g == f || !covers(key, gk) || fi.UID == c.UID || d.regs[g] == nil || d.regs[g].privileged {
			continue
		}
		if err := d.deleteFlowLocked(g); err != nil {
			d.log.Warn("superseded registration", "flow", g.String(), "err", err)
		}
		d.log.Info("registration superseded", "flow", g.String(), "uid", fi.UID, "by", f.String(), "by_uid", c.UID)
	}
}

// Unregister removes a registration; an unprivileged caller only their own.
func (d *Daemon) Unregister(c apiserver.Cred, f api.Flow) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, fi, ok := d.registeredLocked(c, f)
	if !ok {
		return fmt.Errorf("flow %s is not registered", f)
	}
	if !c.Privileged && (fi.Source != "api" || fi.UID != c.UID) {
		return fmt.Errorf("%w: flow %s was registered by %s (uid %d), not you (uid %d)", apiserver.ErrPermission, f, fi.Source, fi.UID, c.UID)
	}
	if err := d.deleteFlowLocked(f); err != nil {
		return err
	}
	d.log.Info("flow unregistered", "flow", f.String(), "uid", c.UID, "pid", c.PID, "privileged", c.Privileged, "registered_by", fi.UID)
	return nil
}

// sweepRegistrations removes registrations whose sockets are gone (and
// empty lane groups nested in host cgroups), every sweepEvery while there
// are any, until ctx ends; with none it sleeps until kickSweep.
func (d *Daemon) sweepRegistrations(ctx context.Context) {
	t := time.NewTimer(sweepEvery)
	t.Stop()
	defer t.Stop()
	armed := false
	for {
		d.mu.Lock()
		busy := len(d.regs) > 0 || len(d.nested) > 0 || len(d.moved) > 0 || len(d.movedPIDs) > 0 || len(d.sched) > 0
		d.mu.Unlock()
		// A kick arms a sleeping sweep; it never pushes an armed one back
		// (registrations arriving more often than sweepEvery would
		// otherwise starve it: the soak's registrations grew to 14,000).
		if busy && !armed {
			t.Reset(sweepEvery)
			armed = true
		} else if !busy && armed {
			t.Stop() // go 1.23+ timers: no stale tick survives Stop or Reset
			armed = false
		}
		var tick <-chan time.Time
		if armed {
			tick = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-d.sweepKick:
		case <-tick:
			armed = false
			d.sweepOnce(time.Now())
			d.mu.Lock()
			d.sweepNestedLocked() // cgmove.go: empty lane groups in host cgroups
			d.mu.Unlock()
		}
	}
}

// kickSweep wakes a sleeping sweep: there is something to sweep now.
func (d *Daemon) kickSweep() {
	select {
	case d.sweepKick <- struct{}{}:
	default:
	}
}

func (d *Daemon) sweepOnce(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pruneMovedLocked()
	d.pruneSchedLocked()
	if len(d.regs) == 0 {
		return
	}
	tab, err := (procOwners{proc: "/proc"}).table()
	if err != nil {
		d.log.Warn("registration sweep: socket tables", "err", err)
		return
	}
	var gone []api.Flow
	defer func() { d.dropRegistrationsLocked(gone) }()
	for f, life := range d.regs {
		if fi, ok := d.flows[f]; !ok || fi.Source != "api" {
			delete(d.regs, f)
			continue
		}
		open := map[uint64]bool{}
		for _, s := range tab.match(f) {
			open[s.inode] = true
		}
		if len(life.inodes) == 0 {
			grace := unseenGrace
			if life.privileged {
				grace = unseenGracePrivileged
			}
			if len(open) > 0 {
				life.inodes = open // first sighting of a registration made before connect
			} else if now.Sub(life.since) > grace {
				d.log.Info("registration removed: no socket ever matched it", "flow", f.String(), "uid", d.flows[f].UID)
				gone = append(gone, f)
			}
			continue
		}
		alive := false
		for ino := range life.inodes {
			alive = alive || open[ino]
		}
		if alive {
			life.missed = 0
			continue
		}
		// /proc/net/tcp read under churn can skip a live socket: only a
		// socket missing from two sweeps in a row has closed.
		if life.missed++; life.missed >= 2 {
			d.log.Info("registration removed: its sockets closed", "flow", f.String(), "uid", d.flows[f].UID)
			gone = append(gone, f)
		}
	}
}

// dropRegistrationsLocked removes swept registrations with one diff of
// the kernel state (d.mu held).
func (d *Daemon) dropRegistrationsLocked(gone []api.Flow) {
	if len(gone) == 0 {
		return
	}
	for _, f := range gone {
		delete(d.flows, f)
		delete(d.regs, f)
		d.restoreLiveSocketsLocked(f)
	}
	if d.host != nil {
		if err := d.applyLocked(d.desiredFor(d.pol), false); err != nil {
			d.log.Warn("registration sweep: datapath", "err", err)
		}
	}
}
