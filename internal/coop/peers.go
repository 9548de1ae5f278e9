// peers.go: the peer table — who else shares the access point, from their
// authenticated announcements, with replay protection.
//
//   - a peer is added on its first valid announcement and removed when it has
//     been silent for SilenceIntervals of its own announced interval, or at
//     once when it says goodbye (leaving flag);
//   - replay protection: a peer's sequence numbers must strictly increase, and
//     an announcement's timestamp must be within MaxClockSkew of our clock.
//     The last sequence of a removed peer is remembered for the skew window,
//     so a recorded announcement cannot re-add a peer that has left;
//   - N, the number of active senders, counts peers with active uplink flows;
//   - admission (peers.go's Limits): the table holds at most MaxPeers; new
//     peers are admitted at NewRate per second (a token bucket of Burst);
//     without a key one host id per source address (a LAN host inventing
//     ids must also spoof addresses). Refused announcements are counted;
//   - without a key anyone can write an announcement, and with one anyone
//     who read the key can, so no single one may move a peer's replay
//     floor far: one more than maxSeqGap past the latest sequence known of
//     its host id (live, removed or restored) is held as a jump
//     (ErrSeqJump), applied only when the next announcement from the same
//     address continues it (a restarted peer: one interval late); for a
//     live peer only once the peer has been silent for 1.5 of its
//     intervals, and any announcement of its own within the bound drops
//     the jump, so a forged pair sent between two of its announcements
//     moves nothing (it removed the peer for 60 s); a forged one within
//     the bound holds the peer's next maxSeqGap announcements at most;
//   - a restarted receiver loads its predecessor's replay state (persist.go).
package coop

import (
	"errors"
	"math"
	"net/netip"
	"sort"
	"time"
)

// Admission refusals, each counted.
var (
	ErrTableFull    = errors.New("peer table full")
	ErrPeerRate     = errors.New("too many new peers (rate limit)")
	ErrAddrConflict = errors.New("another host id already announces from this address (keyless mode)")
	// ErrDuplicate: the same announcement again (it is sent over IPv4 and
	// IPv6); not a drop.
	ErrDuplicate = errors.New("duplicate announcement (second transport)")
	// ErrLate: an announcement never seen before, older than the peer's
	// latest but within its recent ones: its copy over one family was lost
	// and the other family's copy arrived after the next announcement (one
	// reader per socket keeps each family in order, not the two together).
	// It is not applied (it is older) and not a drop.
	ErrLate = errors.New("late announcement (older than the latest, never seen)")
	// ErrSeqJump: a sequence more than maxSeqGap past the latest known of
	// its host id; held until the next announcement continues it.
	ErrSeqJump = errors.New("sequence far ahead of the host's latest: held until the next continues it")
)

// maxSeqGap bounds how far one announcement (goodbye or
// not) may move a host's sequence: a live peer's consecutive accepted
// announcements differ by 1 plus the ones lost, and a peer is removed
// after silence_intervals (3) lost in a row.
const maxSeqGap = 8

// seqJump is a keyless announcement held by maxSeqGap.
type seqJump struct {
	seq  uint64
	from netip.Addr
	at   time.Time
}

// Limits bound what announcements can do to the table.
type Limits struct {
	MaxPeers   int
	NewRate    float64 // new peers per second
	Burst      int
	OnePerAddr bool // one host id per source address
	Keyless    bool // announcements are not authenticated (goodbyes: see leave)
}

// Peer is one other cooperating host.
type Peer struct {
	ID        uint64
	Addr      netip.Addr
	FirstSeen time.Time
	LastSeen  time.Time
	Last      Announcement
	lastFrom  netip.Addr            // source of Last
	recent    [recentSeqs]seqFamily // latest accepted sequences and their family
	nrecent   int
}

// recentSeqs is how many accepted sequences a peer's entry remembers: the
// reordering between the IPv4 and IPv6 copies it can tell from a replay
// (32 announcements: 3.2 s at a 100 ms interval; on a machine saturated by
// veth downloads one family's copies lagged by more than 8).
const recentSeqs = 32

