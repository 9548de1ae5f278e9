// Tests of the lane vocabulary: names, text round trips, class ids.
package lane

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, l := range append([]Lane{Unset}, All...) {
		b, _ := l.MarshalText()
		var back Lane
		if err := back.UnmarshalText(b); err != nil || back != l {
			t.Errorf("%v -> %q -> %v, %v", l, b, back, err)
		}
	}
	if _, err := Parse("unset"); err == nil {
		t.Error("Parse accepts unset: a rule could name no lane")
	}
	var l Lane
	if err := l.UnmarshalText([]byte("fast")); err == nil {
		t.Error("unknown lane accepted")
	}
}

func TestClassIDs(t *testing.T) {
	seen := map[uint32]bool{}
	for _, l := range All {
		id := l.ClassID()
		if id>>16 != RootMajor || seen[id] {
			t.Errorf("%v: class id %#x", l, id)
		}
		seen[id] = true
	}
	if Unset.ClassID() != Interactive.ClassID() {
		t.Error("unset traffic must go to the interactive class")
	}
	if !(Realtime.HTBPrio() < Interactive.HTBPrio() && Interactive.HTBPrio() < Background.HTBPrio()) {
		t.Error("HTB priorities out of order")
	}
}
