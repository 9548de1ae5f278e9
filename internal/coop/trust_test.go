// Tests of the coop trust limits: a bounded, rate-limited peer table, one id
// per address without a key, N that grows slowly without a key, bounded rate
// estimates, and replay state that survives a restart.
package coop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestTableAdmission(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := NewTable(500*time.Millisecond, 3, 30*time.Second)
	tb.SetLimits(Limits{MaxPeers: 5, NewRate: 2, Burst: 3, OnePerAddr: true})
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}) }
	for i := 1; i <= 3; i++ { // the burst
		if _, err := tb.Accept(ann(uint64(i), 1, t0, 1), addr(i), t0); err != nil {
			t.Fatalf("peer %d: %v", i, err)
		}
	}
	if _, err := tb.Accept(ann(4, 1, t0, 1), addr(4), t0); !errors.Is(err, ErrPeerRate) {
		t.Fatalf("fourth new peer at once: %v", err)
	}
	t1 := t0.Add(500 * time.Millisecond) // one token back
	if _, err := tb.Accept(ann(4, 1, t1, 1), addr(4), t1); err != nil {
		t.Fatalf("after refill: %v", err)
	}
	// a known peer is never rate limited
	if _, err := tb.Accept(ann(1, 2, t1, 1), addr(1), t1); err != nil {
		t.Fatalf("known peer: %v", err)
	}
	// a second id from a known address
	t2 := t1.Add(time.Second)
	if _, err := tb.Accept(ann(9, 1, t2, 1), addr(1), t2); !errors.Is(err, ErrAddrConflict) {
		t.Fatalf("second id on one address: %v", err)
	}
	if _, err := tb.Accept(ann(5, 1, t2, 1), addr(5), t2); err != nil {
		t.Fatal(err)
	}
	t3 := t2.Add(5 * time.Second)
	if _, err := tb.Accept(ann(6, 1, t3, 1), addr(6), t3); !errors.Is(err, ErrTableFull) {
		t.Fatalf("sixth peer in a table of 5: %v", err)
	}
	if tb.Len() != 5 {
		t.Errorf("table holds %d", tb.Len())
	}
}

// After an unclean restart the saved sequence and a margin after the saved
// timestamp refuse recordings; a clean stop needs only the sequence.
func TestReplayStateSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replay.json")
	t0 := time.Unix(2000, 0)
	tb := NewTable(500*time.Millisecond, 3, 30*time.Second)
	a := netip.MustParseAddr("10.0.0.2")
	for s := uint64(1); s <= 4; s++ {
		at := t0.Add(time.Duration(s) * 500 * time.Millisecond)
		if _, err := tb.Accept(ann(7, s, at, 1), a, at); err != nil {
			t.Fatal(err)
		}
	}
	saved := t0.Add(2 * time.Second) // seq 4 at t0+2s is the last saved
	if err := saveReplay(path, replayFile{Saved: saved, Peers: tb.replayEntries(saved)}); err != nil {
		t.Fatal(err)
	}
	// recorded after the save, before the crash: seq 5 at t0+2.5s
	late := ann(7, 5, t0.Add(2500*time.Millisecond), 1)
	restart := t0.Add(3 * time.Second)
	rs, err := loadReplay(path, restart, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nt := NewTable(500*time.Millisecond, 3, 30*time.Second)
	nt.restored = rs
	for _, old := range []*Announcement{ann(7, 3, t0.Add(1500*time.Millisecond), 1), late} {
		if _, err := nt.Accept(old, a, restart); !errors.Is(err, ErrReplayed) {
			t.Errorf("replay of seq %d after an unclean restart: %v", old.Seq, err)
		}
	}
	// an unknown host's recording from before the restart (epoch rule)
	if _, err := nt.Accept(ann(8, 1, restart.Add(-10*time.Second), 1), a, restart); !errors.Is(err, ErrReplayed) {
		t.Errorf("recording of an unknown host: %v", err)
	}
	// the peer's next fresh announcement passes
	fresh := restart.Add(time.Second)
	if _, err := nt.Accept(ann(7, 8, fresh, 1), a, fresh); err != nil {
		t.Errorf("fresh announcement after restart: %v", err)
	}
	// clean stop: only the sequence matters
	if err := saveReplay(path, replayFile{Saved: saved, Clean: true, Peers: tb.replayEntries(saved)}); err != nil {
		t.Fatal(err)
	}
	rs, _ = loadReplay(path, restart, 30*time.Second)
	ct := NewTable(500*time.Millisecond, 3, 30*time.Second)
	ct.restored = rs
	if _, err := ct.Accept(ann(7, 4, t0.Add(2*time.Second), 1), a, restart); !errors.Is(err, ErrReplayed) {
		t.Errorf("replay of the saved seq after a clean stop: %v", err)
	}
	if _, err := ct.Accept(late, a, restart); err != nil {
		t.Errorf("next seq after a clean stop: %v", err)
	}
}

