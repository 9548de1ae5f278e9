// bgclass_test.go: the background non-TCP class (bgclass.h) through
// BPF_PROG_TEST_RUN, whose packets arrive on loopback (ifindex 1): the
// egress policer drops over its rate and records the flow, the ingress
// program polices the recorded flow's arrivals only, the yield's rate
// holds the class while the interface's foreground is stamped active, and
// the first packet of an episode posts one event; a bucket emptied at a
// decrease passes only what its rate refills.
package classifier

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/yield"
)

const (
	tcOK   = 0
	tcShot = 2
	loIdx  = 1 // BPF_PROG_TEST_RUN's device
)

// bgClassKey is lanes_bg_ctl's and lanes_bg_state's key of loopback in
// a direction.
func bgClassKey(dir uint32) uint32 { return loIdx*2 + dir }

// putBgCtl writes the class's control value, as the daemon does.
func putBgCtl(t *testing.T, objs *ClassifierObjects, dir uint32, ctl ClassifierBgCtl) {
	t.Helper()
	if err := objs.LanesBgCtl.Put(bgClassKey(dir), ctl); err != nil {
		t.Fatal(err)
	}
}

// bgState reads the class's state, which the classifier alone writes.
func bgState(t *testing.T, objs *ClassifierObjects, dir uint32) ClassifierBgState {
	t.Helper()
	var c ClassifierBgState
	if err := objs.LanesBgState.Lookup(bgClassKey(dir), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// within checks that a bucket of bgBurstMin at rate (bytes/s) let through
// what it may in elapsed: all of its depth, plus at most what it refilled.
func within(t *testing.T, what string, got, size int, rate float64, elapsed time.Duration) {
	t.Helper()
	lo, hi := bgBurstMin/size-1, int((bgBurstMin+rate*elapsed.Seconds())/float64(size))+2
	if got < lo || got > hi {
		t.Errorf("%s: %d passed in %v, want %d..%d", what, got, elapsed, lo, hi)
	}
}

// passedHeld is passed in batches of 100, calling hold before each: the
// foreground's stamp (a harmed RTT sample, an opening) is renewed as the
// live path renews it, so a slow run (2000 test runs under aarch64 TCG
// outlast FG_HARM_HOLD_NS, 100 ms) measures the yield's rate, not the
// stamp's expiry.
func passedHeld(t *testing.T, prog *ebpf.Program, data []byte, n int, hold func()) int {
	t.Helper()
	ok := 0
	for done := 0; done < n; done += 100 {
		hold()
		ok += passed(t, prog, data, min(100, n-done))
	}
	return ok
}

// bgBurstMin is BG_BURST_MIN, the bucket's depth at small rates.
const bgBurstMin = 24224

// passed runs n copies of data through prog and counts those let through.
func passed(t *testing.T, prog *ebpf.Program, data []byte, n int) int {
	t.Helper()
	ok := 0
	for range n {
		ret, err := prog.Run(&ebpf.RunOptions{Data: data})
		if err != nil {
			t.Fatal(err)
		}
		switch ret {
		case tcOK:
			ok++
		case tcShot:
		default:
			t.Fatalf("return %d", ret)
		}
	}
	return ok
}

func TestBackgroundClassPolices(t *testing.T) {
	objs := loadForTest(t)
	peer := netip.MustParseAddr("10.9.8.8")
	up := pkt{src: v4src, dst: peer, sport: 40000, dport: 443, proto: 17}
	if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(peer, 32), 0), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	rd, err := ringbuf.NewReader(objs.LanesBgEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	// Without a class entry nothing is policed.
	if got := passed(t, objs.LanesClassify, up.build(), 50); got != 50 {
		t.Fatalf("no class: %d of 50 passed", got)
	}
	// A rate of 100 KB/s: the bucket (BG_BURST_MIN, ~24 KB) lets the first
	// ~336 of these 72-byte packets through, then what it refills.
	for _, d := range []uint32{0, 1} {
		putBgCtl(t, objs, d, ClassifierBgCtl{Rate: 100_000})
	}
	data := up.build()
	t0 := time.Now()
	got := passed(t, objs.LanesClassify, data, 2000)
	within(t, "egress at 100 KB/s, 2000 back-to-back packets", got, len(data), 100_000, time.Since(t0))
	if c := bgState(t, objs, 0); c.Packets != 2000 || c.Drops != uint64(2000-got) || c.Episodes != 1 {
		t.Errorf("egress class %+v, want 2000 packets, %d drops, one episode", c, 2000-got)
	}
	rd.SetDeadline(time.Now().Add(time.Second))
	rec, err := rd.Read()
	if err != nil {
		t.Fatalf("no event: %v", err)
	}
	if p := netip.AddrFrom16([16]byte(rec.RawSample[8:24])).Unmap(); p != peer || rec.RawSample[0] != loIdx {
		t.Errorf("event %x, want ifindex %d, peer %v", rec.RawSample, loIdx, peer)
	}

	// TCP of the same lane is not the class's.
	tcp := up
	tcp.proto = 6
	if got := passed(t, objs.LanesClassify, tcp.build(), 100); got != 100 {
		t.Errorf("background TCP: %d of 100 passed", got)
	}
	// Ingress: the recorded flow's replies are policed, another flow's not.
	down := pkt{src: peer, dst: v4src, sport: 443, dport: 40000, proto: 17}
	t0 = time.Now()
	in := passed(t, objs.LanesBgIngress, down.build(), 2000)
	within(t, "ingress of the recorded flow, 2000 packets", in, len(data), 100_000, time.Since(t0))
	other := down
	other.dport = 40001
	if got := passed(t, objs.LanesBgIngress, other.build(), 100); got != 100 {
		t.Errorf("ingress of a flow never sent: %d of 100 passed", got)
	}
}

// TestBackgroundClassWakesAgainWhileFlowing: the class's first packet
// posts an event, and a packet a second later posts another while the
// traffic lasts, so a controller that was not reading at the first (a
// daemon starting under load, a component restarted) still wakes.
func TestBackgroundClassWakesAgainWhileFlowing(t *testing.T) {
	objs := loadForTest(t)
	peer := netip.MustParseAddr("10.9.8.9")
	up := pkt{src: v4src, dst: peer, sport: 40002, dport: 443, proto: 17}
	if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(peer, 32), 0), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	putBgCtl(t, objs, 0, ClassifierBgCtl{})
	rd, err := ringbuf.NewReader(objs.LanesBgEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	data := up.build()
	events := 0
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		passed(t, objs.LanesClassify, data, 1)
		time.Sleep(20 * time.Millisecond) // a flow: never a quiet second
		rd.SetDeadline(time.Now())
		for {
			if _, err := rd.Read(); err != nil {
				break
			}
			events++
		}
	}
	// (a stall of a second between two packets would begin an episode)
	if c := bgState(t, objs, 0); events < 2 || uint64(events) <= c.Episodes {
		t.Errorf("1.5 s of a flow: %d events, %d episodes; want an event at its first packet and another a second on, within the episode", events, c.Episodes)
	}
}

// A class whose tokens the controller took at a decrease (datapath
// SetBgRate with empty) passes only what its rate refills from the next
// packet on, not the bucket's depth first.
func TestBackgroundClassEmptiedBucket(t *testing.T) {
	objs := loadForTest(t)
	peer := netip.MustParseAddr("10.9.8.10")
	up := pkt{src: v4src, dst: peer, sport: 40004, dport: 443, proto: 17}
	if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(peer, 32), 0), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	const rate = 100_000
	data := up.build()
	// The first packet creates the class's state with a full bucket; the
	// bump of empty_gen then empties it at the next.
	t0 := time.Now()
	putBgCtl(t, objs, 0, ClassifierBgCtl{Rate: rate})
	passed(t, objs.LanesClassify, data, 1)
	putBgCtl(t, objs, 0, ClassifierBgCtl{Rate: rate, EmptyGen: 1})
	got := passed(t, objs.LanesClassify, data, 2000)
	if hi := int(rate*time.Since(t0).Seconds()/float64(len(data))) + 2; got > hi {
		t.Errorf("emptied bucket at %d B/s: %d of 2000 passed in %v, want at most %d (refill only, the depth is %d packets)",
			rate, got, time.Since(t0), hi, bgBurstMin/len(data))
	}
}

