// pace_test.go: the pacing of unprivileged callers' requests.
package api

import (
	"testing"
	"time"
)

func TestPacerBoundsRate(t *testing.T) {
	var p pacer
	now := time.Unix(100, 0)
	var last time.Duration
	for range UserBurst + UserRate { // the burst, then a second's worth
		last = p.wait(7, now)
	}
	if want := time.Second; last < want-time.Millisecond || last > want+time.Millisecond {
		t.Errorf("uid 7's request after its burst and %d more waits %v, want %v", UserRate, last, want)
	}
	if d := p.wait(8, now); d != 0 {
		t.Errorf("another uid's first request waits %v", d)
	}
	// a second later the debt is paid
	if d := p.wait(7, now.Add(time.Second)); d > time.Second/UserRate+time.Millisecond {
		t.Errorf("after a second's pause: %v", d)
	}
	// many uids together are held to AllUsersRate
	for uid := range uint32(AllUsersBurst + AllUsersRate) {
		last = p.wait(1000+uid, now.Add(2*time.Second))
	}
	if last < 900*time.Millisecond {
		t.Errorf("the %dth request of distinct uids at once waits %v, want about 1 s", AllUsersBurst+AllUsersRate, last)
	}
	if len(p.byUID) > maxPaced {
		t.Errorf("%d buckets kept, bound %d", len(p.byUID), maxPaced)
	}
}