// seqFamily is an accepted sequence number and the family it came over.
type seqFamily struct {
	seq uint64
	v4  bool
}

// duplicate reports whether seq was accepted lately over the other family
// than from's: the second copy of an announcement sent over both (which may
// arrive after the next announcement's first copy).
func (p *Peer) duplicate(seq uint64, from netip.Addr) bool {
	for _, r := range p.recent[:min(p.nrecent, len(p.recent))] {
		if r.seq == seq {
			return r.v4 != from.Is4()
		}
	}
	return false
}

// late reports whether seq, older than the latest, was never seen and is
// newer than the oldest of the recent ones: a reordering across the two
// families or across a removal for silence, not a replay (a replay repeats
// a sequence already remembered, or one older than every remembered one).
// Fewer than recentSeqs remembered are every one accepted since the entry
// began: the oldest is its first.
func (p *Peer) late(seq uint64) bool {
	rs := p.recent[:min(p.nrecent, len(p.recent))]
	if len(rs) == 0 {
		return false
	}
	oldest := rs[0].seq
	for _, r := range rs {
		if r.seq == seq {
			return false
		}
		oldest = min(oldest, r.seq)
	}
	return seq > oldest
}

func (p *Peer) remember(seq uint64, from netip.Addr) {
	p.recent[p.nrecent%len(p.recent)] = seqFamily{seq, from.Is4()}
	p.nrecent++
}

// Active reports whether the peer is currently sending uplink data.
func (p *Peer) Active() bool { return p.Last.ActiveFlows > 0 }

// DownActive reports whether the peer is currently receiving downlink data.
func (p *Peer) DownActive() bool { return p.Last.DownFlows > 0 }

type seqMemo struct {
	seq  uint64
	seen time.Time
	// the sequences a peer removed for silence had accepted lately: the
	// other family's copy of one of them, arriving after the removal (a
	// busy machine), is a duplicate or late, not a replay
	last *Peer
}

// Table holds the peers; not safe for concurrent use (the controller locks).
type Table struct {
	interval time.Duration // ours, for peers announcing 0
	silence  int
	skew     time.Duration
	lim      Limits
	tokens   float64 // new-peer token bucket
	refill   time.Time
	peers    map[uint64]*Peer
	gone     map[uint64]seqMemo
	jumps    map[uint64]seqJump // keyless: held jumps (maxSeqGap), per host id with a floor
	restored restored           // replay state of a previous run (persist.go)
}

// NewTable returns an empty peer table without admission limits.
func NewTable(interval time.Duration, silenceIntervals int, maxSkew time.Duration) *Table {
	return &Table{interval: interval, silence: silenceIntervals, skew: maxSkew,
		peers: map[uint64]*Peer{}, gone: map[uint64]seqMemo{}, jumps: map[uint64]seqJump{}}
}

// SetLimits bounds the table (zero fields: no bound).
func (t *Table) SetLimits(l Limits) {
	t.lim = l
	t.tokens = float64(l.Burst)
}

// admit applies the admission limits to a new peer.
func (t *Table) admit(from netip.Addr, now time.Time) error {
	if t.lim.MaxPeers > 0 && len(t.peers) >= t.lim.MaxPeers {
		return ErrTableFull
	}
	if t.lim.OnePerAddr {
		for _, p := range t.peers {
			if p.Addr == from {
				return ErrAddrConflict
			}
		}
	}
	if t.lim.NewRate > 0 {
		if !t.refill.IsZero() {
			t.tokens = math.Min(float64(t.lim.Burst), t.tokens+now.Sub(t.refill).Seconds()*t.lim.NewRate)
		}
		t.refill = now
		if t.tokens < 1 {
			return ErrPeerRate
		}
		t.tokens--
	}
	return nil
}

// Change says what an accepted announcement did to the table.
type Change int

const (
	Updated       Change = iota // known peer, same activity
	Joined                      // new peer
	Left                        // peer said goodbye
	ActiveChanged               // known peer started or stopped sending
)

