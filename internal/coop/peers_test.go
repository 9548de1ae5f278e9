// Tests of the peer table: join, activity, silence, goodbye and replays.
package coop

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func ann(id, seq uint64, at time.Time, flows uint16) *Announcement {
	return &Announcement{HostID: id, Seq: seq, Time: at, Interval: 500 * time.Millisecond, ActiveFlows: flows}
}

func TestTableJoinExpire(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := NewTable(500*time.Millisecond, 3, 30*time.Second)
	addr := netip.MustParseAddr("10.0.0.2")
	if ch, err := tb.Accept(ann(1, 1, t0, 1), addr, t0); err != nil || ch != Joined {
		t.Fatalf("first announcement: %v %v", ch, err)
	}
	if ch, _ := tb.Accept(ann(2, 7, t0, 0), addr, t0); ch != Joined {
		t.Fatal("second peer did not join")
	}
	if tb.Len() != 2 || tb.ActiveSenders() != 1 {
		t.Fatalf("len %d active %d", tb.Len(), tb.ActiveSenders())
	}
	if ch, _ := tb.Accept(ann(2, 8, t0.Add(time.Second), 3), addr, t0.Add(time.Second)); ch != ActiveChanged {
		t.Errorf("peer 2 started sending: %v", ch)
	}
	if ch, _ := tb.Accept(ann(2, 9, t0.Add(1200*time.Millisecond), 2), addr, t0.Add(1200*time.Millisecond)); ch != Updated {
		t.Errorf("update: %v", ch)
	}
	// peer 1 silent since t0: still there at 1.5 s, gone after
	if gone := tb.Expire(t0.Add(1500 * time.Millisecond)); len(gone) != 0 {
		t.Errorf("expired too early: %v", gone)
	}
	if gone := tb.Expire(t0.Add(1501 * time.Millisecond)); len(gone) != 1 || gone[0] != 1 {
		t.Errorf("expire: %v", gone)
	}
	if tb.ActiveSenders() != 1 || tb.Peers()[0].ID != 2 {
		t.Errorf("after expiry: %+v", tb.Peers())
	}
	if ne := tb.NextExpiry(); !ne.Equal(t0.Add(2700 * time.Millisecond)) {
		t.Errorf("next expiry %v", ne)
	}
}

func TestTableReplay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := NewTable(500*time.Millisecond, 3, 10*time.Second)
	a := netip.MustParseAddr("10.0.0.2")
	if _, err := tb.Accept(ann(1, 100, t0, 1), a, t0); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{100, 99, 1} {
		if _, err := tb.Accept(ann(1, seq, t0, 1), a, t0.Add(time.Millisecond)); !errors.Is(err, ErrReplayed) {
			t.Errorf("seq %d: %v", seq, err)
		}
	}
	if _, err := tb.Accept(ann(3, 1, t0.Add(-11*time.Second), 1), a, t0); !errors.Is(err, ErrStale) {
		t.Errorf("old timestamp: %v", err)
	}
	if _, err := tb.Accept(ann(3, 1, t0.Add(11*time.Second), 1), a, t0); !errors.Is(err, ErrStale) {
		t.Errorf("future timestamp: %v", err)
	}
	// goodbye removes at once; replaying older announcements does not re-add
	if ch, err := tb.Accept(&Announcement{HostID: 1, Seq: 101, Time: t0, Leaving: true}, a, t0); err != nil || ch != Left {
		t.Fatalf("goodbye: %v %v", ch, err)
	}
	if tb.Len() != 0 {
		t.Fatal("peer still there after goodbye")
	}
	if _, err := tb.Accept(ann(1, 100, t0, 1), a, t0); !errors.Is(err, ErrReplayed) {
		t.Errorf("replay after goodbye: %v", err)
	}
	// silence-removed peers are remembered too
	tb.Accept(ann(5, 10, t0, 1), a, t0)
	tb.Expire(t0.Add(2 * time.Second))
	if _, err := tb.Accept(ann(5, 10, t0.Add(2*time.Second), 1), a, t0.Add(2*time.Second)); !errors.Is(err, ErrReplayed) {
		t.Errorf("replay after expiry: %v", err)
	}
	// a restarted peer (a sequence far higher) comes back with its next
	// announcement, as without a key (maxSeqGap)
	if _, err := tb.Accept(ann(5, 1000, t0.Add(3*time.Second), 1), a, t0.Add(3*time.Second)); !errors.Is(err, ErrSeqJump) {
		t.Errorf("restart: %v, want held", err)
	}
	t1 := t0.Add(3*time.Second + 500*time.Millisecond)
	if ch, err := tb.Accept(ann(5, 1001, t1, 1), a, t1); err != nil || ch != Joined {
		t.Errorf("restart: %v %v", ch, err)
	}
}

