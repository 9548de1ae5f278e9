// classifier_test.go runs the classifier through BPF_PROG_TEST_RUN with a
// table of packets (IPv4, IPv6, registered 5-tuples and their wildcards, DSCP, the test_run
// dummy socket's cgroup and uid, short and malformed packets) and checks the
// lane and match kind through the program's counters. The socket-cookie path
// needs a real socket and is covered by the datapath integration test.
package classifier

import (
	"encoding/binary"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// pkt describes a test packet.
type pkt struct {
	src, dst     netip.Addr
	sport, dport uint16
	proto        uint8
	dscp         uint8
	fragOff      uint16 // IPv4 fragment offset in 8-byte units
}

// build returns Ethernet + IP + 8 bytes of transport header + payload.
func (p pkt) build() []byte {
	eth := make([]byte, 14)
	copy(eth[0:6], []byte{2, 0, 0, 0, 0, 2})
	copy(eth[6:12], []byte{2, 0, 0, 0, 0, 1})
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[0:], p.sport)
	binary.BigEndian.PutUint16(l4[2:], p.dport)
	payload := append(l4, []byte("lanes test payload")...)
	if p.dst.Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		ip[1] = p.dscp << 2
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(payload)))
		binary.BigEndian.PutUint16(ip[6:], p.fragOff&0x1fff)
		ip[8] = 64
		ip[9] = p.proto
		s, d := p.src.As4(), p.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		return append(append(eth, ip...), payload...)
	}
	binary.BigEndian.PutUint16(eth[12:], 0x86dd)
	ip := make([]byte, 40)
	tc := p.dscp << 2
	ip[0] = 0x60 | tc>>4
	ip[1] = tc << 4
	binary.BigEndian.PutUint16(ip[4:], uint16(len(payload)))
	ip[6] = p.proto
	ip[7] = 64
	s, d := p.src.As16(), p.dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	return append(append(eth, ip...), payload...)
}

var (
	v4src = netip.MustParseAddr("10.9.0.1")
	v4dst = netip.MustParseAddr("10.9.0.2")
	v6src = netip.MustParseAddr("fd00:9::1")
	v6dst = netip.MustParseAddr("fd00:9::2")
	// another local address of the same host
	v4other = netip.MustParseAddr("10.9.0.3")
	v6other = netip.MustParseAddr("fd00:9::3")
	anySrc  netip.Addr // a flow key's wildcard local address
)

func loadForTest(t testing.TB) *ClassifierObjects {
	t.Helper()
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatalf("memlock: %v", err)
	}
	objs, err := Load(Config{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { objs.Close() })
	return objs
}

// selfCgroupID is the cgroup v2 id of this process: the test_run dummy
// socket is charged to it (sk_alloc -> cgroup_sk_alloc).
func selfCgroupID(t *testing.T) (uint64, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
				var st syscall.Stat_t
				if syscall.Stat(root+rest, &st) == nil {
					var fs syscall.Statfs_t
					if syscall.Statfs(root, &fs) == nil && fs.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
						return st.Ino, true
					}
				}
			}
		}
	}
	return 0, false
}

func TestClassifier(t *testing.T) {
	objs := loadForTest(t)
	put := fillClassifierMaps(t, objs)
	for _, tc := range classifierCases(t, objs.ClassifierMaps, put) {
		t.Run(tc.name, func(t *testing.T) { runClassifierCase(t, objs, tc) })
	}
}

// classifierCase is one packet run through the classifier, and the
// counter it must land in.
type classifierCase struct {
	name  string
	data  []byte
	setup func() // changes maps before the run, undone by itself if needed
	lane  lane.Lane
	kind  Kind
}