// Accept checks an authenticated announcement for replay and, if fresh,
// records it. It returns ErrReplayed or ErrStale for replays.
func (t *Table) Accept(a *Announcement, from netip.Addr, now time.Time) (Change, error) {
	if d := now.Sub(a.Time); d > t.skew || d < -t.skew {
		return Updated, ErrStale
	}
	p, ok := t.peers[a.HostID]
	if ok {
		if p.duplicate(a.Seq, from) { // the other family's copy
			return Updated, ErrDuplicate
		}
		if a.Seq <= p.Last.Seq {
			if p.late(a.Seq) {
				p.remember(a.Seq, from) // a second arrival is a replay
				return Updated, ErrLate
			}
			return Updated, ErrReplayed
		}
	} else if m, ok := t.gone[a.HostID]; ok && a.Seq <= m.seq {
		switch {
		case m.last != nil && m.last.duplicate(a.Seq, from):
			return Updated, ErrDuplicate
		case m.last != nil && m.last.late(a.Seq):
			m.last.remember(a.Seq, from) // a second arrival is a replay
			return Updated, ErrLate
		}
		return Updated, ErrReplayed
	} else if !t.restored.fresh(a, now) {
		return Updated, ErrReplayed
	}
	if !a.Leaving && !t.believable(a, from, now) {
		return Updated, ErrSeqJump
	}
	if a.Leaving {
		return t.leave(p, a, from, now)
	}
	if !ok {
		if err := t.admit(from, now); err != nil {
			return Updated, err
		}
		p = &Peer{ID: a.HostID, FirstSeen: now}
		if m, ok := t.gone[a.HostID]; ok && m.last != nil {
			// back after a removal for silence: what it had accepted stays
			// remembered, so a copy reordered across the removal is late
			// or a duplicate, not a replay
			p.recent, p.nrecent = m.last.recent, m.last.nrecent
		}
		t.peers[a.HostID] = p
		delete(t.gone, a.HostID)
	}
	wasActive, wasDown := ok && p.Active(), ok && p.DownActive()
	if from.Is4() || !p.Addr.Is4() { // the IPv4 address, once known, names the peer
		p.Addr = from
	}
	p.LastSeen, p.Last, p.lastFrom = now, *a, from
	p.remember(a.Seq, from)
	switch {
	case !ok:
		return Joined, nil
	case wasActive != p.Active(), wasDown != p.DownActive():
		return ActiveChanged, nil
	}
	return Updated, nil
}

// floor is the latest sequence known of host id: its live entry's, its
// removal memory's or its restored entry's (ok false: none).
func (t *Table) floor(id uint64, now time.Time) (uint64, bool) {
	if p, ok := t.peers[id]; ok {
		return p.Last.Seq, true
	}
	if m, ok := t.gone[id]; ok {
		return m.seq, true
	}
	if e, ok := t.restored.entry(id, now); ok {
		return e.Seq, true
	}
	return 0, false
}

// believable applies maxSeqGap to an announcement already above its
// host's floor: within the gap, or continuing a held jump from the same
// address (at most one clock-skew window old; for a live peer, once it has
// been silent for 1.5 of its intervals), it is; otherwise it is held as the
// host's jump.
func (t *Table) believable(a *Announcement, from netip.Addr, now time.Time) bool {
	f, ok := t.floor(a.HostID, now)
	if !ok || a.Seq-f <= maxSeqGap {
		delete(t.jumps, a.HostID)
		return true
	}
	if j, ok := t.jumps[a.HostID]; ok && j.from == from && a.Seq > j.seq && a.Seq-j.seq <= maxSeqGap &&
		now.Sub(j.at) <= t.skew && t.silentLong(a.HostID, now) {
		delete(t.jumps, a.HostID)
		return true
	}
	if _, ok := t.jumps[a.HostID]; !ok && len(t.jumps) >= maxGone+t.lim.MaxPeers {
		return false // ids with a floor are bounded; this only guards the map
	}
	t.jumps[a.HostID] = seqJump{seq: a.Seq, from: from, at: now}
	return false
}