// TestTableLateAcrossFamilies: announcement k's IPv6 copy was lost and its
// IPv4 copy arrived after k+1's IPv6 copy (one reader per socket orders each
// family, not the two together). Measured in TestCoopThreeDaemons under
// load as one "replayed" drop. It is late, not a replay: not applied, not a
// drop; its second arrival, and anything older than the remembered
// sequences, are replays.
func TestTableLateAcrossFamilies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := NewTable(500*time.Millisecond, 3, 10*time.Second)
	v4, v6 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::2")
	// 100 .. 100+n accepted over IPv4 (the ring holds the last n), then
	// next+1 over IPv6 before next over IPv4
	n := uint64(recentSeqs)
	next := 100 + n + 1
	for seq := uint64(100); seq < next; seq++ {
		if _, err := tb.Accept(ann(1, seq, t0, 1), v4, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.Accept(ann(1, next+1, t0, 2), v6, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Accept(ann(1, next, t0, 7), v4, t0); !errors.Is(err, ErrLate) {
		t.Fatalf("%d after %d, never seen: %v, want ErrLate", next, next+1, err)
	}
	if got := tb.peers[1].Last.ActiveFlows; got != 2 {
		t.Errorf("late announcement applied: active flows %d, want %d's 2", got, next+1)
	}
	if _, err := tb.Accept(ann(1, next, t0, 7), v4, t0); !errors.Is(err, ErrReplayed) {
		t.Errorf("%d again over IPv4: %v, want ErrReplayed", next, err)
	}
	if _, err := tb.Accept(ann(1, 101, t0, 7), v4, t0); !errors.Is(err, ErrReplayed) {
		t.Errorf("101, older than every remembered sequence: %v, want ErrReplayed", err)
	}
	if _, err := tb.Accept(ann(1, next-1, t0, 7), v4, t0); !errors.Is(err, ErrReplayed) {
		t.Errorf("%d again: %v, want ErrReplayed", next-1, err)
	}
	if DropReason(ErrLate) != "late" {
		t.Errorf("DropReason(ErrLate) = %q", DropReason(ErrLate))
	}
}

// TestTableLateAfterSilence: a peer removed for silence on a busy machine;
// the other family's copy of its last announcement, and one that was
// reordered, arrive after the removal: a duplicate and late, not replays
// (TestCoopThreeDaemons counted one such 'replayed' drop at load 28).
func TestTableLateAfterSilence(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := NewTable(100*time.Millisecond, 3, 10*time.Second)
	v4, v6 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::2")
	n := uint64(recentSeqs)
	for seq := uint64(100); seq <= 100+n; seq++ {
		if _, err := tb.Accept(ann(1, seq, t0, 1), v4, t0); err != nil {
			t.Fatal(err)
		}
	}
	last := 100 + n
	if _, err := tb.Accept(ann(1, last+2, t0, 1), v4, t0); err != nil {
		t.Fatal(err)
	}
	if gone := tb.Expire(t0.Add(2 * time.Second)); len(gone) != 1 { // 3 x 500 ms silent
		t.Fatalf("expired %v, want the peer", gone)
	}
	if _, err := tb.Accept(ann(1, last+2, t0, 1), v6, t0); !errors.Is(err, ErrDuplicate) {
		t.Errorf("the IPv6 copy of the last announcement after the removal: %v, want ErrDuplicate", err)
	}
	if _, err := tb.Accept(ann(1, last+1, t0, 1), v6, t0); !errors.Is(err, ErrLate) {
		t.Errorf("a reordered one after the removal: %v, want ErrLate", err)
	}
	if _, err := tb.Accept(ann(1, last+1, t0, 1), v6, t0); !errors.Is(err, ErrReplayed) {
		t.Errorf("the same again: %v, want ErrReplayed", err)
	}
	if _, err := tb.Accept(ann(1, 100, t0, 1), v6, t0); !errors.Is(err, ErrReplayed) {
		t.Errorf("an old one: %v, want ErrReplayed", err)
	}
	if _, err := tb.Accept(ann(1, last+3, t0, 1), v4, t0); err != nil || tb.Len() != 1 {
		t.Errorf("a new announcement re-adds the peer: %v, %d peers", err, tb.Len())
	}
}

// TestTableLateAcrossReadmission: a young peer (fewer announcements than
// recentSeqs) removed for silence on a busy machine comes back with its
// next announcement but one; the one between, delayed on both families,
// arrives after the readmission: late (and its other copy a duplicate),
// not two replays. In the 5.10 TCG VM TestCoopThreeDaemons counted such
// pairs as 'replayed' drops (peers removed for silence every second there).
// Recordings stay replays: a sequence accepted before the removal, the late
// one again, one older than the peer's first.
func TestTableLateAcrossReadmission(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := NewTable(100*time.Millisecond, 3, 10*time.Second)
	v4, v6 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::2")
	for seq := uint64(100); seq <= 104; seq++ {
		if _, err := tb.Accept(ann(1, seq, t0, 1), v4, t0); err != nil {
			t.Fatal(err)
		}
	}
	if gone := tb.Expire(t0.Add(2 * time.Second)); len(gone) != 1 {
		t.Fatalf("expired %v, want the peer", gone)
	}
	if ch, err := tb.Accept(ann(1, 106, t0, 1), v4, t0); err != nil || ch != Joined {
		t.Fatalf("back after the removal: %v, %v, want Joined", ch, err)
	}
	if _, err := tb.Accept(ann(1, 105, t0, 7), v4, t0); !errors.Is(err, ErrLate) {
		t.Errorf("the one reordered across the removal: %v, want ErrLate", err)
	}
	if _, err := tb.Accept(ann(1, 105, t0, 7), v6, t0); !errors.Is(err, ErrDuplicate) {
		t.Errorf("its other family's copy: %v, want ErrDuplicate", err)
	}
	if got := tb.peers[1].Last.ActiveFlows; got != 1 {
		t.Errorf("late announcement applied: active flows %d, want 106's 1", got)
	}
	for _, seq := range []uint64{105, 103, 99} {
		if _, err := tb.Accept(ann(1, seq, t0, 1), v4, t0); !errors.Is(err, ErrReplayed) {
			t.Errorf("seq %d again over IPv4: %v, want ErrReplayed", seq, err)
		}
	}
}
