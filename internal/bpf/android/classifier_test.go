// classifier_test.go: the Android-form classifier (objects/classifier.c),
// loaded as NetBpfLoad loads it and pinned where it pins it (under a bpffs
// of the test's own), opened by path as a daemon on Android would open it,
// attached as the cls_bpf filter of an HTB tree on a veth in test
// namespaces, its maps filled with the daemon's keys (abi.NewFlowKey,
// abi.NewDstKey): each flow's packets land in its lane's HTB class.
package android

import (
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// pinnedClassifier is objects/classifier.o pinned the loader's way
// (pinnedObject).
func pinnedClassifier(t *testing.T) *Objects { return pinnedObject(t, "objects/classifier.o") }

// pinnedObject loads the object at path the loader's way, pins it under a
// bpffs mounted for the test and returns the objects opened from their
// pinned paths (the pins and the mount go at the test's end).
func pinnedObject(t *testing.T, path string) *Objects {
	t.Helper()
	testutil.RequireRoot(t)
	r, err := Check(path, Locations[0])
	if err != nil {
		t.Fatal(err)
	}
	o, err := Load(path, Locations[0])
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil {
		o.Close()
		t.Fatalf("bpffs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	err = r.Pin(o, root)
	o.Close() // the pins hold them now
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := OpenPinned(r, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pinned.Close)
	return pinned
}

// htbTree installs lanes' tree on link (qdisc.go's shape, rates far above
// the test's traffic): root 1: default 1:12, a leaf 1:1x per lane, and the
// program as the root's direct-action filter with classid 1:0.
func htbTree(link string, prog *ebpf.Program) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	idx := l.Attrs().Index
	root := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	root.Defcls = uint32(lane.ClassMinor + lane.Interactive)
	if err := netlink.QdiscAdd(root); err != nil {
		return err
	}
	const rate = 1 << 30 // bytes/s
	classes := []uint32{netlink.MakeHandle(1, 1)}
	for _, l := range []lane.Lane{lane.Realtime, lane.Interactive, lane.Background} {
		classes = append(classes, l.ClassID())
	}
	for i, h := range classes {
		parent := netlink.MakeHandle(1, 1)
		if i == 0 {
			parent = netlink.MakeHandle(1, 0)
		}
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Handle: h, Parent: parent},
			netlink.HtbClassAttrs{Rate: rate * 8, Ceil: rate * 8, Buffer: 1 << 20, Cbuffer: 1 << 20})
		if err := netlink.ClassAdd(c); err != nil {
			return err
		}
	}
	return netlink.FilterAdd(&netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(1, 0),
			Handle: 1, Priority: 1, Protocol: unix.ETH_P_ALL},
		Fd: prog.FD(), Name: "lanes-android-test", DirectAction: true, ClassId: netlink.MakeHandle(1, 0),
	})
}

// classPackets reads the packets each HTB class of link sent.
func classPackets(link string) (map[uint32]uint64, error) {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return nil, err
	}
	cs, err := netlink.ClassList(l, netlink.MakeHandle(1, 0))
	if err != nil {
		return nil, err
	}
	out := map[uint32]uint64{}
	for _, c := range cs {
		if s := c.Attrs().Statistics; s != nil && s.Basic != nil {
			out[c.Attrs().Handle] = uint64(s.Basic.Packets)
		}
	}
	return out, nil
}

// flowCase is one test flow: its UDP port at B, the lane the maps give it,
// how the classifier finds it, and the daemon's write that gives it (with
// the flow's socket cookie and source port).
type flowCase struct {
	port    uint16
	lane    lane.Lane
	kind    uint32 // enum match_kind
	packets int
	rule    func(cookie uint64, sport uint16) error
}

func TestAndroidFormClassifierHTB(t *testing.T) {
	o := pinnedClassifier(t)
	prog := o.Programs["schedcls/lanes_classify"]
	if prog == nil {
		t.Fatalf("no program lanes_classify among %v", o.Programs)
	}
	p := testutil.NewVethPair(t)
	p.A.Do(t, func() error { return htbTree(p.LinkA, prog) })
	dst, _ := netip.AddrFromSlice(p.AddrB)
	dst = dst.Unmap()
	// the daemon's writes (datapath host.go): a socket's lane by cookie (as
	// sock_ops does at connect), a 5-tuple with its shape bit, a
	// destination prefix with a port, a DSCP
	none := func(uint64, uint16) error { return nil }
	flows := []flowCase{
		{5001, lane.Realtime, uint32(abi.AbiMatchKindMATCH_COOKIE), 20, func(cookie uint64, _ uint16) error {
			return o.Maps["lanes_cookie"].Put(cookie, uint32(lane.Realtime))
		}},
		{5002, lane.Background, uint32(abi.AbiMatchKindMATCH_TUPLE), 30, func(_ uint64, sport uint16) error {
			k := abi.NewFlowKey(netip.Addr{}, dst, 5002, sport, unix.IPPROTO_UDP)
			if err := o.Maps["lanes_tuple_shapes"].Put(uint32(0), uint32(1<<1)); err != nil { // proto, any local address
				return err
			}
			return o.Maps["lanes_tuple"].Put(k, uint32(lane.Background))
		}},
		{5003, lane.Realtime, uint32(abi.AbiMatchKindMATCH_DST), 40, func(uint64, uint16) error {
			return o.Maps["lanes_dst"].Put(abi.NewDstKey(netip.PrefixFrom(dst, 32), 5003), uint32(lane.Realtime))
		}},
		{5004, lane.Background, uint32(abi.AbiMatchKindMATCH_DSCP), 60, func(uint64, uint16) error {
			return o.Maps["lanes_dscp"].Put(uint32(46), uint32(lane.Background))
		}},
		{5005, lane.Interactive, uint32(abi.AbiMatchKindMATCH_DEFAULT), 50, none},
	}
	p.A.Do(t, func() error { return sendFlows(dst, flows) })
	checkFlows(t, o, p, flows)
}

