// peergroup.go: the peer group as this host counts it: the table of
// peers, which of them count in N without a key (admitted one per
// keyless_growth), which fell silent and when, the group's goodput one
// way, and a counted peer that announces it stopped capping. It has no
// lock of its own: the Controller's mu guards it.
package coop

import (
	"math"
	"sort"
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

// peerGroup owns the peers' table and the keyless admission into N.
type peerGroup struct {
	table     *Table
	keyless   bool // no group key: only peers admitted into counted count
	cfg       config.Coop
	counted   map[uint64]bool      // keyless mode: peers admitted into N
	lastCount time.Time            // keyless mode: when the last peer was admitted into N
	expired   map[uint64]time.Time // peers removed for silence, when
}

func newPeerGroup(cfg config.Coop, keyless bool) peerGroup {
	t := NewTable(cfg.Interval.D(), cfg.SilenceIntervals, cfg.MaxClockSkew.D())
	t.SetLimits(Limits{MaxPeers: cfg.MaxPeers, NewRate: cfg.NewPeerRate,
		Burst: cfg.NewPeerBurst, OnePerAddr: keyless, Keyless: keyless})
	return peerGroup{table: t, keyless: keyless, cfg: cfg, counted: map[uint64]bool{},
		expired: map[uint64]time.Time{}}
}

// counts says whether peer id counts in N (always, with a key).
func (g *peerGroup) counts(id uint64) bool { return !g.keyless || g.counted[id] }

// goodput is this host's goodput one way plus the counted peers'
// (keyless: only peers counted in N count in the rate), as read (bounded)
// and judged (each peer's announced goodput less what it announced its
// interface's count took off).
func (g *peerGroup) goodput(d *direction, peer func(*Peer) (read, announced float64, over uint8)) (float64, float64) {
	gp, gj := d.ownGoodput()
	for _, p := range g.table.Peers() {
		if !g.counts(p.ID) {
			continue
		}
		pg, announced, over := peer(&p)
		gp += pg
		gj += math.Min(pg, judgedOf(announced, over))
	}
	return gp, gj
}

// count keeps, without a key, the set of active peers counted in N:
// a peer that stops or leaves drops out at once; others are admitted one
// per keyless_growth (longest known first) up to keyless_max_peers. It
// returns how many active peers wait outside N.
func (g *peerGroup) count(peers []Peer, now time.Time) int {
	if !g.keyless {
		return 0
	}
	active := map[uint64]bool{}
	var waiting []*Peer
	for i := range peers {
		p := &peers[i]
		if !p.Active() {
			continue
		}
		active[p.ID] = true
		if !g.counted[p.ID] {
			waiting = append(waiting, p)
		}
	}
	for id := range g.counted {
		if !active[id] {
			delete(g.counted, id)
		}
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].FirstSeen.Before(waiting[j].FirstSeen) })
	for len(waiting) > 0 && len(g.counted) < g.cfg.KeylessMaxPeers &&
		(g.lastCount.IsZero() || now.Sub(g.lastCount) >= g.cfg.KeylessGrowth.D()) {
		g.counted[waiting[0].ID] = true
		g.lastCount = now
		waiting = waiting[1:]
	}
	return len(waiting)
}

// expire removes silent peers and remembers when.
func (g *peerGroup) expire(now time.Time) []uint64 {
	gone := g.table.Expire(now)
	for id, t := range g.expired {
		if now.Sub(t) > time.Minute {
			delete(g.expired, id)
		}
	}
	for _, id := range gone {
		g.expired[id] = now
	}
	return gone
}

// stoppedPeer returns a counted peer that announces it stopped capping its
// uploads (down: its downloads) on its own evidence, if any (safety.go:
// following a peer's fallback).
func (g *peerGroup) stoppedPeer(peers []Peer, down bool) (uint64, bool) {
	if !g.cfg.Safety.Enabled {
		return 0, false
	}
	for i := range peers {
		p := &peers[i]
		if !g.counts(p.ID) || p.Last.Leaving {
			continue
		}
		if (!down && p.Last.UpStopped) || (down && p.Last.DownStopped) {
			return p.ID, true
		}
	}
	return 0, false
}