// silentLong: host id has no live entry, or its last announcement is
// 1.5 of its intervals old (it missed one: it may have restarted).
func (t *Table) silentLong(id uint64, now time.Time) bool {
	p, ok := t.peers[id]
	if !ok {
		return true
	}
	iv := p.Last.Interval
	if iv <= 0 {
		iv = t.interval
	}
	return now.Sub(p.LastSeen) >= iv*3/2
}

// A goodbye removes a peer the table holds, and nothing else:
//   - one for a host id not in the table is ignored (ErrNotPeer): there is
//     nothing to remove, and storing it would let invented ids grow the
//     table's memory past its admission limits;
//   - without a key anyone on the LAN can write one, so it must come from
//     the peer's own address, carry a sequence at most maxSeqGap past the
//     peer's latest, and the replay memory keeps the sequence the peer's
//     own announcements reached, not the goodbye's: a forgery (even with a
//     spoofed address) removes the peer for one interval at most, and its
//     next announcement joins it again.

// ErrNotPeer: a goodbye that names no peer of the table, or that a keyless
// table cannot believe (another address, a sequence far ahead); not applied.
var ErrNotPeer = errors.New("goodbye from no known peer")

func (t *Table) leave(p *Peer, a *Announcement, from netip.Addr, now time.Time) (Change, error) {
	if p == nil {
		return Updated, ErrNotPeer
	}
	seq := a.Seq
	if t.lim.Keyless {
		if from != p.Addr && from != p.lastFrom || a.Seq-p.Last.Seq > maxSeqGap {
			return Updated, ErrNotPeer
		}
		seq = p.Last.Seq
	}
	delete(t.peers, a.HostID)
	t.forget(a.HostID, seqMemo{seq: seq, seen: now})
	return Left, nil
}

// maxGone bounds the replay memory of removed peers (they come only from
// admitted peers, so admission's rate bounds it too).
const maxGone = 4096

// forget remembers a removed peer's last sequence, dropping the oldest
// memory when full.
func (t *Table) forget(id uint64, m seqMemo) {
	if _, ok := t.gone[id]; !ok && len(t.gone) >= maxGone {
		var oldest uint64
		first := true
		for k, g := range t.gone {
			if first || g.seen.Before(t.gone[oldest].seen) {
				oldest, first = k, false
			}
		}
		delete(t.gone, oldest)
	}
	t.gone[id] = m
}

// timeout is how long peer p may stay silent.
func (t *Table) timeout(p *Peer) time.Duration {
	iv := p.Last.Interval
	if iv <= 0 {
		iv = t.interval
	}
	return time.Duration(t.silence) * iv
}

// Expire removes peers silent for too long and returns their ids.
func (t *Table) Expire(now time.Time) []uint64 {
	var out []uint64
	for id, p := range t.peers {
		if now.Sub(p.LastSeen) > t.timeout(p) {
			delete(t.peers, id)
			t.forget(id, seqMemo{seq: p.Last.Seq, seen: now, last: p})
			out = append(out, id)
		}
	}
	for id, m := range t.gone {
		if now.Sub(m.seen) > 2*t.skew {
			delete(t.gone, id)
		}
	}
	for id, j := range t.jumps {
		if now.Sub(j.at) > t.skew {
			delete(t.jumps, id)
		}
	}
	t.restored.expire(now, t.skew)
	return out
}

// NextExpiry is the earliest time a peer would time out (zero if none).
func (t *Table) NextExpiry() time.Time {
	var next time.Time
	for _, p := range t.peers {
		e := p.LastSeen.Add(t.timeout(p))
		if next.IsZero() || e.Before(next) {
			next = e
		}
	}
	return next
}

// Peers returns copies of the current peers, ordered by id.
func (t *Table) Peers() []Peer {
	out := make([]Peer, 0, len(t.peers))
	for _, p := range t.peers {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Len is the number of known peers; ActiveSenders those with uplink flows.
func (t *Table) Len() int { return len(t.peers) }

func (t *Table) ActiveSenders() int {
	n := 0
	for _, p := range t.peers {
		if p.Active() {
			n++
		}
	}
	return n
}
