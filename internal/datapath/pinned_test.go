// pinned_test.go: the OEM path. The Android form of lanes' classifier
// loaded and pinned as NetBpfLoad does at boot (android.LoadAndPin, under a
// bpffs of the test's own), and a datapath that runs on those pins: its
// egress filter is the pinned program, its rules land in the pinned maps,
// and a registered flow's packets land in their lane's class.
package datapath

import (
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/android"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// bootPinned pins the Android-form classifier (and the other objects
// named) under a bpffs mounted for the test, as the loader would at the
// Tethering APEX's location.
func bootPinned(t *testing.T, more ...string) *Pinned {
	t.Helper()
	root := t.TempDir()
	if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil {
		t.Fatalf("bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	loc := android.Locations[0]
	for _, obj := range append([]string{"classifier"}, more...) {
		if _, err := android.LoadAndPin("../bpf/android/objects/"+obj+".o", loc, root); err != nil {
			t.Fatal(err)
		}
	}
	return &Pinned{Root: root, Prefix: loc.Prefix}
}

func TestPinnedClassifier(t *testing.T) {
	requireCgroup2(t)
	pinned := bootPinned(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "pin1", Pinned: pinned})

	// the filter runs the loader's program, not one lanes loaded
	pinnedProg, err := ebpf.LoadPinnedProgram(android.Under(pinned.Root,
		android.ProgPin(pinned.Prefix, "classifier", "schedcls/lanes_classify")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pinnedProg.Close()
	if got, want := progID(t, d.cls.LanesClassify), progID(t, pinnedProg); got != want {
		t.Fatalf("classifier program %d, the pinned one is %d", got, want)
	}

	// a registered UDP 3-tuple, written by the datapath into the pinned map
	dst := netipAddr(p.AddrB)
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: dst, DPort: 9302, SPort: 40324, Proto: unix.IPPROTO_UDP}, lane.Realtime); err != nil {
		t.Fatal(err)
	}
	tuples, err := ebpf.LoadPinnedMap(android.Under(pinned.Root, android.MapPin(pinned.Prefix, "classifier", "lanes_tuple", true)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tuples.Close()
	var l uint32
	if err := tuples.Lookup(abi.NewFlowKey(netipAddr(nil), dst, 9302, 40324, unix.IPPROTO_UDP), &l); err != nil || l != uint32(lane.Realtime) {
		t.Errorf("the pinned lanes_tuple holds lane %d (%v), want %d", l, err, lane.Realtime)
	}
	// TCP registered as background: sock_ops (lanes' own, on the pinned
	// maps) resolves it by tuple and the classifier finds it by cookie
	addr := tcpEcho(t, p.B, p.AddrB, 9301)
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: dst, DPort: 9301, SPort: 40323}, lane.Background); err != nil {
		t.Fatal(err)
	}
	echoFrom(t, p, addr, 40323)
	sendRealtimeUDP(t, p, 40324, 9302, 9303)
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("classifier %v, sock_ops %v, realtime %+v, background %+v", st.Classifier, st.Sockops,
		st.Lanes[lane.Realtime], st.Lanes[lane.Background])
	if st.Classifier["tuple"] != 10 {
		t.Errorf("tuple matches %d, want the 10 UDP datagrams", st.Classifier["tuple"])
	}
	if rt := st.Lanes[lane.Realtime]; rt.Packets != 17 || rt.Classified != 10 {
		t.Errorf("realtime class %d packets (%d classified), want 17 (10)", rt.Packets, rt.Classified)
	}
	if st.Sockops["by_tuple"] != 1 || st.Classifier["cookie"] == 0 || st.Lanes[lane.Background].Packets == 0 {
		t.Errorf("registered TCP flow: sock_ops %v, classifier %v, background %+v", st.Sockops, st.Classifier, st.Lanes[lane.Background])
	}
}

// TestPinnedClassifierWithoutSockops: on the pins and without sock_ops (as
// on Android, where the daemon may not load programs), the host comes up,
// loads nothing, and a uid rule classifies per packet.
func TestPinnedClassifierWithoutSockops(t *testing.T) {
	requireCgroup2(t)
	pinned := bootPinned(t)
	p := testutil.NewVethPair(t)
	addr := tcpEcho(t, p.B, p.AddrB, 9311)
	var h *Host
	var e *Egress
	p.A.Do(t, func() (err error) {
		h, err = OpenHost(HostConfig{StateDir: testStateDir, Instance: "pin2", Pinned: pinned,
			Off: map[Capability]string{CapSockops: "no prog_load (test)", CapExecLane: "no prog_load (test)"}})
		if err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		e, err = OpenEgress(h, EgressConfig{Interface: p.LinkA})
		if err == nil {
			t.Cleanup(func() { e.Close() })
		}
		return err
	})
	if h.ops != nil || h.cc != nil || h.bg != nil || h.exec != nil {
		t.Errorf("BPF loaded on the pins without sock_ops: ops %v, cap cc %v, background cc %v, exec %v", h.ops != nil, h.cc != nil, h.bg != nil, h.exec != nil)
	}
	if err := h.Lanes.SetUIDLane(0, lane.Background); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := roundTrip(p.A, addr); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := h.Stats()
	if err != nil || hs.Classified["uid"][lane.Background] == 0 {
		t.Errorf("no packet in background by uid on the pins: %+v %v", hs, err)
	}
}

// TestPinnedSockops: with the Android form's sock_ops pinned too, the host
// attaches it, writes its configuration and reports its counters instead
// of loading its own: a
// bulk upload from the background lane's cgroup gets its lane at connect
// (by cgroup, into the pinned lanes_cookie), TCP_NOTSENT_LOWAT and the cwnd
// clamp, and its packets the background class by cookie.
func TestPinnedSockops(t *testing.T) {
	requireCgroup2(t)
	pinned := bootPinned(t, "sockops")
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "pin3", Pinned: pinned})
	if d.ops != nil || d.opsLink == nil || d.ownerLink == nil {
		t.Fatalf("sock_ops: own objects %v, link %v, socket-creation link %v; want the pinned programs attached",
			d.ops != nil, d.opsLink != nil, d.ownerLink != nil)
	}
	caps := d.Capabilities()
	t.Logf("capabilities: %v", caps)
	if caps[CapSockops] != "on" {
		t.Errorf("sock_ops: %q, want on", caps[CapSockops])
	}
	_, addr := startSink(t, p.B, p.AddrB, 9321)
	bgDir, _, err := d.LaneCgroup(lane.Background)
	if err != nil {
		t.Fatal(err)
	}
	cmd := startBulk(t, p.A, addr, bgDir, 2)
	cmd.Wait()
	stats, err := ebpf.LoadPinnedMap(android.Under(pinned.Root, android.MapPin(pinned.Prefix, "sockops", "lanes_ops_stats", false)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close()
	count := func(c abi.AbiOpsCounter) uint64 {
		var per []uint64
		if err := stats.Lookup(uint32(c), &per); err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	byCgroup, lowat, clamp := count(abi.AbiOpsCounterOPS_BY_CGROUP), count(abi.AbiOpsCounterOPS_NOTSENT_LOWAT), count(abi.AbiOpsCounterOPS_BG_CLAMP)
	t.Logf("pinned sock_ops: by cgroup %d, TCP_NOTSENT_LOWAT %d, clamps %d; classifier %v; background %+v",
		byCgroup, lowat, clamp, st.Classifier, st.Lanes[lane.Background])
	if byCgroup == 0 || lowat == 0 || clamp == 0 {
		t.Errorf("the upload from the background cgroup: by cgroup %d, TCP_NOTSENT_LOWAT %d, clamps %d; want each > 0", byCgroup, lowat, clamp)
	}
	if st.Sockops["by_cgroup"] != byCgroup || st.Sockops["notsent_lowat"] != lowat || st.Sockops["bg_clamp"] != clamp {
		t.Errorf("the host's sock_ops counters %v, the pinned map's by cgroup %d, TCP_NOTSENT_LOWAT %d, clamps %d", st.Sockops, byCgroup, lowat, clamp)
	}
	if st.Classifier["cookie"] == 0 || st.Lanes[lane.Background].Packets == 0 {
		t.Errorf("background by cookie: classifier %v, background class %+v", st.Classifier, st.Lanes[lane.Background])
	}
}
