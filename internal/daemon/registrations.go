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
//
// The registrations own their state and lock (registrations); the API's
// handlers and the daemon's sweep put them in the kernel (register.go).
// Lock order: the kernel state's, then the registrations' mu; they never
// call back into the daemon.
package daemon

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/datapath"
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

// registrations are the API's flow registrations, the sockets each is tied
// to, and the connected sockets each moved (livesockets.go).
type registrations struct {
	log *slog.Logger

	mu    sync.Mutex
	flows map[api.Flow]api.FlowInfo
	life  map[api.Flow]*regLife
	live  map[api.Flow][]liveSocket
	// kick wakes the sweep (register.go)
	kick chan struct{}
}

func newRegistrations(log *slog.Logger) *registrations {
	return &registrations{log: log, flows: map[api.Flow]api.FlowInfo{}, life: map[api.Flow]*regLife{},
		live: map[api.Flow][]liveSocket{}, kick: make(chan struct{}, 1)}
}

// add records registration fi of f (fi.Flow) and the sockets it is tied to.
func (r *registrations) add(fi api.FlowInfo, life *regLife) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flows[fi.Flow] = fi
	r.life[fi.Flow] = life
}

// remove forgets f and returns the connected sockets it moved, for the
// caller to restore.
func (r *registrations) remove(f api.Flow) []liveSocket {
	r.mu.Lock()
	defer r.mu.Unlock()
	moved := r.live[f]
	delete(r.flows, f)
	delete(r.life, f)
	delete(r.live, f)
	return moved
}

// all is every registration, in no order.
func (r *registrations) all() []api.FlowInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]api.FlowInfo, 0, len(r.flows))
	for _, fi := range r.flows {
		out = append(out, fi)
	}
	return out
}

// any reports whether there is a registration to sweep.
func (r *registrations) any() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.life) > 0
}

// kickSweep wakes a sleeping sweep: there is something to sweep now.
func (r *registrations) kickSweep() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// registered finds the registration an unregister names: f itself, or,
// when f has no src, the one registration that differs from f only by its
// pinned local address (pinSrc) and that the caller may remove.
func (r *registrations) registered(c apiserver.Cred, f api.Flow) (api.Flow, api.FlowInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fi, ok := r.flows[f]; ok || f.Src != "" {
		return f, fi, ok
	}
	var found api.Flow
	n := 0
	for g, fi := range r.flows {
		h := g
		h.Src = ""
		if h == f && g.Src != "" && (c.Privileged || (fi.Source == "api" && fi.UID == c.UID)) {
			found, n = g, n+1
		}
	}
	if n != 1 {
		return f, api.FlowInfo{}, false
	}
	return found, r.flows[found], true
}

// covers reports whether datapath key g matches every socket key k does
// and is the same entry or a less specific one (no local address, or no
// protocol for a policy rule): then k would win over g (datapath.md).
func covers(g, k datapath.FlowKey) bool {
	return g.Dst == k.Dst && g.DPort == k.DPort && g.SPort == k.SPort &&
		(g.Proto == 0 || g.Proto == k.Proto) && (!g.Src.IsValid() || g.Src == k.Src)
}

