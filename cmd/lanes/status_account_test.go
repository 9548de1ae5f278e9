package main

import (
	"testing"

	"github.com/lanes-net/lanes/internal/api"
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