func TestBackgroundClassYields(t *testing.T) {
	objs := loadForTest(t)
	peer := netip.MustParseAddr("10.9.8.9")
	up := pkt{src: v4src, dst: peer, sport: 40002, dport: 443, proto: 17}
	if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(peer, 32), 0), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	putBgCtl(t, objs, 0, ClassifierBgCtl{YieldRate: 25_000})
	if got := passed(t, objs.LanesClassify, up.build(), 1000); got != 1000 {
		t.Fatalf("no rate, foreground idle: %d of 1000 passed", got)
	}
	fg := pkt{src: v4src, dst: v4dst, sport: 40003, dport: 443, proto: 6} // interactive
	passed(t, objs.LanesClassify, fg.build(), 10)                         // stamps loopback present
	data := up.build()
	// present, no foreground TCP sample to tell its harm (a call): the
	// class is the controller's, its own delay tells the harm
	if got := passed(t, objs.LanesClassify, data, 1000); got != 1000 {
		t.Fatalf("no rate, foreground present without TCP samples: %d of 1000 passed, want all", got)
	}
	// present, its TCP sockets not harmed: the class is the controller's
	if err := objs.LanesFgHarm.Put(uint32(loIdx), yield.Harm{Seen: monotonicNS()}); err != nil {
		t.Fatal(err)
	}
	if got := passed(t, objs.LanesClassify, data, 1000); got != 1000 {
		t.Fatalf("no rate, foreground present, not harmed: %d of 1000 passed", got)
	}
	// a foreground TCP socket reads harm (sock_ops writes lanes_fg_harm at
	// each of its RTT samples)
	harm := yield.Harm{Since: monotonicNS(), QueueUS: 20000}
	sample := func() { // the upload's harm (the class's packets leave)
		harm.Samples++
		harm.At, harm.Seen = monotonicNS(), monotonicNS()
		harm.DirUntil[0] = harm.At + uint64(time.Second)
		if err := objs.LanesFgHarm.Put(uint32(loIdx), harm); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	got := passedHeld(t, objs.LanesClassify, data, 2000, sample)
	within(t, "foreground harmed, 2000 packets at the yield's rate", got, len(data), 25_000, time.Since(t0))
	if c := bgState(t, objs, 0); c.HeldDrops == 0 || c.HeldDrops != c.Drops {
		t.Errorf("class %+v, want every drop counted as the yield's", c)
	}
}

