// gchold_test.go: holdGC turns collections off while any hold is in
// force and restores the GC percentage when the last one ends.
package tcpmon

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the GC percentage (SetGCPercent returns the old one).
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func TestHoldGC(t *testing.T) {
	old := debug.SetGCPercent(77)
	defer debug.SetGCPercent(old)
	a := holdGC()
	b := holdGC()
	if p := gcPercent(); p != -1 {
		t.Fatalf("two holds: GC percent %d, want -1", p)
	}
	a()
	a() // a second call of the same release is no second release
	if p := gcPercent(); p != -1 {
		t.Fatalf("one hold left: GC percent %d, want -1", p)
	}
	b()
	if p := gcPercent(); p != 77 {
		t.Fatalf("no hold: GC percent %d, want 77", p)
	}
	if gcHold.n != 0 {
		t.Fatalf("%d holds counted after all ended", gcHold.n)
	}
}
