// rulefollow.go: a uid or cgroup rule that changes (a reload adds, changes
// or removes it; a cgroup the policy waited for appears) reaches the open
// sockets it matches, not only the ones opened later: after each apply, the
// sockets of the changed uids and cgroups take the lane the rules now give
// them, by cookie (livemove.go sets it). Sockets a process move or an API
// registration set keep theirs (they rank first, docs/policy.md), as do the
// ones an exact flow or destination rule decides.
package daemon

import (
	"errors"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
)

// changedEntries are the keys whose entry differs between old and want.
func changedEntries[K comparable](old, want map[K]entry) map[K]bool {
	out := map[K]bool{}
	for k, e := range want {
		if o, ok := old[k]; !ok || o.Lane != e.Lane {
			out[k] = true
		}
	}
	for k := range old {
		if _, ok := want[k]; !ok {
			out[k] = true
		}
	}
	return out
}

// followRulesLocked moves the open sockets whose uid or cgroup rule changed
// from old to want (kernel.mu held).
func (ks *kernelState) followRulesLocked(oldUIDs map[uint32]entry, oldCgroups map[uint64]entry, want desired) {
	uids := changedEntries(oldUIDs, want.UIDs)
	cgs := changedEntries(oldCgroups, want.Cgroups)
	if len(uids) == 0 && len(cgs) == 0 || ks.env.openSockets == nil || len(want.Cgroups) == 0 {
		return // nothing changed, or the stop's empty state (no lane cgroups)
	}
	t0 := time.Now()
	socks, err := ks.env.openSockets()
	ks.followed = followTimes{List: time.Since(t0)}
	defer func() { ks.followed.Set = time.Since(t0) - ks.followed.List }()
	if errors.Is(err, errNoUDPDiag) {
		ks.log.Warn("changed rules: only open TCP sockets follow", "err", err)
	} else if err != nil {
		ks.log.Warn("changed rules: open sockets not found; only new ones follow", "err", err)
		return
	}
	byLane := map[lane.Lane][]openSock{}
	for _, s := range socks {
		if !uids[s.uid] && !cgs[s.cgroup] || ks.decidedElsewhereLocked(s, want) {
			continue
		}
		l := ks.ruleLane(s, want)
		byLane[l] = append(byLane[l], s)
	}
	for l, ss := range byLane {
		tcp, udp := ks.setSocketsLaneLocked(ss, l)
		ks.log.Info("changed rules: open sockets follow", "lane", l, "tcp", tcp, "udp", udp)
	}
}

// followTimes is what following a changed rule took: listing the open
// sockets (sock_diag) and setting the matching ones' lanes.
type followTimes struct {
	List time.Duration `json:"list_ns"`
	Set  time.Duration `json:"set_ns"`
}

// decidedElsewhereLocked: a move, a registration, an exact flow or a
// destination rule decides the socket's lane, not a uid or cgroup rule.
func (ks *kernelState) decidedElsewhereLocked(s openSock, want desired) bool {
	if _, ok := ks.moves.socket(s.cookie); ok {
		return true
	}
	if _, ok := ks.regs.holding(s.cookie); ok {
		return true
	}
	k := datapath.FlowKey{Src: s.src.Addr(), Dst: s.dst.Addr(), DPort: s.dst.Port(), SPort: s.src.Port(), Proto: s.proto}
	for _, lk := range k.Lookups() {
		if _, ok := want.Flows[lk]; ok {
			return true
		}
	}
	_, _, ok := bestDst(want.Dsts, s.dst.Addr(), s.dst.Port())
	return ok
}

// ruleLane is the lane the rules give the socket now: its cgroup's, its
// uid's, its DSCP marking's, else interactive.
func (ks *kernelState) ruleLane(s openSock, want desired) lane.Lane {
	if e, ok := want.Cgroups[s.cgroup]; ok {
		return e.Lane
	}
	if e, ok := want.UIDs[s.uid]; ok {
		return e.Lane
	}
	if e, ok := want.DSCP[s.tos>>2]; ok && e.Lane != lane.Unset {
		return e.Lane
	}
	return lane.Interactive
}
