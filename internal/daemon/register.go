// register.go: the daemon's side of the API's flow registrations
// (registrations.go): it puts them in the kernel, moves their connected
// sockets (livesockets.go) and sweeps those whose sockets closed.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/lane"
)

// Register puts a flow in a lane for the caller (authorized by the server).
func (h *apiHandlers) Register(c apiserver.Cred, f api.Flow, l lane.Lane) error {
	if f.Src == "" && (!c.Privileged || (l == lane.Realtime && c.UID != 0)) {
		var err error
		if f, err = h.pinSrc(f); err != nil {
			return err
		}
	}
	key, err := flowKey(f)
	if err != nil {
		return err
	}
	inodes := h.socketInodesOf(c, f) // before the lock: it reads the kernel's tables
	h.kernel.mu.Lock()
	defer h.kernel.mu.Unlock()
	if err := h.regs.mayRegister(c, f, h.kernel.pol.Matches); err != nil {
		return err
	}
	if h.kernel.host == nil {
		return errors.New("no datapath installed")
	}
	if c.Privileged {
		h.supersedeLocked(c, f)
	}
	if err := h.kernel.setFlowLocked(key, entry{l, fmt.Sprintf("api (uid %d)", c.UID)}); err != nil {
		return err
	}
	life := &regLife{since: time.Now(), privileged: c.Privileged, inodes: inodes}
	h.regs.add(api.FlowInfo{Flow: f, Lane: l, Source: "api", UID: c.UID}, life)
	h.regs.kickSweep()
	h.moveLiveSocketsLocked(c, f, l)
	h.log.Info("flow registered", "flow", f.String(), "lane", l, "uid", c.UID, "pid", c.PID,
		"privileged", c.Privileged, "sockets", len(life.inodes), "live_sockets", len(h.regs.moved(f)))
	return nil
}

// socketInodesOf is the inodes of flow f's open sockets. Root's
// registrations read the socket tables, twice if nothing matches (a read
// under churn can skip a socket); others' use the listing users' moves
// share (sockDump.flowInodes), listed again at most once a dumpReuse. A
// socket it misses is seen by the registration sweep.
func (h *apiHandlers) socketInodesOf(c apiserver.Cred, f api.Flow) map[uint64]bool {
	if c.UID != 0 {
		if in := h.moves.userDump.flowInodes(f, h.env.openSockets); in != nil {
			return in
		}
		return map[uint64]bool{}
	}
	inodes := map[uint64]bool{}
	for try := 0; try < 2 && len(inodes) == 0; try++ {
		if socks, err := (procOwners{proc: "/proc"}).socketsOf(f); err == nil {
			for _, s := range socks {
				inodes[s.inode] = true
			}
		}
	}
	return inodes
}

// pinSrc gives a flow the caller owns (an unprivileged caller's, or a
// granted member's realtime one) the local address of its sockets (all of
// them the caller's, apiserver.Authorize), so that the datapath's key names it:
// without one the key would also match a later socket of another user on
// another local address with the same ports.
func (h *apiHandlers) pinSrc(f api.Flow) (api.Flow, error) {
	addrs, err := h.env.localAddrs(f)
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

// supersedeLocked removes the unprivileged registrations of other uids
// that privileged caller c's registration of f covers (kernel.mu held).
func (h *apiHandlers) supersedeLocked(c apiserver.Cred, f api.Flow) {
	for _, fi := range h.regs.supersededBy(c, f) {
		g := fi.Flow
		if err := h.kernel.deleteFlowLocked(g); err != nil {
			h.log.Warn("superseded registration", "flow", g.String(), "err", err)
		}
		h.log.Info("registration superseded", "flow", g.String(), "uid", fi.UID, "by", f.String(), "by_uid", c.UID)
	}
}

// Unregister removes a registration; an unprivileged caller only their own.
func (h *apiHandlers) Unregister(c apiserver.Cred, f api.Flow) error {
	h.kernel.mu.Lock()
	defer h.kernel.mu.Unlock()
	f, fi, ok := h.regs.registered(c, f)
	if !ok {
		return fmt.Errorf("flow %s is not registered", f)
	}
	if !c.Privileged && (fi.Source != "api" || fi.UID != c.UID) {
		return fmt.Errorf("%w: flow %s was registered by %s (uid %d), not you (uid %d)", apiserver.ErrPermission, f, fi.Source, fi.UID, c.UID)
	}
	if err := h.kernel.deleteFlowLocked(f); err != nil {
		return err
	}
	h.log.Info("flow unregistered", "flow", f.String(), "uid", c.UID, "pid", c.PID, "privileged", c.Privileged, "registered_by", fi.UID)
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
		d.kernel.mu.Lock()
		busy := d.regs.any() || d.groups.any() || d.moves.any()
		d.kernel.mu.Unlock()
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
		case <-d.regs.kick:
		case <-tick:
			armed = false
			d.sweepOnce(time.Now())
			d.kernel.mu.Lock()
			d.mover.sweepNestedLocked() // cgmove.go: empty lane groups in host cgroups
			d.kernel.mu.Unlock()
		}
	}
}

func (d *Daemon) sweepOnce(now time.Time) {
	var tab sockTable
	var tabErr error
	if d.regs.any() { // outside the lock: 19,000 sockets held it for tens of ms
		// sock_diag's listing, which users' moves and registrations share:
		// /proc/net/udp's text of 19,000 sockets, read each sweep, was
		// most of a member's registration loop's cost.
		if tab, tabErr = d.moves.userDump.table(d.env.openSockets); tabErr != nil {
			tab, tabErr = (procOwners{proc: "/proc"}).table()
		}
	}
	d.kernel.mu.Lock()
	defer d.kernel.mu.Unlock()
	var sockets socketLaneReader
	if d.kernel.host != nil {
		sockets = d.kernel.host.sockets
	}
	d.moves.prune(sockets)
	d.moves.pruneSched()
	if tab == nil && tabErr == nil || !d.regs.any() {
		return // none when read; one registered since waits for the next sweep
	}
	if tabErr != nil {
		d.log.Warn("registration sweep: socket tables", "err", tabErr)
		return
	}
	d.dropRegistrationsLocked(d.regs.sweep(now, tab))
}

// dropRegistrationsLocked removes swept registrations with one diff of
// the kernel state (kernel.mu held).
func (d *Daemon) dropRegistrationsLocked(gone []api.Flow) {
	if len(gone) == 0 {
		return
	}
	for _, f := range gone {
		d.kernel.restoreLiveSocketsLocked(f, d.regs.remove(f))
	}
	if d.kernel.host != nil {
		if err := d.kernel.applyLocked(d.kernel.desiredFor(d.kernel.pol), false); err != nil {
			d.log.Warn("registration sweep: datapath", "err", err)
		}
	}
}
