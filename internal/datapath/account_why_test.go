// account_why_test.go: why the background is where it is, from an
// interface's yield state (no kernel).
package datapath

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/yield"
)

// TestAccountWhy: harm in a direction holds that direction alone, an
// opening both, a fresh "not background" verdict reads as not ours, a
// present foreground as sharing, none as free.
func TestAccountWhy(t *testing.T) {
	const now = uint64(100 * time.Second)
	present := yield.Window{Active: now - 1}
	harmedUp := yield.Harm{DirUntil: [2]uint64{now + 1, 0}, Seen: now - 1}
	notOurs := LinkAccount{Owner: OwnerNotBackground, TestedAgo: time.Second}
	stale := LinkAccount{Owner: OwnerNotBackground, TestedAgo: 3 * time.Second}
	for _, c := range []struct {
		name    string
		st      yield.State
		a       LinkAccount
		dir     int
		opening bool
		want    string
	}{
		{"nothing", yield.State{}, LinkAccount{}, yield.Up, false, WhyFree},
		{"present", yield.State{Window: present}, LinkAccount{}, yield.Down, false, WhySharing},
		{"harm up, up", yield.State{Window: present, Harm: harmedUp}, LinkAccount{Held: true}, yield.Up, false, WhyHarm},
		{"harm up, down", yield.State{Window: present, Harm: harmedUp}, LinkAccount{}, yield.Down, false, WhySharing},
		{"opening", yield.State{OpenEnd: now + 1}, LinkAccount{Held: true}, yield.Down, false, WhyOpening},
		{"unknown's opening", yield.State{}, LinkAccount{Held: true}, yield.Up, true, WhyOpening},
		{"not ours", yield.State{Window: present}, notOurs, yield.Up, false, WhyNotOurs},
		{"not ours, stale", yield.State{Window: present}, stale, yield.Up, false, WhySharing},
		{"a download at its floor", yield.State{Window: present}, LinkAccount{Floor: true}, yield.Down, false, WhyFloor},
		{"untold held", yield.State{Window: present, UntoldHeld: true}, LinkAccount{Held: true}, yield.Up, false, WhyUntold},
	} {
		if got := whyOf(c.st, c.opening, c.a, now, c.dir); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