// mayRegister applies the no-override rule (against the registrations and
// the policy's rules, matches) to an unprivileged caller and the bounds to
// any but root.
func (r *registrations) mayRegister(c apiserver.Cred, f api.Flow, matches []policy.Match) error {
	if c.UID == 0 {
		return nil
	}
	key, err := flowKey(f)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !c.Privileged {
		if err := r.overrides(c, f, key, matches); err != nil {
			return err
		}
	}
	mine, users := 0, 0
	for _, fi := range r.flows {
		if fi.UID != 0 {
			users++
			if fi.UID == c.UID {
				mine++
			}
		}
	}
	if _, again := r.flows[f]; again {
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

// overrides refuses an unprivileged registration whose key another uid's
// registration or a policy flow rule covers (r.mu held).
func (r *registrations) overrides(c apiserver.Cred, f api.Flow, key datapath.FlowKey, matches []policy.Match) error {
	for g, fi := range r.flows {
		if gk, err := flowKey(g); err == nil && covers(gk, key) && fi.UID != c.UID {
			return fmt.Errorf("%w: flow %s is registered by %s (uid %d) as %s", apiserver.ErrPermission, f, fi.Source, fi.UID, g)
		}
	}
	for _, m := range matches {
		if m.Kind == policy.MatchTuple && covers(datapath.FlowKey{Src: m.Src, Dst: m.Dst.Addr(), DPort: m.DPort, SPort: m.SPort}, key) {
			return fmt.Errorf("%w: flow %s is in lane %s by policy rule %s", apiserver.ErrPermission, f, m.Lane, m.Rule)
		}
	}
	return nil
}

// supersededBy is the unprivileged registrations of other uids that
// privileged caller c's registration of f covers: theirs, more specific,
// would win over it.
func (r *registrations) supersededBy(c apiserver.Cred, f api.Flow) []api.FlowInfo {
	key, err := flowKey(f)
	if err != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []api.FlowInfo
	for g, fi := range r.flows {
		gk, err := flowKey(g)
		if err != nil || g == f || !covers(key, gk) || fi.UID == c.UID || r.life[g] == nil || r.life[g].privileged {
			continue
		}
		out = append(out, fi)
	}
	return out
}

// sweep returns the registrations whose sockets are gone from tab at now
// and forgets those that are no longer the API's.
func (r *registrations) sweep(now time.Time, tab sockTable) []api.Flow {
	r.mu.Lock()
	defer r.mu.Unlock()
	var gone []api.Flow
	for f, life := range r.life {
		if fi, ok := r.flows[f]; !ok || fi.Source != "api" {
			delete(r.life, f)
			continue
		}
		open := map[uint64]bool{}
		for _, s := range tab.match(f) {
			open[s.inode] = true
		}
		if r.closed(f, life, open, now) {
			gone = append(gone, f)
		}
	}
	return gone
}

// closed reports whether registration f's sockets are gone, given the
// sockets open now that match it (r.mu held).
func (r *registrations) closed(f api.Flow, life *regLife, open map[uint64]bool, now time.Time) bool {
	if len(life.inodes) == 0 {
		grace := unseenGrace
		if life.privileged {
			grace = unseenGracePrivileged
		}
		if len(open) > 0 {
			life.inodes = open // first sighting of a registration made before connect
		} else if now.Sub(life.since) > grace {
			r.log.Info("registration removed: no socket ever matched it", "flow", f.String(), "uid", r.flows[f].UID)
			return true
		}
		return false
	}
	alive := false
	for ino := range life.inodes {
		alive = alive || open[ino]
	}
	if alive {
		life.missed = 0
		return false
	}
	// /proc/net/tcp read under churn can skip a live socket: only a
	// socket missing from two sweeps in a row has closed.
	if life.missed++; life.missed >= 2 {
		r.log.Info("registration removed: its sockets closed", "flow", f.String(), "uid", r.flows[f].UID)
		return true
	}
	return false
}

// moved is the connected sockets registration f moved.
func (r *registrations) moved(f api.Flow) []liveSocket {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[f]
}

// setMoved records the connected sockets registration f moved.
func (r *registrations) setMoved(f api.Flow, moved []liveSocket) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[f] = moved
}

// holding is the registration that moved the socket with this cookie.
func (r *registrations) holding(cookie uint64) (api.FlowInfo, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for f, moved := range r.live {
		if findLive(moved, cookie) != nil {
			return api.FlowInfo{Flow: f, Source: r.flows[f].Source}, true
		}
	}
	return api.FlowInfo{}, false
}

// withoutRootHeld drops from socks those a registration by root moved.
func (r *registrations) withoutRootHeld(socks []openSock) []openSock {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := map[uint64]bool{}
	for f, ls := range r.live {
		if info, ok := r.flows[f]; ok && info.UID == 0 {
			for _, s := range ls {
				held[s.cookie] = true
			}
		}
	}
	if len(held) == 0 {
		return socks
	}
	var out []openSock
	for _, s := range socks {
		if !held[s.cookie] {
			out = append(out, s)
		}
	}
	return out
}
