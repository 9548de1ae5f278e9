// Attack test for the scope of a background class's own-delay harm: it
// holds the interface whose queue it read, no other.
package datapath

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// Audit N20: one background flow whose own delay rises (a peer it controls
// throttles its ACKs) beside an untold foreground on interface 7 must not
// hold background elsewhere: not interface 8, and not key 0, which holds
// every socket whose interface is not known.
func TestOwnHarmHoldsOnlyItsInterface(t *testing.T) {
	requireCgroup2(t)
	ns := testutil.NewNetNS(t)
	var h *Host
	ns.Do(t, func() (err error) {
		h, err = OpenHost(HostConfig{Instance: "ownscope", Yield: true})
		return err
	})
	t.Cleanup(func() { h.Close() })
	const own, other = 7, 8
	now := monoNow(t)
	for _, idx := range []uint32{0, own, other} { // an untold foreground everywhere
		if err := h.cls.LanesFgActive.Put(idx, yield.Window{Start: now, Active: now, Since: now, Episodes: 1}); err != nil {
			t.Fatal(err)
		}
	}
	h.Background.MarkOwnHarm(own, 22*time.Millisecond)
	if !h.Background.BgClassHeld(own, Upload) {
		t.Fatalf("interface %d: its own class's 22 ms queue did not hold it", own)
	}
	for _, idx := range []int{other, 0} {
		if h.Background.BgClassHeld(idx, Upload) {
			var hm yield.Harm
			_ = h.cls.LanesFgHarm.Lookup(uint32(idx), &hm)
			t.Errorf("interface %d held by interface %d's own delay: %+v", idx, own, hm)
		}
	}
}