// fillClassifierMaps installs the flows, DSCP and destination rules the
// cases expect, and returns a map writer for the cases' own setups.
func fillClassifierMaps(t *testing.T, objs *ClassifierObjects) func(mp *ebpf.Map, k any, l lane.Lane) {
	m := objs.ClassifierMaps
	put := func(mp *ebpf.Map, k any, l lane.Lane) {
		t.Helper()
		if err := mp.Put(k, uint32(l)); err != nil {
			t.Fatalf("put %v: %v", k, err)
		}
	}
	flow := func(k abi.FlowKey, l lane.Lane) {
		t.Helper()
		if err := objs.PutFlow(k, l); err != nil {
			t.Fatalf("put %v: %v", k, err)
		}
	}
	flow(FlowKey(anySrc, v4dst, 443, 5000, 6), lane.Background)
	flow(FlowKey(anySrc, v4dst, 4000, 4001, 0), lane.Realtime) // any protocol
	flow(FlowKey(anySrc, v6dst, 443, 5000, 6), lane.Background)
	flow(FlowKey(anySrc, v6dst, 53, 6000, 17), lane.Realtime)
	flow(FlowKey(anySrc, v4dst, 80, 7000, 6), lane.Lane(9))     // invalid lane: ignored
	flow(FlowKey(v4src, v4dst, 8445, 5102, 6), lane.Background) // one local address only
	flow(FlowKey(v6src, v6dst, 8446, 5103, 17), lane.Realtime)
	put(m.LanesDscp, uint32(lane.DSCPLowerEffort), lane.Background)
	dst := func(prefix string, port uint16, l lane.Lane) {
		put(m.LanesDst, abi.NewDstKey(netip.MustParsePrefix(prefix), port), l)
	}
	dst("10.77.0.0/16", 443, lane.Background)
	dst("10.77.1.0/24", 0, lane.Realtime)
	dst("fd00:77::/32", 0, lane.Background)
	flow(FlowKey(anySrc, netip.MustParseAddr("10.77.1.9"), 80, 5000, 6), lane.Interactive)
	return put
}

