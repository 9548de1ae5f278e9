// lockout_test.go: no single forged keyless announcement, and no restored
// replay state, keeps an honest peer out past a bounded window (N3).
package coop

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"
)

// keylessTable is a keyless table with a 500 ms interval, 3 silent
// intervals and a 30 s skew window.
func keylessTable() *Table {
	tb := NewTable(500*time.Millisecond, 3, 30*time.Second)
	tb.SetLimits(Limits{MaxPeers: 16, NewRate: 2, Burst: 3, OnePerAddr: true, Keyless: true})
	return tb
}

// honestFor feeds host 7's announcements from addr, one per 500 ms from
// seq, for d, and returns when the first was accepted (zero: none), the
// next seq and the next instant.
func honestFor(t *testing.T, tb *Table, addr netip.Addr, seq uint64, at time.Time, d time.Duration) (time.Time, uint64, time.Time) {
	t.Helper()
	var back time.Time
	for end := at.Add(d); at.Before(end); at = at.Add(500 * time.Millisecond) {
		tb.Expire(at)
		if _, err := tb.Accept(ann(7, seq, at, 1), addr, at); err == nil && back.IsZero() {
			back = at
		}
		seq++
	}
	return back, seq, at
}

// since is at - t0, or "never" for a zero at.
func since(at, t0 time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(t0).String()
}

