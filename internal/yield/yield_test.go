// yield_test.go: the status of the kernel's foreground states.
package yield

import (
	"strings"
	"testing"
	"time"
)

func TestStatusOf(t *testing.T) {
	wall := time.Unix(1000, 0)
	now := uint64(50 * time.Second)
	ms := func(d int) uint64 { return now - uint64(time.Duration(d)*time.Millisecond) }
	states := map[string]State{
		"eth0":  {Window: Window{Active: ms(100), Since: ms(2000), Episodes: 3}, Harm: Harm{At: ms(20), Since: ms(300), QueueUS: 12000}},             // held: harmed
		"wlan0": {Window: Window{Active: ms(600), Since: ms(900), Episodes: 2}},                                                                      // the stamp is over
		"wwan0": {Window: Window{Active: ms(50), Since: ms(700), Episodes: 1}, Harm: Harm{At: ms(150), Seen: ms(10)}},                                // present, harm over
		"wg0":   {Window: Window{Active: ms(50), Since: ms(700), Episodes: 1}},                                                                       // present, no TCP sample
		"wg1":   {Window: Window{Active: ms(50), Since: ms(700), Episodes: 1}, UntoldHeld: true},                                                     // the same, experiment untold-held
		"ppp0":  {Window: Window{Active: ms(50), Since: ms(700), Episodes: 1}, Harm: Harm{At: ms(30), Since: ms(60), QueueUS: 14000, Kind: HarmOwn}}, // untold, the background's own delay
		"usb0":  {OpenEnd: now + uint64(50*time.Millisecond)},                                                                                        // a connection opened
	}
	s := StatusOf(states, now, wall, 10*time.Millisecond)
	if !s.Yielding || s.Yields != 9 {
		t.Errorf("status %+v, want held somewhere with 9 episodes", s)
	}
	if e := s.Interfaces["eth0"]; !e.Yielding || e.Mode != ModeHeld || e.Cause != CauseHarm || !e.Since.Equal(wall.Add(-300*time.Millisecond)) || !strings.Contains(e.Signal, "12ms above") {
		t.Errorf("eth0 %+v, want held since 300 ms ago by a 12 ms queue", e)
	}
	if w := s.Interfaces["wlan0"]; w.Yielding || w.Mode != ModeFree {
		t.Errorf("wlan0 %+v, want free", w)
	}
	if w := s.Interfaces["wwan0"]; w.Yielding || w.Mode != ModeSharing || w.Cause != "" || !strings.Contains(w.Signal, "2.5ms") {
		t.Errorf("wwan0 %+v, want sharing at 2.5ms", w)
	}
	if w := s.Interfaces["wg0"]; w.Yielding || w.Mode != ModeSharing || !strings.Contains(w.Signal, "own queuing delay") || !strings.Contains(w.Signal, "2.5ms") {
		t.Errorf("wg0 %+v, want sharing at 2.5ms by the background's own delay beside a foreground no TCP sample speaks for", w)
	}
	if w := s.Interfaces["wg1"]; !w.Yielding || w.Mode != ModeHeld || w.Cause != CauseUntold || !strings.Contains(w.Signal, "without TCP RTT samples") {
		t.Errorf("wg1 %+v, want held with --untold-held: a foreground whose harm no TCP sample tells", w)
	}
	if p := s.Interfaces["ppp0"]; !p.Yielding || p.Mode != ModeHeld || p.Cause != CauseHarm || !strings.Contains(p.Signal, "own queuing delay 14ms") {
		t.Errorf("ppp0 %+v, want held: the background's own delay 14 ms beside an untold foreground", p)
	}
	if u := s.Interfaces["usb0"]; !u.Yielding || u.Mode != ModeHeld || u.Cause != CauseOpening || !strings.Contains(u.Signal, "opened") {
		t.Errorf("usb0 %+v, want held by an opening", u)
	}
}

func TestShareTarget(t *testing.T) {
	for _, c := range []struct{ target, want time.Duration }{
		{10 * time.Millisecond, 2500 * time.Microsecond},
		{40 * time.Millisecond, 10 * time.Millisecond},
		{2 * time.Millisecond, time.Millisecond},
		{500 * time.Microsecond, 500 * time.Microsecond},
	} {
		if got := ShareTarget(c.target); got != c.want {
			t.Errorf("ShareTarget(%v) = %v, want %v", c.target, got, c.want)
		}
	}
}

// TestHolds is lanes_maps.h's fg_yield: an untold foreground (present, no
// foreground TCP RTT sample) holds background only with the lab switch;
// its harm read on a background socket's own delay holds it as a TCP
// socket's does.
func TestHolds(t *testing.T) {
	now := uint64(50 * time.Second)
	ms := func(d int) uint64 { return now - uint64(time.Duration(d)*time.Millisecond) }
	present := Window{Active: ms(50)}
	for _, c := range []struct {
		name       string
		st         State
		anyOpening bool
		want       bool
	}{
		{"none", State{}, false, false},
		{"untold", State{Window: present}, false, false},
		{"untold, --untold-held", State{Window: present, UntoldHeld: true}, false, true},
		{"told, --untold-held", State{Window: present, UntoldHeld: true, Harm: Harm{Seen: ms(100)}}, false, false},
		{"untold, own delay harmed", State{Window: present, Harm: Harm{At: ms(40), Kind: HarmOwn}}, false, true},
		{"untold, own delay harm over", State{Window: present, Harm: Harm{At: ms(140), Kind: HarmOwn}}, false, false},
		{"an opening", State{OpenEnd: now + 1}, false, true},
		{"an opening by an interface not known", State{}, true, true},
	} {
		if got := c.st.Holds(now, c.anyOpening); got != c.want {
			t.Errorf("%s: Holds = %v, want %v", c.name, got, c.want)
		}
	}
}

// A foreground is quiet to a download the measured QuietNS after its last
// stamp (Quiet before the classifier measured one), to an upload Quiet
// after it: an upload's last packet leaves ahead of its bottleneck queue.
func TestWindowQuiet(t *testing.T) {
	now := uint64(50 * time.Second)
	ago := func(d time.Duration) uint64 { return now - uint64(d) }
	cases := []struct {
		w    Window
		dir  int
		want bool
		what string
	}{
		{Window{Active: ago(30 * time.Millisecond), QuietNS: uint32(20 * time.Millisecond)}, Down, true, "30 ms after, measured 20 ms, a download"},
		{Window{Active: ago(30 * time.Millisecond), QuietNS: uint32(20 * time.Millisecond)}, Up, false, "30 ms after, measured 20 ms, an upload"},
		{Window{Active: ago(160 * time.Millisecond), QuietNS: uint32(20 * time.Millisecond)}, Up, true, "160 ms after, an upload"},
		{Window{Active: ago(100 * time.Millisecond)}, Down, false, "100 ms after, nothing measured"},
		{Window{Active: ago(160 * time.Millisecond)}, Down, true, "160 ms after, nothing measured"},
		{Window{Active: ago(Recent)}, Down, false, "a foreground not recent"},
		{Window{}, Down, false, "never stamped"},
	}
	for _, c := range cases {
		if got := c.w.Quiet(now, c.dir); got != c.want {
			t.Errorf("%s: quiet %v, want %v", c.what, got, c.want)
		}
	}
}