// A foreground TCP connection's opening (lanes_fg_open, written by sock_ops)
// holds the class for FG_OPEN_HOLD_NS, on its interface or, written as not
// known (key 0), on every interface, before the classifier has counted any
// of its packets: egress passes nothing, ingress the yield's rate.
func TestBackgroundClassYieldsAtForegroundOpen(t *testing.T) {
	for _, key := range []uint32{loIdx, 0} {
		objs := loadForTest(t)
		peer := netip.MustParseAddr("10.9.8.10")
		up := pkt{src: v4src, dst: peer, sport: 40004, dport: 443, proto: 17}
		down := pkt{src: peer, dst: v4src, sport: 443, dport: 40004, proto: 17}
		if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(peer, 32), 0), uint32(lane.Background)); err != nil {
			t.Fatal(err)
		}
		for _, d := range []uint32{0, 1} {
			putBgCtl(t, objs, d, ClassifierBgCtl{YieldRate: 25_000})
		}
		data := up.build()
		// An opening whose hold ended holds nothing.
		if err := objs.LanesFgOpen.Put(key, monotonicNS()-uint64(100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if got := passed(t, objs.LanesClassify, data, 1000); got != 1000 {
			t.Fatalf("key %d: an opening whose hold ended 100 ms ago: %d of 1000 passed", key, got)
		}
		// (renewed per batch: an opening holds FG_OPEN_HOLD_NS, 500 ms,
		// which 2000 test runs under aarch64 TCG outlast)
		open := func() {
			if err := objs.LanesFgOpen.Put(key, monotonicNS()+uint64(500*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		open()
		if got := passed(t, objs.LanesClassify, data, 100); got != 0 {
			t.Errorf("key %d: a foreground connection just opened: %d of 100 passed egress, want none", key, got)
		}
		t0 := time.Now()
		in := passedHeld(t, objs.LanesBgIngress, down.build(), 2000, open)
		within(t, "a foreground connection just opened, ingress at the yield's rate", in, len(data), 25_000, time.Since(t0))
		for _, d := range []uint32{0, 1} {
			if c := bgState(t, objs, d); c.HeldDrops == 0 || c.HeldDrops != c.Drops {
				t.Errorf("key %d: class %d %+v, want every drop counted as the yield's", key, d, c)
			}
		}
	}
}

// monotonicNS is bpf_ktime_get_ns's clock now.
func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// Arrivals beside a present foreground whose TCP sockets are not harmed
// are the controller's, as the egress is; with CLS_F_HOLD_ARRIVALS (the
// lab switch) they are held at the yield's rate there.
func TestBackgroundClassArrivalsBesideForeground(t *testing.T) {
	for _, hold := range []bool{false, true} {
		objs := loadForTest(t)
		if hold {
			var err error
			if objs, err = Load(Config{HoldArrivals: true}); err != nil {
				t.Fatalf("load: %v", err)
			}
			t.Cleanup(func() { objs.Close() })
		}
		_, down := classFlow(t, objs, "10.9.8.11", 40005)
		fg := pkt{src: v4src, dst: v4dst, sport: 40006, dport: 443, proto: 6}
		passed(t, objs.LanesClassify, fg.build(), 10) // stamps loopback present
		if err := objs.LanesFgHarm.Put(uint32(loIdx), yield.Harm{Seen: monotonicNS()}); err != nil {
			t.Fatal(err)
		}
		got := passed(t, objs.LanesBgIngress, down.build(), 1000)
		switch {
		case !hold && got != 1000:
			t.Errorf("no rate, foreground present, not harmed: %d of 1000 arrivals passed", got)
		case hold && got == 1000:
			t.Errorf("CLS_F_HOLD_ARRIVALS, foreground present, not harmed: %d of 1000 arrivals passed, want held", got)
		}
	}
}

// Directions apart: the upload's harm holds the class's upload and not its
// arrivals, the download's the reverse, as the background sockets are
// held (fg_yield_dir); with CLS_F_DIRS_JOINED (the lab switch) either
// holds both.
func TestBackgroundClassDirectionsApart(t *testing.T) {
	for _, joined := range []bool{false, true} {
		for harmed := range 2 { // 0: the upload's queue, 1: the download's
			objs, err := Load(Config{DirectionsJoined: joined})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			t.Cleanup(func() { objs.Close() })
			up, down := classFlow(t, objs, "10.9.8.12", 40007)
			harm := func() { // renewed as a harmed socket's samples renew it
				now := monotonicNS()
				h := yield.Harm{At: now, Since: now, Samples: 1, QueueUS: 20000, Seen: now}
				h.DirUntil[harmed] = now + uint64(5*time.Second)
				if err := objs.LanesFgHarm.Put(uint32(loIdx), h); err != nil {
					t.Fatal(err)
				}
			}
			gotUp := passedHeld(t, objs.LanesClassify, up.build(), 1000, harm)
			gotDown := passedHeld(t, objs.LanesBgIngress, down.build(), 1000, harm)
			wantUpHeld, wantDownHeld := joined || harmed == 0, joined || harmed == 1
			t.Logf("joined %v, %s harmed: %d of 1000 up, %d of 1000 down passed", joined, []string{"up", "down"}[harmed], gotUp, gotDown)
			if (gotUp < 1000) != wantUpHeld || (gotDown < 1000) != wantDownHeld {
				t.Errorf("joined %v, %s harmed: up held %v, down held %v; want %v, %v",
					joined, []string{"up", "down"}[harmed], gotUp < 1000, gotDown < 1000, wantUpHeld, wantDownHeld)
			}
		}
	}
}

// A direction marked as carrying the acknowledgments of the class's data
// in the other (bg_ctl.acks: a QUIC download's ACK frames) is not held for
// its own direction's harm: the upload's queue holds a download's data no
// more than its ACKs, as a background TCP download's ACKs. A foreground's
// opening still stops the egress (quic-go's download stops with its ACKs).
func TestBackgroundClassAcksNotHeld(t *testing.T) {
	for _, acks := range []bool{false, true} {
		objs, err := Load(Config{})
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		t.Cleanup(func() { objs.Close() })
		up, _ := classFlow(t, objs, "10.9.8.13", 40008)
		if acks {
			putBgCtl(t, objs, 0, ClassifierBgCtl{YieldRate: 25_000, Acks: 1})
		}
		now := monotonicNS()
		h := yield.Harm{At: now, Since: now, Samples: 1, QueueUS: 20000, Seen: now}
		h.DirUntil[0] = now + uint64(5*time.Second) // the upload's queue
		if err := objs.LanesFgHarm.Put(uint32(loIdx), h); err != nil {
			t.Fatal(err)
		}
		got := passed(t, objs.LanesClassify, up.build(), 1000)
		t.Logf("acks %v, the upload harmed: %d of 1000 passed", acks, got)
		if (got == 1000) != acks {
			t.Errorf("acks %v: %d of 1000 passed; want all only where they are acknowledgments", acks, got)
		}
		// a foreground's opening stops the egress, acknowledgments too
		if err := objs.LanesFgOpen.Put(uint32(loIdx), monotonicNS()+uint64(500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if got := passed(t, objs.LanesClassify, up.build(), 100); got != 0 {
			t.Errorf("acks %v: a foreground connection just opened: %d of 100 passed egress, want none", acks, got)
		}
	}
}

// classFlow makes a UDP flow from port sport to peer:443 the class's, both
// directions at the yield's 25 KB/s, and records it leaving once: its
// packets each way.
func classFlow(t *testing.T, objs *ClassifierObjects, peer string, sport uint16) (up, down pkt) {
	t.Helper()
	a := netip.MustParseAddr(peer)
	up = pkt{src: v4src, dst: a, sport: sport, dport: 443, proto: 17}
	down = pkt{src: a, dst: v4src, sport: 443, dport: sport, proto: 17}
	if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(a, 32), 0), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []uint32{0, 1} {
		putBgCtl(t, objs, d, ClassifierBgCtl{YieldRate: 25_000})
	}
	passed(t, objs.LanesClassify, up.build(), 1)
	return up, down
}