// TestForgedSequenceFarAheadHeld (audit N3): one 52-byte keyless announcement
// with a peer's host id, from its address, with sequence 2^64-1 made the
// peer's own announcements "replayed" until it was removed, and the removal's
// memory refused it for 61 s. Fix: the sequence-gap bound (maxSeqGap) holds
// for every keyless message: a jump is held until the next announcement
// continues it, so one forgery moves nothing; one within the bound holds the
// peer's next maxSeqGap announcements at most.
func TestForgedSequenceFarAheadHeld(t *testing.T) {
	t0 := time.Unix(5000, 0)
	peer := netip.MustParseAddr("10.0.0.1")
	for _, forged := range []uint64{1<<64 - 1, 1 << 63, 100 + maxSeqGap + 1} {
		tb := keylessTable()
		if _, err := tb.Accept(ann(7, 100, t0, 1), peer, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Accept(ann(7, forged, t0, 1), peer, t0); !errors.Is(err, ErrSeqJump) {
			t.Errorf("forged seq %d: %v, want it held (ErrSeqJump)", forged, err)
		}
		if _, err := tb.Accept(ann(7, 101, t0.Add(500*time.Millisecond), 1), peer, t0.Add(500*time.Millisecond)); err != nil {
			t.Errorf("after a forged seq %d the peer's next announcement: %v", forged, err)
		}
	}
	// the same forgery while the peer is removed (after its goodbye):
	// its return is not refused
	tb := keylessTable()
	tb.Accept(ann(7, 100, t0, 1), peer, t0)
	bye := ann(7, 101, t0, 0)
	bye.Leaving = true
	if ch, err := tb.Accept(bye, peer, t0); err != nil || ch != Left {
		t.Fatalf("goodbye: %v %v", ch, err)
	}
	if _, err := tb.Accept(ann(7, 1<<64-1, t0, 1), peer, t0); !errors.Is(err, ErrSeqJump) || tb.Len() != 0 {
		t.Errorf("forged seq 2^64-1 for a removed peer: %v, %d peers", err, tb.Len())
	}
	if back, _, _ := honestFor(t, tb, peer, 102, t0.Add(time.Second), 5*time.Second); back != t0.Add(time.Second) {
		t.Errorf("the removed peer's return after a forgery: first accepted at %s, want at once", since(back, t0))
	}
	// a forgery within the bound costs at most maxSeqGap announcements
	// and the silence window
	tb = keylessTable()
	tb.Accept(ann(7, 100, t0, 1), peer, t0)
	if _, err := tb.Accept(ann(7, 100+maxSeqGap, t0, 1), peer, t0); err != nil {
		t.Fatalf("a sequence within the bound: %v", err)
	}
	back, _, _ := honestFor(t, tb, peer, 101, t0.Add(500*time.Millisecond), 30*time.Second)
	if bound := time.Duration(maxSeqGap+1) * 500 * time.Millisecond; back.IsZero() || back.Sub(t0) > bound {
		t.Errorf("after a forgery within the bound the peer came back after %s, bound %v", since(back, t0), bound)
	}
}

// TestRestartedPeerJoinsAfterSequenceJump (audit N3): the bound does not keep
// out an honest peer whose sequence jumped (it restarted: its sequence starts
// at its clock in ns): held once, accepted with its next announcement.
func TestRestartedPeerJoinsAfterSequenceJump(t *testing.T) {
	t0 := time.Unix(5000, 0)
	peer := netip.MustParseAddr("10.0.0.1")
	tb := keylessTable()
	tb.Accept(ann(7, 100, t0, 1), peer, t0)
	restart := uint64(t0.Add(time.Second).UnixNano())
	t1 := t0.Add(time.Second)
	if _, err := tb.Accept(ann(7, restart, t1, 1), peer, t1); !errors.Is(err, ErrSeqJump) {
		t.Fatalf("restarted peer's first announcement: %v, want held", err)
	}
	t2 := t1.Add(500 * time.Millisecond)
	if _, err := tb.Accept(ann(7, restart+1, t2, 1), peer, t2); err != nil {
		t.Fatalf("restarted peer's second announcement: %v", err)
	}
	if ps := tb.Peers(); len(ps) != 1 || ps[0].Last.Seq != restart+1 {
		t.Fatalf("peers after the restart: %+v", ps)
	}
	// a jump is continued only from the address that made it
	other := netip.MustParseAddr("10.0.0.66")
	tb.Accept(ann(7, 1<<62, t2, 1), peer, t2)
	if _, err := tb.Accept(ann(7, 1<<62+1, t2, 1), other, t2); err == nil {
		t.Error("a jump continued from another address")
	}
}

// TestRestoredReplayStateExpires (audit N3): a state file holding a forged
// sequence (written by a run that accepted it) refused the peer for the whole
// of the next run (over 8 minutes, until another restart). Fix: a restored
// entry lives until its own time plus 2 x the skew window, as the removal
// memory it came from.
func TestRestoredReplayStateExpires(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.json")
	t0 := time.Unix(6000, 0)
	skew := 30 * time.Second
	entries := map[string]replayEntry{"7": {Seq: 1<<64 - 1, Time: t0, Interval: 500 * time.Millisecond}}
	if err := saveReplay(path, replayFile{Saved: t0, Clean: true, Peers: entries}); err != nil {
		t.Fatal(err)
	}
	restart := t0.Add(50 * time.Second) // inside the entry's window
	rs, err := loadReplay(path, restart, skew)
	if err != nil {
		t.Fatal(err)
	}
	for _, keyless := range []bool{false, true} {
		tb := NewTable(500*time.Millisecond, 3, skew)
		if keyless {
			tb = keylessTable()
		}
		tb.restored = rs
		tb.restored.peers = map[uint64]replayEntry{7: rs.peers[7]}
		peer := netip.MustParseAddr("10.0.0.1")
		if _, err := tb.Accept(ann(7, 100, restart, 1), peer, restart); !errors.Is(err, ErrReplayed) {
			t.Errorf("keyless %v: inside the restored window: %v, want refused", keyless, err)
		}
		back, _, _ := honestFor(t, tb, peer, 101, restart.Add(500*time.Millisecond), 60*time.Second)
		if window := t0.Add(2*skew + 500*time.Millisecond); back.IsZero() || back.After(window) {
			t.Errorf("keyless %v: the peer was let in at %s after the forged entry's time, its window ends at %v",
				keyless, since(back, t0), window.Sub(t0))
		}
	}
}

// TestForgedPairBetweenAnnouncementsKeepsPeer (audit N3): two forged keyless announcements
// from one address, 2^64-10 then 2^64-9, the second continuing the first's
// held jump: the peer's own announcements were "late" or replayed until it
// was removed (after 3.5-9.6 s), and refused for 60.8 s. Fix: a jump of a
// live peer is continued only after the peer missed an announcement, and
// the peer's own announcement within the bound drops it.
func TestForgedPairBetweenAnnouncementsKeepsPeer(t *testing.T) {
	t0 := time.Unix(5000, 0)
	peer, forger := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.66")
	for _, from := range []netip.Addr{peer, forger} {
		tb := keylessTable()
		back, seq, at := honestFor(t, tb, peer, 100, t0, 2*time.Second)
		if back.IsZero() {
			t.Fatal("honest peer not admitted")
		}
		// the pair, between two of the peer's announcements, 100 ms apart
		f := at.Add(-400 * time.Millisecond)
		tb.Accept(ann(7, 1<<64-10, f, 1), from, f)
		tb.Accept(ann(7, 1<<64-9, f.Add(100*time.Millisecond), 1), from, f.Add(100*time.Millisecond))
		refused := 0
		for end := at.Add(70 * time.Second); at.Before(end); at = at.Add(500 * time.Millisecond) {
			tb.Expire(at)
			if _, err := tb.Accept(ann(7, seq, at, 1), peer, at); err != nil {
				refused++
			}
			if tb.Len() != 1 {
				t.Fatalf("forged pair from %v: the peer was removed %s after it", from, at.Sub(f))
			}
			seq++
		}
		if refused > 0 {
			t.Errorf("forged pair from %v: %d of the peer's announcements refused", from, refused)
		}
	}
}

// TestKeyedSequenceJumpBounded (audit N19): a local user who read the key sent one keyed
// announcement with a peer's host id and sequence 2^64-1; the peer was
// gone from the table for 60 s. Fix: the sequence-gap bound holds with a
// key as without.
func TestKeyedSequenceJumpBounded(t *testing.T) {
	t0 := time.Unix(5000, 0)
	peer := netip.MustParseAddr("10.0.0.1")
	tb := NewTable(500*time.Millisecond, 3, 30*time.Second)
	tb.SetLimits(Limits{MaxPeers: 16, NewRate: 2, Burst: 3})
	_, seq, at := honestFor(t, tb, peer, 100, t0, 2*time.Second)
	if _, err := tb.Accept(ann(7, 1<<64-1, at, 1), peer, at); !errors.Is(err, ErrSeqJump) {
		t.Errorf("keyed sequence 2^64-1: %v, want held", err)
	}
	if _, err := tb.Accept(ann(7, seq, at, 1), peer, at); err != nil || tb.Len() != 1 {
		t.Errorf("the peer's next announcement after a keyed forgery: %v, %d peers", err, tb.Len())
	}
}
