// untold_test.go: the harm of a foreground no TCP sample speaks for (a
// call: UDP), read on a background upload's own queuing delay by sock_ops
// (yield.h's bg_own_delay), on real sockets: a background CUBIC upload
// fills the shaped egress tree's queue while the test keeps the
// interface's foreground present with no foreground TCP sample; sock_ops
// then holds that socket (its storage's own_until), and stamps no
// interface. Without the foreground it holds nothing; with the lab switch
// UntoldHeld the untold foreground holds the upload at the minimum instead.
package datapath

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

func TestBackgroundOwnDelayTellsUntoldHarm(t *testing.T) {
	requireCgroup2(t)
	for _, c := range []struct {
		name              string
		present, untoldOn bool
	}{{"no foreground", false, false}, {"untold foreground", true, false}, {"untold foreground, --untold-held", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			p := testutil.NewVethPair(t)
			// background keeps CUBIC (no LEDBAT++): its queue grows
			h, idx := openShapedHost(t, p, HostConfig{StateDir: testStateDir, Instance: "untold", Yield: true, BackgroundTarget: -1, Experiments: experiments.Set{UntoldHeld: c.untoldOn}}, 2_000_000)
			_, addr := startSink(t, p.B, p.AddrB, 9531)
			dst, _ := netip.AddrFromSlice(p.AddrB)
			if err := h.Lanes.SetDstLane(DstRule{Prefix: netip.PrefixFrom(dst, dst.BitLen()), DPort: 9531}, lane.Background); err != nil {
				t.Fatal(err)
			}
			present := func() {
				now := monoNow(t)
				for _, k := range []uint32{uint32(idx), 0} {
					if err := h.cls.LanesFgActive.Put(k, yield.Window{Start: now, Active: now, Since: now, Episodes: 1, Packets: 5}); err != nil {
						t.Fatal(err)
					}
				}
			}
			conn := dialCC(t, p.A, addr, "cubic")
			startWriting(t, conn)
			var own [2]uint64
			var peak uint32
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				if c.present {
					present()
				}
				if cw, _ := tcpInfo(t, conn); cw > peak {
					peak = cw
				}
				if own = ownHold(t, h, conn); own[0] != 0 {
					break
				}
			}
			told := own[0] != 0
			t.Logf("the upload's own hold until %v, its largest cwnd %d", own, peak)
			switch {
			case c.present && !c.untoldOn && !told:
				t.Errorf("a background upload's own queue beside an untold foreground did not hold it (cwnd up to %d)", peak)
			case (!c.present || c.untoldOn) && told:
				t.Errorf("a background upload held by its own delay %v: %v", map[bool]string{false: "without a foreground", true: "with --untold-held"}[c.untoldOn], own)
			case c.present && !c.untoldOn:
				// that socket only: an interface's stamp (or key 0's)
				// would hold other users' background (audit N20;
				// TestThrottledPeerHoldsOnlyItsOwnSocket)
				for _, k := range []uint32{uint32(idx), 0} {
					var hm yield.Harm
					if h.cls.LanesFgHarm.Lookup(k, &hm) == nil && hm.At != 0 {
						t.Errorf("interface key %d stamped harmed %+v by a socket's own delay", k, hm)
					}
				}
			}
			if c.untoldOn {
				if took, cw := waitCwnd(t, conn, 5*time.Second, func(cw uint32) bool { present(); return cw <= 2 }); cw > 2 {
					t.Errorf("--untold-held beside an untold foreground: cwnd %d after %v, want 2", cw, took)
				}
			}
		})
	}
}

// ownHold is c's own-delay hold per direction (sock_ops' socket storage,
// looked up by the socket's descriptor): 0 where it never held.
func ownHold(t *testing.T, h *Host, c *net.TCPConn) [2]uint64 {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st sockops.SockopsSkState
	var lerr error
	if err := raw.Control(func(fd uintptr) { lerr = h.ops.LanesSkState.Lookup(int32(fd), &st) }); err != nil {
		t.Fatal(err)
	}
	if lerr != nil {
		return [2]uint64{}
	}
	return st.OwnUntil
}

// MarkOwnHarm (the QUIC/UDP class's controller's queue) stamps harm only
// beside an untold foreground, above yield.HarmQueue, and not with
// UntoldHeld.
func TestMarkOwnHarm(t *testing.T) {
	requireCgroup2(t)
	for _, held := range []bool{false, true} {
		ns := testutil.NewNetNS(t)
		var h *Host
		ns.Do(t, func() (err error) {
			h, err = OpenHost(HostConfig{Instance: "ownharm", Yield: true, Experiments: experiments.Set{UntoldHeld: held}})
			return err
		})
		t.Cleanup(func() { h.Close() })
		const idx = 7
		harm := func() yield.Harm {
			var hm yield.Harm
			_ = h.cls.LanesFgHarm.Lookup(uint32(idx), &hm)
			return hm
		}
		h.Background.MarkOwnHarm(idx, 20*time.Millisecond)
		if harm().At != 0 {
			t.Fatalf("held %v: harm stamped with no foreground present", held)
		}
		now := monoNow(t)
		if err := h.cls.LanesFgActive.Put(uint32(idx), yield.Window{Start: now, Active: now, Since: now, Episodes: 1}); err != nil {
			t.Fatal(err)
		}
		h.Background.MarkOwnHarm(idx, 5*time.Millisecond)
		if harm().At != 0 {
			t.Fatalf("held %v: harm stamped at 5 ms of queue", held)
		}
		h.Background.MarkOwnHarm(idx, 20*time.Millisecond)
		if hm := harm(); (hm.At != 0) == held || !held && (hm.Kind != yield.HarmOwn || hm.QueueUS != 20000) {
			t.Fatalf("held %v: beside an untold foreground at 20 ms: %+v", held, hm)
		}
		if err := h.cls.LanesFgHarm.Put(uint32(idx), yield.Harm{Seen: monoNow(t)}); err != nil {
			t.Fatal(err)
		}
		h.Background.MarkOwnHarm(idx, 20*time.Millisecond)
		if hm := harm(); hm.At != 0 {
			t.Fatalf("held %v: harm stamped beside a foreground a TCP sample speaks for: %+v", held, hm)
		}
	}
}