// sendFlows sends each flow's datagrams from its own socket in the
// calling namespace, after its rule; the DSCP flow's socket sends with
// DSCP 46 (EF).
func sendFlows(dst netip.Addr, flows []flowCase) error {
	for _, f := range flows {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{})
		if err != nil {
			return err
		}
		defer c.Close()
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var cookie uint64
		var serr error
		raw.Control(func(fd uintptr) {
			cookie, serr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
			if serr == nil && f.kind == uint32(abi.AbiMatchKindMATCH_DSCP) {
				serr = syscall.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, 46<<2)
			}
		})
		if serr != nil {
			return serr
		}
		if err := f.rule(cookie, uint16(c.LocalAddr().(*net.UDPAddr).Port)); err != nil {
			return err
		}
		to := &net.UDPAddr{IP: dst.AsSlice(), Port: int(f.port)}
		for range f.packets {
			if _, err := c.WriteToUDP([]byte("lanes android form"), to); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkFlows compares the classifier's counters per (kind, lane) with each
// flow's datagrams and the HTB classes' packets with the lanes' sums
// (interactive: at least its flow's, the kernel's own packets go there too).
func checkFlows(t *testing.T, o *Objects, p *testutil.Pair, flows []flowCase) {
	t.Helper()
	want := map[uint32]uint64{}
	for _, f := range flows {
		idx := f.kind*uint32(abi.LaneSlots) + uint32(f.lane)
		var per []abi.Counter
		if err := o.Maps["lanes_cls_stats"].Lookup(idx, &per); err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range per {
			n += c.Packets
		}
		t.Logf("port %d: %d packets matched as kind %d, lane %s (sent %d)", f.port, n, f.kind, f.lane, f.packets)
		if f.kind == uint32(abi.AbiMatchKindMATCH_DEFAULT) && n < uint64(f.packets) ||
			f.kind != uint32(abi.AbiMatchKindMATCH_DEFAULT) && n != uint64(f.packets) {
			t.Errorf("port %d: %d packets matched as kind %d lane %s, sent %d", f.port, n, f.kind, f.lane, f.packets)
		}
		want[f.lane.ClassID()] += uint64(f.packets)
	}
	var got map[uint32]uint64
	p.A.Do(t, func() (err error) { got, err = classPackets(p.LinkA); return })
	for class, n := range want {
		t.Logf("HTB class %x:%x: %d packets, the flows sent %d", class>>16, class&0xffff, got[class], n)
		interactive := class == lane.Interactive.ClassID()
		if interactive && got[class] < n || !interactive && got[class] != n {
			t.Errorf("HTB class %x:%x sent %d packets, want %d", class>>16, class&0xffff, got[class], n)
		}
	}
}

// TestAndroidFormClassifierMaps: the Android form's maps are lanes' own,
// map by map (type, key and value sizes, entries, flags), so a daemon
// fills the pinned maps as it fills those it loads; a map changed in one
// form only fails here.
func TestAndroidFormClassifierMaps(t *testing.T) {
	lanes, err := ebpf.LoadCollectionSpec("../classifier/classifier_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	specs, err := MapSpecs("objects/classifier.o")
	if err != nil {
		t.Fatal(err)
	}
	android := map[string]*ebpf.MapSpec{}
	for _, s := range specs {
		android[s.Name] = s
	}
	n := 0
	for name, want := range lanes.Maps {
		if strings.HasPrefix(name, ".") { // .rodata: CFG, folded in the Android form
			continue
		}
		n++
		got, ok := android[name]
		if !ok {
			t.Errorf("map %s: not in the Android form", name)
			continue
		}
		if got.Type != want.Type || got.KeySize != want.KeySize || got.ValueSize != want.ValueSize ||
			got.MaxEntries != want.MaxEntries || got.Flags != want.Flags {
			t.Errorf("map %s: Android form %v %d/%d x%d flags %#x, lanes' %v %d/%d x%d flags %#x", name,
				got.Type, got.KeySize, got.ValueSize, got.MaxEntries, got.Flags,
				want.Type, want.KeySize, want.ValueSize, want.MaxEntries, want.Flags)
		}
	}
	if n != len(android) {
		t.Errorf("lanes' classifier has %d maps, its Android form %d", n, len(android))
	}
	t.Logf("%d maps alike in both forms", n)
}
