// yield_test.go: the classifier's foreground stamps (lanes_maps.h's
// lanes_fg_active), which the kernel's yield holds background by, run
// through BPF_PROG_TEST_RUN: packets of the foreground lanes open a window
// and stamp the interface (and key 0) active from the packet that brings it
// to FG_MIN_PACKETS or FG_MIN_BYTES; background packets stamp nothing.
package classifier

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
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

// hostFrame is p's frame addressed to the test device's own MAC (the
// loopback's, all zeros), so that the kernel takes it for this host
// (PACKET_HOST), as an arriving unicast packet is.
func hostFrame(p pkt) []byte {
	b := p.build()
	clear(b[0:6])
	return b
}

// A foreground's non-TCP arrivals (a call's UDP, whose device sends
// little back) stamp the interface's presence on the ingress hook
// (fg_arrival), as its packets leaving do; a background flow's arrivals,
// by the class's recorded flow or by the policy's destination rule, do
// not, nor TCP's (its ACKs leaving stamp it), nor a frame for another
// host. Beside the untold foreground the class is not held; with
// CLS_F_UNTOLD_HELD (the lab switch, the rule the share replaced) the
// arrivals stamp nothing and an untold foreground holds the class.
func TestForegroundArrivals(t *testing.T) {
	for _, untoldHeld := range []bool{false, true} {
		objs, err := Load(Config{UntoldHeld: untoldHeld})
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		t.Cleanup(func() { objs.Close() })
		active := func() uint64 {
			var w yield.Window
			if err := objs.LanesFgActive.Lookup(uint32(loIdx), &w); err != nil {
				return 0
			}
			return w.Active
		}
		run := func(prog *ebpf.Program, data []byte, n int) {
			for range n {
				if _, err := prog.Run(&ebpf.RunOptions{Data: data}); err != nil {
					t.Fatal(err)
				}
			}
		}
		bgPeer, ruledPeer, caller := netip.MustParseAddr("10.9.6.1"), netip.MustParseAddr("10.9.6.2"), netip.MustParseAddr("10.9.6.3")
		for _, p := range []netip.Addr{bgPeer, ruledPeer} {
			if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(p, 32), 0), uint32(lane.Background)); err != nil {
				t.Fatal(err)
			}
		}
		putBgCtl(t, objs, 0, ClassifierBgCtl{YieldRate: 25_000})
		run(objs.LanesClassify, pkt{src: v4src, dst: bgPeer, sport: 40010, dport: 443, proto: 17}.build(), 1) // records the flow
		for _, p := range []struct {
			what string
			data []byte
		}{
			{"a background flow's arrivals", hostFrame(pkt{src: bgPeer, dst: v4src, sport: 443, dport: 40010, proto: 17})},
			{"arrivals from a peer the policy puts in background", hostFrame(pkt{src: ruledPeer, dst: v4src, sport: 443, dport: 40011, proto: 17})},
			{"a foreground TCP download's arrivals", hostFrame(pkt{src: caller, dst: v4src, sport: 443, dport: 40012, proto: 6})},
			{"frames for another host", pkt{src: caller, dst: v4src, sport: 3478, dport: 40013, proto: 17}.build()},
		} {
			run(objs.LanesBgIngress, p.data, 20)
			if a := active(); a != 0 {
				t.Fatalf("untold-held %v: %s stamped the interface present", untoldHeld, p.what)
			}
		}
		call := hostFrame(pkt{src: caller, dst: v4src, sport: 3478, dport: 40014, proto: 17})
		run(objs.LanesBgIngress, call, int(yield.KernelRule.MinPackets))
		if a := active(); (a != 0) == untoldHeld {
			t.Fatalf("untold-held %v: %d arrivals of a UDP call: stamped %v", untoldHeld, yield.KernelRule.MinPackets, a != 0)
		}
		// present by its packets leaving too, no foreground TCP sample
		run(objs.LanesClassify, pkt{src: v4src, dst: caller, sport: 40014, dport: 3478, proto: 17}.build(), 10)
		got := passed(t, objs.LanesClassify, pkt{src: v4src, dst: bgPeer, sport: 40010, dport: 443, proto: 17}.build(), 1000)
		if (got == 1000) == untoldHeld {
			t.Errorf("untold-held %v: beside an untold foreground %d of 1000 of the class's packets passed", untoldHeld, got)
		}
	}
}

// A foreground is quiet six gaps between its stamps after its last one
// (fg_gap: a window's first stamp comes five packets after the last
// window's), within [20 ms, 150 ms]: a new episode starts at 150 ms, its
// pattern unknown; stamps close together bring it to 20 ms; a pause raises
// it past the pause. With CLS_F_QUIET_FIXED (the lab switch, the rule it
// replaced) it stays 150 ms.
func TestForegroundQuiet(t *testing.T) {
	const minQuiet, maxQuiet = 20 * time.Millisecond, yield.Quiet
	for _, fixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("fixed=%v", fixed), func(t *testing.T) {
			testutil.RequireRoot(t)
			objs, err := Load(Config{QuietFixed: fixed})
			if err != nil {
				t.Fatal(err)
			}
			defer objs.Close()
			fg := pkt{src: v4src, dst: v4dst, sport: 40001, dport: 443, proto: 6}
			dev := func() yield.Window {
				var k uint32
				var w yield.Window
				for it := objs.LanesFgActive.Iterate(); it.Next(&k, &w); {
					if k != 0 {
						return w
					}
				}
				t.Fatal("no interface's window")
				return w
			}
			// stamps the window active (again): FG_MIN_PACKETS packets
			stamp := func() {
				for range int(yield.KernelRule.MinPackets) {
					if _, err := objs.LanesClassify.Run(&ebpf.RunOptions{Data: fg.build()}); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := func(w yield.Window, what string, quiet time.Duration) {
				t.Helper()
				if fixed {
					quiet = maxQuiet
				}
				if got := time.Duration(w.QuietNS); got != quiet {
					t.Errorf("%s: quiet after %v (gap %v), want %v", what, got, time.Duration(w.Gap), quiet)
				}
			}
			stamp()
			want(dev(), "a new episode's first stamp", maxQuiet)
			// stamps microseconds apart (a preempted one's gap decays in
			// a few dozen more)
			for end := time.Now().Add(2 * time.Second); time.Duration(dev().QuietNS) != minQuiet && !fixed && time.Now().Before(end); {
				stamp()
			}
			want(dev(), "stamps microseconds apart", minQuiet)
			time.Sleep(40 * time.Millisecond)
			// packets one by one up to the one that stamps (the first,
			// or a new window's FG_MIN_PACKETS-th): each stamp decays the gap
			for last := dev().Active; dev().Active == last; {
				if _, err := objs.LanesClassify.Run(&ebpf.RunOptions{Data: fg.build()}); err != nil {
					t.Fatal(err)
				}
			}
			w := dev()
			gap := time.Duration(w.Gap)
			want(w, "a stamp after a 40 ms pause", min(max(6*gap, minQuiet), maxQuiet))
			if time.Duration(w.QuietNS) <= 40*time.Millisecond {
				t.Errorf("after a 40 ms pause: quiet after %v (gap %v), want longer than the pause", time.Duration(w.QuietNS), gap)
			}
		})
	}
}
