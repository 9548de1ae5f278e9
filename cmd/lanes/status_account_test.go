package main

import (
	"testing"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

// TestAccountLine: each direction's account reads as one line within 100
// columns, its owner and the test's age in words.
func TestAccountLine(t *testing.T) {
	for _, c := range []struct {
		a    api.LinkAccount
		want string
	}{
		{api.LinkAccount{Dir: "up", CapacityBps: 9_800_000, QueueOwner: "not background", TestedAgoMS: 3040, Tests: 9, NotOurs: 7},
			"account up: link ~9.80Mbit/s, queue: not background's (tested 3s ago), background not held"},
		{api.LinkAccount{Dir: "down", CapacityBps: 999_000_000_000, QueueOwner: "not background", TestedAgoMS: 86_399_999},
			"account down: link ~999.00Gbit/s, queue: not background's (tested 24h0m0s ago), background not held"},
		{api.LinkAccount{Dir: "down", QueueOwner: "testing", TestedAgoMS: 20, Held: true},
			"account down: link not measured, queue: under test (for 0s), background held"},
		{api.LinkAccount{Dir: "up", CapacityBps: 100_000_000_000, QueueOwner: "untested"},
			"account up: link ~100.00Gbit/s, queue: untested, background not held"},
	} {
		got := accountLine(c.a)
		if got != c.want {
			t.Errorf("accountLine(%+v)\n got %q\nwant %q", c.a, got, c.want)
		}
		if len(got) > 100 {
			t.Errorf("%q: %d columns, want at most 100", got, len(got))
		}
	}
}

// TestSharesLine: each lane's share of the link (its rate where the link
// is not measured) and why the background is where it is, in 100 columns.
func TestSharesLine(t *testing.T) {
	three := func(a, b, c uint64, cp uint64) []api.LaneShare {
		out := []api.LaneShare{{Lane: lane.Realtime, Bps: a}, {Lane: lane.Interactive, Bps: b}, {Lane: lane.Background, Bps: c}}
		for i := range out {
			if cp > 0 {
				out[i].Share = float64(out[i].Bps) / float64(cp)
			}
		}
		return out
	}
	for _, c := range []struct {
		a    api.LinkAccount
		want string
	}{
		{api.LinkAccount{Dir: "up", CapacityBps: 10_000_000, Shares: three(0, 100_000, 9_300_000, 10_000_000), Why: "held by an opening"},
			"  up: realtime 0%, interactive 1%, background 93% of the link; why: held by an opening"},
		{api.LinkAccount{Dir: "up", Shares: three(999_000_000_000, 999_000_000_000, 999_000_000_000, 0), Why: "held by an opening"},
			"  up: realtime 999.00Gbit, interactive 999.00Gbit, background 999.00Gbit; why: held by an opening"},
		{api.LinkAccount{Dir: "down", Why: "not ours"}, "  down: no lane counters; why: not ours"},
		{api.LinkAccount{Dir: "down"}, ""},
	} {
		got := sharesLine(c.a)
		if got != c.want {
			t.Errorf("sharesLine(%+v)\n got %q\nwant %q", c.a, got, c.want)
		}
		if len(got) > 100 {
			t.Errorf("%q: %d columns, want at most 100", got, len(got))
		}
	}
}
