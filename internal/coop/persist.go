// persist.go: replay state that survives a restart of the receiver.
//
// Sequence numbers alone protect only while the peer table lives: a daemon
// that restarts (or a supervised controller that is restarted) would accept
// recordings of its peers' last announcements, which are inside the
// clock-skew window. So the controller keeps, in a state file, each peer's
// last sequence number and timestamp: written at once when a peer joins, at
// most once per saveEvery otherwise, and on stop marked clean. A new run
// refuses, for a peer in the file, any sequence number not above the saved
// one; after an unclean stop (crash, kill, no file) it also refuses:
//   - a known peer's announcements stamped before its saved timestamp plus
//     saveEvery and its interval (whatever it may have sent after the last
//     save and before the crash);
//   - during the first clock-skew window, any other host's announcements
//     stamped more than epochGrace before this run began (recordings of a
//     host first heard after the last save).
//
// A restored entry lives its own window: until its timestamp plus twice
// the clock-skew window (the removal memory's), never the whole run, so a
// sequence a previous run held cannot refuse a peer longer than it would
// have.
//
// Cost: after a crash, an honest peer is refused for up to saveEvery plus
// one interval, and a peer whose clock is more than epochGrace behind ours
// (and not in the file) for up to the clock-skew window.
package coop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lanes-net/lanes/internal/rootpath"
)

const (
	saveEvery  = time.Second
	epochGrace = 2 * time.Second
)

// replayEntry is one peer's replay state.
type replayEntry struct {
	Seq      uint64        `json:"seq"`
	Time     time.Time     `json:"time"` // its last announcement's timestamp
	Interval time.Duration `json:"interval_ns"`
}

// replayFile is the state file's content.
type replayFile struct {
	Saved time.Time              `json:"saved"`
	Clean bool                   `json:"clean"` // written by a stopping controller
	Peers map[string]replayEntry `json:"peers"` // host id in hex
}

// restored is what a run knows from its predecessor.
type restored struct {
	peers map[uint64]replayEntry
	clean bool
	epoch time.Time     // this run's start
	until time.Time     // end of the epoch rule
	skew  time.Duration // an entry lives until its time plus 2 x skew
}

// entry is host id's restored entry while its window lasts.
func (r *restored) entry(id uint64, now time.Time) (replayEntry, bool) {
	e, ok := r.peers[id]
	if !ok || now.Sub(e.Time) >= 2*r.skew {
		return replayEntry{}, false
	}
	return e, true
}

// expire drops the entries whose window has passed.
func (r *restored) expire(now time.Time, skew time.Duration) {
	for id, e := range r.peers {
		if now.Sub(e.Time) >= 2*skew {
			delete(r.peers, id)
		}
	}
}

// fresh reports whether an announcement of a host not in the live table
// may be accepted.
func (r *restored) fresh(a *Announcement, now time.Time) bool {
	if e, ok := r.entry(a.HostID, now); ok {
		if a.Seq <= e.Seq {
			return false
		}
		return r.clean || a.Time.After(e.Time.Add(saveEvery+e.Interval))
	}
	return r.clean || !now.Before(r.until) || !a.Time.Before(r.epoch.Add(-epochGrace))
}

// loadReplay reads a state file; a missing or unreadable one gives an
// unclean start with no peers.
func loadReplay(path string, now time.Time, skew time.Duration) (restored, error) {
	r := restored{peers: map[uint64]replayEntry{}, epoch: now, until: now.Add(skew), skew: skew}
	if path == "" {
		return r, nil
	}
	b, err := rootpath.ReadFile(path, maxStateFile)
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("coop replay state: %w", err)
	}
	var f replayFile
	if err := json.Unmarshal(b, &f); err != nil {
		return r, fmt.Errorf("coop replay state %s: %w", path, err)
	}
	for k, e := range f.Peers {
		id, err := strconv.ParseUint(k, 16, 64)
		if err == nil && now.Sub(e.Time) < 2*skew { // older ones are stale anyway
			r.peers[id] = e
		}
	}
	r.clean = f.Clean
	return r, nil
}

// maxStateFile bounds the state file a run reads: the table's bounds
// (max_peers live, maxGone removed, ~70 bytes each) keep what a run writes
// under 400 KB.
const maxStateFile = 1 << 20

// replayEntries merges the live table, its goodbyes and the restored state
// (newest wins) into the file's form. Caller holds the table.
func (t *Table) replayEntries(now time.Time) map[string]replayEntry {
	out := map[uint64]replayEntry{}
	put := func(id uint64, e replayEntry) {
		if o, ok := out[id]; !ok || e.Seq > o.Seq {
			out[id] = e
		}
	}
	for id, e := range t.restored.peers {
		if now.Sub(e.Time) < 2*t.skew {
			put(id, e)
		}
	}
	for id, m := range t.gone {
		put(id, replayEntry{Seq: m.seq, Time: m.seen, Interval: t.interval})
	}
	for id, p := range t.peers {
		put(id, replayEntry{Seq: p.Last.Seq, Time: p.Last.Time, Interval: p.Last.Interval})
	}
	m := make(map[string]replayEntry, len(out))
	for id, e := range out {
		m[strconv.FormatUint(id, 16)] = e
	}
	return m
}

// saveReplay writes the state file atomically.
func saveReplay(path string, f replayFile) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := rootpath.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return rootpath.WriteFile(path, b, 0o600)
}

// replayKeeper writes the peer table's replay state to its file: at once
// when asked, or when accepted announcements wait and saveEvery passed.
// The Controller's mu guards it (the table with it).
type replayKeeper struct {
	file  string
	last  time.Time // replay state written
	dirty bool      // announcements accepted since
}

// save writes the table's replay state now.
func (k *replayKeeper) save(t *Table, now time.Time, clean bool) error {
	k.last, k.dirty = now, false
	return saveReplay(k.file, replayFile{Saved: now, Clean: clean, Peers: t.replayEntries(now)})
}

// saveNoting saves, when force or due, and notes a failure as st's last
// error.
func (k *replayKeeper) saveNoting(t *Table, now time.Time, force bool, st *Status) {
	if !force && (!k.dirty || now.Sub(k.last) < saveEvery) {
		return
	}
	if err := k.save(t, now, false); err != nil {
		st.LastError = fmt.Sprintf("save replay state: %v", err)
	}
}