// A controller that restarts with its state file refuses a replay of what it
// accepted before (the controller writes the file itself).
func TestControllerReplayAfterRestart(t *testing.T) {
	cfg := paperConfig()
	cfg.StateFile = filepath.Join(t.TempDir(), "replay.json")
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	mk := func() *Controller {
		c, err := New(Options{Config: cfg, Flows: &fakeFlows{}, Transport: newFakeTransport(), HostID: 1,
			Now: clk.now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	key := []byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	c := mk()
	from := netip.MustParseAddr("10.9.0.2")
	var rec [][]byte
	for s := uint64(1); s <= 3; s++ {
		clk.add(500 * time.Millisecond)
		b := Encode(&Announcement{HostID: 2, Seq: s, Time: clk.now(), Interval: 500 * time.Millisecond, ActiveFlows: 1}, key)
		rec = append(rec, b)
		if err := c.Handle(b, from); err != nil {
			t.Fatal(err)
		}
	}
	c.tick(context.Background()) // periodic save (and the join saved at once)
	clk.add(200 * time.Millisecond)
	c = mk() // crash and restart: no clean save
	for i, b := range rec {
		if err := c.Handle(b, from); !errors.Is(err, ErrReplayed) {
			t.Errorf("replayed announcement %d accepted after restart: %v", i+1, err)
		}
	}
	if n := c.Status().Counters.Replayed; n != 3 {
		t.Errorf("replayed counter %d", n)
	}
}

// Without a key: one peer more in N per keyless_growth, up to the bound;
// the rest wait outside N and outside the rate estimate.
func TestKeylessNGrowsSlowly(t *testing.T) {
	cfg := paperConfig()
	cfg.Key = ""
	cfg.KeylessMaxPeers = 3
	cfg.NewPeerBurst = 20
	cfg.NewPeerRate = 100
	g := newGroup(t, 1, cfg)
	victim := g.nodes[0]
	victim.flows.set(bulkFlow(1))
	g.round()
	for id := uint64(100); id < 120; id++ {
		b := Encode(&Announcement{HostID: id, Seq: 1, Time: g.clk.now(), Interval: 500 * time.Millisecond,
			ActiveFlows: 1, GoodputKbit: 3_000_000}, nil)
		victim.c.Handle(b, netip.AddrFrom4([4]byte{10, 9, 1, byte(id)}))
	}
	var ns []int
	for r := 0; r < 8; r++ {
		victim.c.recomputeAndApply()
		ns = append(ns, victim.c.Status().N)
		g.clk.add(500 * time.Millisecond)
		for id := uint64(100); id < 120; id++ { // the fakes keep announcing
			b := Encode(&Announcement{HostID: id, Seq: uint64(2 + r), Time: g.clk.now(), Interval: 500 * time.Millisecond,
				ActiveFlows: 1, GoodputKbit: 3_000_000}, nil)
			victim.c.Handle(b, netip.AddrFrom4([4]byte{10, 9, 1, byte(id)}))
		}
	}
	want := []int{2, 2, 3, 3, 4, 4, 4, 4} // every second one more, at most 1 + 3
	if fmt.Sprint(ns) != fmt.Sprint(want) {
		t.Errorf("N over 4 s of 20 fake peers: %v, want %v", ns, want)
	}
	st := victim.c.Status()
	if st.Trust != "unauthenticated" || st.Uncounted != 17 {
		t.Errorf("trust %q uncounted %d", st.Trust, st.Uncounted)
	}
}

// Announced goodput is bounded by the announced windows and max_ap_rate.
func TestRateEstimateBounded(t *testing.T) {
	cfg := paperConfig()
	cfg.APRate = 0
	g := newGroup(t, 2, cfg)
	g.nodes[0].flows.set(bulkFlow(1))
	g.nodes[1].flows.set(bulkFlow(2))
	g.round()
	g.round()
	// a liar (with the key) claims 3 Gbit/s from a 60-segment window
	b := Encode(&Announcement{HostID: 50, Seq: 1, Time: g.clk.now(), Interval: 500 * time.Millisecond, ActiveFlows: 1,
		GoodputKbit: 3_000_000, Flows: []FlowSummary{{Cwnd: 60, MSS: 1500, MinRTT: 256 * time.Millisecond, SRTT: 260 * time.Millisecond}}},
		[]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff})
	g.nodes[0].c.Handle(b, netip.MustParseAddr("10.9.0.50"))
	g.round()
	st := g.nodes[0].c.Status()
	// two honest hosts of 2.8 Mbit/s, the liar's window 2.8 Mbit/s x2: in
	// startup 2 x (2.8 + 2.8 + 5.6 + 3.75 of headroom over 256 ms) = 29.9
	// Mbit/s, not 3 Gbit/s
	if st.RateBits > 30e6 {
		t.Errorf("estimate %d after a 3 Gbit/s claim", st.RateBits)
	}
	if st.RateBits > cfg.MaxAPRate.Bits() {
		t.Errorf("estimate %d above max_ap_rate", st.RateBits)
	}
}

// The copy of an announcement that arrives over the other family (IPv4
// broadcast and IPv6 multicast) is a duplicate, not a replay; a second copy
// over the same family is a replay.
func TestDuplicateOverOtherFamily(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tb := NewTable(500*time.Millisecond, 3, 30*time.Second)
	v4, v6 := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::2")
	if _, err := tb.Accept(ann(1, 5, t0, 1), v4, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Accept(ann(1, 5, t0, 1), v6, t0); !errors.Is(err, ErrDuplicate) {
		t.Errorf("IPv6 copy: %v", err)
	}
	if _, err := tb.Accept(ann(1, 5, t0, 1), v4, t0); !errors.Is(err, ErrReplayed) {
		t.Errorf("second IPv4 copy: %v", err)
	}
	// the IPv6 copy of 6 arrives after the IPv4 copy of 7
	if _, err := tb.Accept(ann(1, 6, t0, 1), v4, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Accept(ann(1, 7, t0, 1), v4, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Accept(ann(1, 6, t0, 1), v6, t0); !errors.Is(err, ErrDuplicate) {
		t.Errorf("late IPv6 copy of an earlier announcement: %v", err)
	}
	// a peer heard first over IPv6 is named by its IPv4 address once known
	if _, err := tb.Accept(ann(2, 1, t0, 1), v6, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Accept(ann(2, 2, t0, 1), netip.MustParseAddr("10.0.0.3"), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Accept(ann(2, 3, t0, 1), v6, t0); err != nil {
		t.Fatal(err)
	}
	if a := tb.Peers()[1].Addr; a.String() != "10.0.0.3" {
		t.Errorf("peer address %v, want its IPv4 address", a)
	}
}

// TestKeylessGoodbyeOnlyFromThePeer (audit D5): without a key, one goodbye
// with a peer's id and sequence 2^64-1, from any address, removed the peer and
// stored that sequence, so its next 120 real announcements counted as replays.
// Fix: a keyless goodbye must come from the peer's address and sequence near
// its latest, and the replay memory keeps the peer's own sequence.
func TestKeylessGoodbyeOnlyFromThePeer(t *testing.T) {
	t0 := time.Unix(3000, 0)
	tb := NewTable(100*time.Millisecond, 3, 30*time.Second)
	tb.SetLimits(Limits{MaxPeers: 16, NewRate: 2, Burst: 3, OnePerAddr: true, Keyless: true})
	peer, attacker := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.66")
	if _, err := tb.Accept(ann(7, 100, t0, 1), peer, t0); err != nil {
		t.Fatal(err)
	}
	bye := func(seq uint64) *Announcement { a := ann(7, seq, t0, 0); a.Leaving = true; return a }
	if _, err := tb.Accept(bye(1<<64-1), attacker, t0); !errors.Is(err, ErrNotPeer) || tb.Len() != 1 {
		t.Fatalf("forged goodbye from another address: %v, %d peers", err, tb.Len())
	}
	if _, err := tb.Accept(bye(1<<64-1), peer, t0); !errors.Is(err, ErrNotPeer) || tb.Len() != 1 {
		t.Fatalf("spoofed goodbye far ahead: %v, %d peers", err, tb.Len())
	}
	// a spoofed goodbye near the peer's sequence removes it, but the peer's
	// next announcement joins it again
	if ch, err := tb.Accept(bye(105), peer, t0); err != nil || ch != Left {
		t.Fatalf("goodbye from the peer: %v %v", ch, err)
	}
	t1 := t0.Add(time.Second)
	if ch, err := tb.Accept(ann(7, 102, t1, 1), peer, t1); err != nil || ch != Joined {
		t.Fatalf("the peer's next announcement after a forged goodbye: %v %v", ch, err)
	}
	// a replay of what it sent before stays refused
	if _, err := tb.Accept(ann(7, 100, t1, 1), peer, t1); err == nil {
		t.Fatal("replayed announcement accepted")
	}
}

// TestGoodbyeFloodNotStored (audit D6): ~60k keyless goodbyes a second with
// invented host ids each added to the removed-peer memory, persisted every
// second (RSS 26 -> 586 MB, state file 40 MB). Fix: a goodbye for no known
// peer is not stored; the memory is bounded; the state file read is bounded.
func TestGoodbyeFloodNotStored(t *testing.T) {
	t0 := time.Unix(4000, 0)
	tb := NewTable(100*time.Millisecond, 3, 30*time.Second)
	tb.SetLimits(Limits{MaxPeers: 16, NewRate: 2, Burst: 3, OnePerAddr: true, Keyless: true})
	from := netip.MustParseAddr("10.0.0.66")
	for i := range 50_000 {
		a := ann(uint64(0xb0000+i), 1<<63, t0, 0)
		a.Leaving = true
		if _, err := tb.Accept(a, from, t0); !errors.Is(err, ErrNotPeer) {
			t.Fatalf("goodbye %d of an unknown id: %v", i, err)
		}
	}
	if n := len(tb.replayEntries(t0)); n != 0 {
		t.Fatalf("%d replay entries after a flood of unknown goodbyes", n)
	}
	// admitted peers that leave are remembered, up to maxGone
	for i := range maxGone + 100 {
		m := seqMemo{seq: 1, seen: t0.Add(time.Duration(i))}
		tb.forget(uint64(i), m)
	}
	if len(tb.gone) != maxGone {
		t.Fatalf("removed-peer memory holds %d, bound %d", len(tb.gone), maxGone)
	}
	if _, ok := tb.gone[0]; ok {
		t.Error("the oldest memory was kept when full")
	}
	big := filepath.Join(t.TempDir(), "replay.json")
	if err := os.WriteFile(big, make([]byte, maxStateFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadReplay(big, t0, 30*time.Second); err == nil {
		t.Error("a state file over the bound was read")
	}
}