// classifierCases: every rule kind, their precedence, and malformed packets.
func classifierCases(t *testing.T, m ClassifierMaps, put func(mp *ebpf.Map, k any, l lane.Lane)) []classifierCase {
	d4 := func(a string, dport uint16) []byte {
		return pkt{src: v4src, dst: netip.MustParseAddr(a), sport: 5000, dport: dport, proto: 6}.build()
	}

	tcp4 := pkt{src: v4src, dst: v4dst, sport: 5000, dport: 443, proto: 6}
	tcp6 := pkt{src: v6src, dst: v6dst, sport: 5000, dport: 443, proto: 6}
	with := func(p pkt, f func(*pkt)) pkt { f(&p); return p }

	cases := []classifierCase{
		{name: "v4 tuple tcp", data: tcp4.build(), lane: lane.Background, kind: KindTuple},
		{name: "v4 tuple any proto (udp)", data: pkt{src: v4src, dst: v4dst, sport: 4001, dport: 4000, proto: 17}.build(), lane: lane.Realtime, kind: KindTuple},
		{name: "v4 tuple any proto (tcp)", data: pkt{src: v4src, dst: v4dst, sport: 4001, dport: 4000, proto: 6}.build(), lane: lane.Realtime, kind: KindTuple},
		{name: "v4 tuple proto mismatch", data: with(tcp4, func(p *pkt) { p.proto = 17 }).build(), lane: lane.Interactive, kind: KindDefault},
		{name: "v4 other source port", data: with(tcp4, func(p *pkt) { p.sport = 5001 }).build(), lane: lane.Interactive, kind: KindDefault},
		{name: "v4 ports swapped", data: with(tcp4, func(p *pkt) { p.sport, p.dport = 443, 5000 }).build(), lane: lane.Interactive, kind: KindDefault},
		{name: "v4 invalid lane value", data: pkt{src: v4src, dst: v4dst, sport: 7000, dport: 80, proto: 6}.build(), lane: lane.Interactive, kind: KindDefault},
		{name: "v4 local address", data: pkt{src: v4src, dst: v4dst, sport: 5102, dport: 8445, proto: 6}.build(), lane: lane.Background, kind: KindTuple},
		{name: "v4 other local address", data: pkt{src: v4other, dst: v4dst, sport: 5102, dport: 8445, proto: 6}.build(), lane: lane.Interactive, kind: KindDefault},
		{name: "v6 local address", data: pkt{src: v6src, dst: v6dst, sport: 5103, dport: 8446, proto: 17}.build(), lane: lane.Realtime, kind: KindTuple},
		{name: "v6 other local address", data: pkt{src: v6other, dst: v6dst, sport: 5103, dport: 8446, proto: 17}.build(), lane: lane.Interactive, kind: KindDefault},
		{name: "v6 tuple tcp", data: tcp6.build(), lane: lane.Background, kind: KindTuple},
		{name: "v6 tuple udp", data: pkt{src: v6src, dst: v6dst, sport: 6000, dport: 53, proto: 17}.build(), lane: lane.Realtime, kind: KindTuple},
		{name: "v6 other dst", data: with(tcp6, func(p *pkt) { p.dst = netip.MustParseAddr("fd00:9::3") }).build(), lane: lane.Interactive, kind: KindDefault},
		{name: "v4 dscp LE", data: with(tcp4, func(p *pkt) { p.sport = 1; p.dscp = lane.DSCPLowerEffort }).build(), lane: lane.Background, kind: KindDSCP},
		{name: "v6 dscp LE", data: with(tcp6, func(p *pkt) { p.sport = 1; p.dscp = lane.DSCPLowerEffort }).build(), lane: lane.Background, kind: KindDSCP},
		{name: "v4 dscp LE icmp", data: pkt{src: v4src, dst: v4dst, proto: 1, dscp: lane.DSCPLowerEffort}.build(), lane: lane.Background, kind: KindDSCP},
		{name: "tuple beats dscp", data: with(tcp4, func(p *pkt) { p.dscp = lane.DSCPExpedited }).build(), lane: lane.Background, kind: KindTuple},
		{name: "dscp EF unmapped", data: with(tcp4, func(p *pkt) { p.sport = 1; p.dscp = lane.DSCPExpedited }).build(), lane: lane.Interactive, kind: KindDefault},
		{name: "dscp EF mapped", data: with(tcp4, func(p *pkt) { p.sport = 1; p.dscp = lane.DSCPExpedited }).build(),
			setup: func() { put(m.LanesDscp, uint32(lane.DSCPExpedited), lane.Realtime) }, lane: lane.Realtime, kind: KindDSCP},
		{name: "v4 fragment has no ports", data: with(tcp4, func(p *pkt) { p.fragOff = 100 }).build(), lane: lane.Interactive, kind: KindDefault},
		// test_run itself refuses an IP ethertype without a full IP header, so
		// the short cases cut the packet after the fixed header.
		{name: "v4 ihl past end", data: func() []byte { b := tcp4.build(); b[14] = 0x4f; return b[:14+40] }(), lane: lane.Interactive, kind: KindDefault},
		{name: "v4 truncated ports", data: tcp4.build()[:14+20+2], lane: lane.Interactive, kind: KindDefault},
		{name: "v6 no transport header", data: tcp6.build()[:14+40], lane: lane.Interactive, kind: KindDefault},
		{name: "v4 bad version", data: func() []byte { b := tcp4.build(); b[14] = 0x65; return b }(), lane: lane.Interactive, kind: KindDefault},
		{name: "v4 bad ihl", data: func() []byte { b := tcp4.build(); b[14] = 0x43; return b }(), lane: lane.Interactive, kind: KindDefault},
		{name: "ethernet only (lldp)", data: func() []byte { b := tcp4.build()[:14]; b[12], b[13] = 0x88, 0xcc; return b }(), lane: lane.Interactive, kind: KindDefault},
		{name: "arp", data: func() []byte { b := make([]byte, 42); b[12], b[13] = 0x08, 0x06; return b }(), lane: lane.Interactive, kind: KindDefault},
		{name: "dst prefix with port beats longer any-port prefix", data: d4("10.77.1.5", 443), lane: lane.Background, kind: KindDst},
		{name: "dst longest any-port prefix", data: d4("10.77.1.5", 80), lane: lane.Realtime, kind: KindDst},
		{name: "dst port rule other port", data: d4("10.77.2.5", 80), lane: lane.Interactive, kind: KindDefault},
		{name: "dst port rule", data: d4("10.77.2.5", 443), lane: lane.Background, kind: KindDst},
		{name: "tuple beats dst", data: d4("10.77.1.9", 80), lane: lane.Interactive, kind: KindTuple},
		{name: "dst v6 prefix, no ports (icmpv6)", data: pkt{src: v6src, dst: netip.MustParseAddr("fd00:77::1"), proto: 58}.build(), lane: lane.Background, kind: KindDst},
		{name: "dst outside prefixes", data: d4("10.78.1.5", 443), lane: lane.Interactive, kind: KindDefault},
		{name: "uid of socket", data: with(tcp4, func(p *pkt) { p.sport = 2 }).build(),
			// the test_run dummy socket belongs to uid 0 (sock_init_data without a struct socket)
			setup: func() { put(m.LanesUid, uint32(0), lane.Realtime) }, lane: lane.Realtime, kind: KindUID},
		{name: "tuple beats uid", data: tcp4.build(), lane: lane.Background, kind: KindTuple},
	}
	if id, ok := selfCgroupID(t); ok {
		cases = append(cases,
			classifierCase{name: "cgroup of socket beats uid", data: with(tcp4, func(p *pkt) { p.sport = 3 }).build(),
				setup: func() { put(m.LanesCgroup, id, lane.Background) }, lane: lane.Background, kind: KindCgroup})
	} else {
		t.Log("no cgroup v2 id for this process: cgroup case skipped")
	}

	return cases
}

