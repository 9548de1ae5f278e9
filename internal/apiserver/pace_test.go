// pace_test.go: the pacing of unprivileged callers' requests.
package apiserver

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/api"
)

func TestPacerBoundsRate(t *testing.T) {
	var p pacer
	now := time.Unix(100, 0)
	var last time.Duration
	for range UserBurst + UserRate { // the burst, then a second's worth
		last = p.wait(7, 1, now)
	}
	if want := time.Second; last < want-time.Millisecond || last > want+time.Millisecond {
		t.Errorf("uid 7's request after its burst and %d more waits %v, want %v", UserRate, last, want)
	}
	if d := p.wait(8, 1, now); d != 0 {
		t.Errorf("another uid's first request waits %v", d)
	}
	// a second later the debt is paid
	if d := p.wait(7, 1, now.Add(time.Second)); d > time.Second/UserRate+time.Millisecond {
		t.Errorf("after a second's pause: %v", d)
	}
	// many uids together are held to AllUsersRate
	for uid := range uint32(AllUsersBurst + AllUsersRate) {
		last = p.wait(1000+uid, 1, now.Add(2*time.Second))
	}
	if last < 900*time.Millisecond {
		t.Errorf("the %dth request of distinct uids at once waits %v, want about 1 s", AllUsersBurst+AllUsersRate, last)
	}
	if len(p.byUID) > maxPaced {
		t.Errorf("%d buckets kept, bound %d", len(p.byUID), maxPaced)
	}
}

// TestPacerCostsBySize: a request pays a token per started KiB, so a uid's
// full socket-lanes requests (about 40 KiB each) come a few a second.
func TestPacerCostsBySize(t *testing.T) {
	if c := requestCost(30); c != 1 {
		t.Errorf("a short request costs %v tokens, want 1", c)
	}
	if c := requestCost(40 << 10); c != 40 {
		t.Errorf("a 40 KiB request costs %v tokens, want 40", c)
	}
	var p pacer
	now := time.Unix(100, 0)
	n := 0
	for p.wait(7, requestCost(40<<10), now) == 0 {
		n++
	}
	if want := UserBurst / 40; n != want {
		t.Errorf("%d requests of 40 KiB at once, want %d", n, want)
	}
	if d := p.wait(7, requestCost(40<<10), now); d < time.Second*40/UserRate {
		t.Errorf("the next 40 KiB request waits %v, want at least %v", d, time.Second*40/UserRate)
	}
}

// TestMovesPaidBySockets (audit N15): a move-pid of a caller other than root
// costs, after it is done, a token per socketsPerToken sockets it moved;
// so moves of a process holding many sockets go at a bounded rate.
func TestMovesPaidBySockets(t *testing.T) {
	var p pacer
	now := time.Unix(100, 0)
	moves := 0
	for p.wait(7, requestCost(60), now) == 0 {
		p.wait(7, moveCost(&api.Moved{UDP: 1024}), now)
		moves++
	}
	if want := UserBurst*socketsPerToken/1024 + 1; moves > want {
		t.Errorf("%d moves of 1,024 sockets at once, want at most %d", moves, want)
	}
	if c := moveCost(&api.Moved{TCP: 2}); c >= 1 {
		t.Errorf("a move of 2 sockets costs %v tokens beyond its line", c)
	}
}
