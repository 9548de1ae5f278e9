// spacing_test.go: a host that announces slower than its configured
// interval says so, and its peers keep it while it keeps that spacing.
package coop

import (
	"github.com/lanes-net/lanes/internal/config"
	"net/netip"
	"testing"
	"time"
)

// TestSlowAnnouncerStaysPeer: three daemons in qemu without KVM, beside
// three downloads, announced 1 to 6 times a second at a 100 ms interval;
// peers removed each other for silence (3 intervals) about every second,
// and N flapped (TestCoopThreeDaemonsDownlink timed out). A host whose
// announcements are 400 ms apart now announces 400 ms, and a peer keeps
// it over 1 s of silence between two of them; one silent for more than
// silence_intervals of that spacing is still removed.
func TestSlowAnnouncerStaysPeer(t *testing.T) {
	cfg := paperConfig()
	cfg.Interval = config.Duration(100 * time.Millisecond)
	g := newGroup(t, 2, cfg)
	slow, peer := g.nodes[0], g.nodes[1]
	from := netip.MustParseAddr("10.9.0.1")
	announce := func() *Announcement {
		slow.c.announce()
		sent := slow.tr.take()
		if len(sent) != 1 {
			t.Fatalf("%d announcements sent, want 1", len(sent))
		}
		if err := peer.c.Handle(sent[0], from); err != nil {
			t.Fatalf("peer refused the announcement: %v", err)
		}
		a, err := Decode(sent[0], slow.c.key)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := announce(); a.Interval != 100*time.Millisecond {
		t.Fatalf("first announcement's interval %v, want the configured 100ms", a.Interval)
	}
	for range 3 {
		g.clk.add(400 * time.Millisecond)
		if a := announce(); a.Interval != 400*time.Millisecond {
			t.Fatalf("interval announced 400ms after the last: %v, want 400ms", a.Interval)
		}
	}
	g.clk.add(time.Second) // under 3 x 400 ms
	peer.c.mu.Lock()
	gone := peer.c.peers.expire(g.clk.now())
	peer.c.mu.Unlock()
	if len(gone) != 0 || peer.c.peers.table.Len() != 1 {
		t.Fatalf("peer removed a host 1 s after its last announcement (it keeps 400 ms): removed %v", gone)
	}
	g.clk.add(300 * time.Millisecond)
	peer.c.mu.Lock()
	gone = peer.c.peers.expire(g.clk.now())
	peer.c.mu.Unlock()
	if len(gone) != 1 {
		t.Fatalf("host silent for 1.3 s (over 3 x 400 ms) still a peer")
	}
	// the bound: gaps beyond 10 intervals announce 10 intervals
	g.clk.add(5 * time.Second)
	if a := announce(); a.Interval != time.Second {
		t.Fatalf("interval announced 5 s after the last: %v, want the bound 1s", a.Interval)
	}
}