// runClassifierCase runs tc's packet and checks that exactly its counter moved.
func runClassifierCase(t *testing.T, objs *ClassifierObjects, tc classifierCase) {
	m := objs.ClassifierMaps
	if tc.setup != nil {
		tc.setup()
	}
	before, err := ReadStats(m.LanesClsStats)
	if err != nil {
		t.Fatal(err)
	}
	ret, err := objs.LanesClassify.Run(&ebpf.RunOptions{Data: tc.data})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if ret != 0 { // TC_ACT_OK
		t.Errorf("return code %d, want TC_ACT_OK", ret)
	}
	after, err := ReadStats(m.LanesClsStats)
	if err != nil {
		t.Fatal(err)
	}
	want := StatsIndex(tc.kind, tc.lane)
	for i := range after {
		dp := after[i].Packets - before[i].Packets
		db := after[i].Bytes - before[i].Bytes
		k, l := Kind(i/abi.LaneSlots), lane.Lane(i%abi.LaneSlots)
		switch {
		case uint32(i) == want && (dp != 1 || db != uint64(len(tc.data))):
			t.Errorf("counter %s/%s: +%d packets +%d bytes, want +1 and +%d", k, l, dp, db, len(tc.data))
		case uint32(i) != want && dp != 0:
			t.Errorf("counter %s/%s: +%d packets, want 0 (expected %s/%s, class %#x)", k, l, dp, tc.kind, tc.lane, tc.lane.ClassID())
		}
	}
}

// TestFlowKeyPrecedence: with all four shapes of one flow's key in the map
// (protocol and local address, protocol only, local address only, neither),
// each is the one that matches once those before it in lanes_abi.h's
// precedence are gone, for IPv4 and IPv6; a packet from another local
// address never matches the shapes that name one.
func TestFlowKeyPrecedence(t *testing.T) {
	objs := loadForTest(t)
	for _, fam := range []struct {
		name       string
		src, other netip.Addr
		dst        netip.Addr
	}{{"v4", v4src, v4other, v4dst}, {"v6", v6src, v6other, v6dst}} {
		t.Run(fam.name, func(t *testing.T) {
			shapes := []struct {
				name string
				key  abi.FlowKey
				lane lane.Lane
			}{
				{"proto+src", FlowKey(fam.src, fam.dst, 9000, 7000, 6), lane.Realtime},
				{"proto", FlowKey(anySrc, fam.dst, 9000, 7000, 6), lane.Background},
				{"src", FlowKey(fam.src, fam.dst, 9000, 7000, 0), lane.Realtime},
				{"any", FlowKey(anySrc, fam.dst, 9000, 7000, 0), lane.Background},
			}
			for _, sh := range shapes {
				if err := objs.PutFlow(sh.key, sh.lane); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() {
				for _, sh := range shapes {
					objs.LanesTuple.Delete(sh.key)
				}
			})
			mine := pkt{src: fam.src, dst: fam.dst, sport: 7000, dport: 9000, proto: 6}
			other := pkt{src: fam.other, dst: fam.dst, sport: 7000, dport: 9000, proto: 6}
			for i, sh := range shapes {
				if got := runLane(t, objs, mine.build()); got != sh.lane {
					t.Errorf("%s present first: lane %v, want %v", sh.name, got, sh.lane)
				}
				// another local address: the first shape present without one
				want := lane.Interactive
				for _, later := range shapes[i:] {
					if later.key.Src() == anySrc {
						want = later.lane
						break
					}
				}
				if got := runLane(t, objs, other.build()); got != want {
					t.Errorf("%s present first, packet from %s: lane %v, want %v", sh.name, fam.other, got, want)
				}
				if err := objs.LanesTuple.Delete(sh.key); err != nil {
					t.Fatal(err)
				}
			}
			if got := runLane(t, objs, mine.build()); got != lane.Interactive {
				t.Errorf("no key left: lane %v, want interactive", got)
			}
		})
	}
}

