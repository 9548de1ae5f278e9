// yield_test.go: the classifier's foreground stamps (lanes_maps.h's
// lanes_fg_active), which the kernel's yield holds background by, run
// through BPF_PROG_TEST_RUN: packets of the foreground lanes open a window
// and stamp the interface (and key 0) active from the packet that brings it
// to FG_MIN_PACKETS or FG_MIN_BYTES; background packets stamp nothing.
package classifier

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/yield"
)

func TestForegroundStamp(t *testing.T) {
	objs := loadForTest(t)
	windows := func() (dev yield.Window, any yield.Window, n int) {
		var k uint32
		var w yield.Window
		it := objs.LanesFgActive.Iterate()
		for it.Next(&k, &w) {
			n++
			if k == 0 {
				any = w
			} else {
				dev = w
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return
	}
	run := func(p pkt) {
		if _, err := objs.LanesClassify.Run(&ebpf.RunOptions{Data: p.build()}); err != nil {
			t.Fatal(err)
		}
	}
	bg := pkt{src: v4src, dst: netip.MustParseAddr("10.9.7.7"), sport: 40000, dport: 443, proto: 6}
	key := abi.NewDstKey(netip.PrefixFrom(bg.dst, 32), 0)
	if err := objs.LanesDst.Put(key, uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		run(bg)
	}
	if _, _, n := windows(); n != 0 {
		t.Fatalf("background packets stamped %d windows", n)
	}
	fg := pkt{src: v4src, dst: v4dst, sport: 40001, dport: 443, proto: 6} // interactive by default
	for i := range int(yield.KernelRule.MinPackets) - 1 {
		run(fg)
		if dev, _, _ := windows(); dev.Active != 0 || dev.Packets != uint32(i+1) {
			t.Fatalf("after %d small foreground packets: %+v, want counted, not active", i+1, dev)
		}
	}
	run(fg)
	dev, any, _ := windows()
	if dev.Active == 0 || dev.Episodes != 1 || dev.Since != dev.Active {
		t.Fatalf("the %dth foreground packet of the window: %+v, want stamped active, one episode", yield.KernelRule.MinPackets, dev)
	}
	if any.Active != dev.Active {
		t.Errorf("key 0 (any interface) %+v, want stamped with the interface", any)
	}
	run(fg)
	if again, _, _ := windows(); again.Active <= dev.Active || again.Episodes != 1 || again.Since != dev.Since {
		t.Errorf("a later packet of the active window: %+v, want stamped again in the same episode", again)
	}
}