// TestFlowKeyShapes: a key whose shape lanes_tuple_shapes does not list is
// skipped (the host clears a shape's bit after its last key), and listing
// it again makes it match.
func TestFlowKeyShapes(t *testing.T) {
	objs := loadForTest(t)
	k := FlowKey(v4src, v4dst, 9001, 7001, 6)
	if err := objs.PutFlow(k, lane.Background); err != nil {
		t.Fatal(err)
	}
	p := pkt{src: v4src, dst: v4dst, sport: 7001, dport: 9001, proto: 6}.build()
	if got := runLane(t, objs, p); got != lane.Background {
		t.Fatalf("shape listed: lane %v, want background", got)
	}
	if err := objs.LanesTupleShapes.Put(uint32(0), ^FlowShape(k)); err != nil {
		t.Fatal(err)
	}
	if got := runLane(t, objs, p); got != lane.Interactive {
		t.Errorf("shape not listed: lane %v, want interactive (the key skipped)", got)
	}
}

// runLane runs one packet through the classifier and returns its lane,
// read from the counter that moved (test_run does not return tc_classid).
func runLane(t *testing.T, objs *ClassifierObjects, data []byte) lane.Lane {
	t.Helper()
	before, err := ReadStats(objs.LanesClsStats)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := objs.LanesClassify.Run(&ebpf.RunOptions{Data: data}); err != nil {
		t.Fatalf("run: %v", err)
	}
	after, err := ReadStats(objs.LanesClsStats)
	if err != nil {
		t.Fatal(err)
	}
	got := lane.Unset
	for i := range after {
		if after[i].Packets != before[i].Packets {
			if got != lane.Unset {
				t.Fatalf("two counters moved for one packet")
			}
			got = lane.Lane(i % abi.LaneSlots)
		}
	}
	return got
}

// BenchmarkClassifier measures the classifier per packet through
// BPF_PROG_TEST_RUN with repeat, next to a pass-through program on the same
// hook, for a packet that matches nothing (the longest path: cookie, tuple
// twice, cgroup, uid, dscp) and one that hits the 3-tuple map.
func BenchmarkClassifier(b *testing.B) {
	objs := loadForTest(b)
	if err := objs.PutFlow(FlowKey(anySrc, v4dst, 443, 5000, 6), lane.Background); err != nil {
		b.Fatal(err)
	}
	miss := pkt{src: v4src, dst: v4dst, sport: 5001, dport: 443, proto: 6}.build()
	hit := pkt{src: v4src, dst: v4dst, sport: 5000, dport: 443, proto: 6}.build()
	for _, bc := range []struct {
		name string
		prog *ebpf.Program
		data []byte
	}{
		{"passthrough", objs.LanesPassthrough, miss},
		{"classify-default", objs.LanesClassify, miss},
		{"classify-tuple", objs.LanesClassify, hit},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// The kernel runs the program b.N times on one skb and reports
			// the mean time per run, without the syscall around it.
			_, per, err := bc.prog.Benchmark(bc.data, b.N, b.ResetTimer)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(per.Nanoseconds()), "ns/pkt")
		})
	}
}
