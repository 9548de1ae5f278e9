// abi_test.go checks that the Go side agrees with lanes_abi.h: the lane
// numbers of package lane, the HTB class minor, the struct layouts the
// programs see (BTF sizes and offsets), and that every enum the Go side
// names has a name for each value below its terminator. Needs no root.
package abi

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/lanes-net/lanes/internal/lane"
)

func TestLaneNumbers(t *testing.T) {
	for _, c := range []struct {
		goLane lane.Lane
		cLane  AbiLane
	}{
		{lane.Unset, AbiLaneLANE_UNSET},
		{lane.Realtime, AbiLaneLANE_REALTIME},
		{lane.Interactive, AbiLaneLANE_INTERACTIVE},
		{lane.Background, AbiLaneLANE_BACKGROUND},
	} {
		if uint32(c.goLane) != uint32(c.cLane) {
			t.Errorf("lane %s: Go %d, C %d", c.goLane, c.goLane, c.cLane)
		}
	}
	if uint32(lane.All[len(lane.All)-1]) != uint32(AbiLaneLANE_MAX) || len(lane.All)+1 != LaneSlots {
		t.Errorf("lane.All %v vs LANE_MAX %d, LANE_SLOTS %d", lane.All, AbiLaneLANE_MAX, LaneSlots)
	}
	if AckClassMinor != lane.AckClassMinor {
		t.Errorf("ACK class minor: Go %#x, C %#x", lane.AckClassMinor, AckClassMinor)
	}
	if BgShapeClassMinor != lane.BgShapeClassMinor {
		t.Errorf("background shaper minor: Go %#x, C %#x", lane.BgShapeClassMinor, BgShapeClassMinor)
	}
	if HeldAckClassMinor != lane.HeldAckClassMinor {
		t.Errorf("held-ACK minor: Go %#x, C %#x", lane.HeldAckClassMinor, HeldAckClassMinor)
	}
	if ClassMinor != lane.ClassMinor {
		t.Errorf("class minor: Go %#x, C %#x", lane.ClassMinor, ClassMinor)
	}
}

func TestStructLayouts(t *testing.T) {
	spec, err := LoadAbi()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		size uintptr
	}{
		{"flow_key", unsafe.Sizeof(FlowKey{})},
		{"counter", unsafe.Sizeof(Counter{})},
	} {
		var s *btf.Struct
		if err := spec.Types.TypeByName(c.name, &s); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if uintptr(s.Size) != c.size {
			t.Errorf("struct %s: C %d bytes, Go %d", c.name, s.Size, c.size)
		}
	}
	// the 5-tuple key: each member where the programs read it
	var fk *btf.Struct
	if err := spec.Types.TypeByName("flow_key", &fk); err != nil {
		t.Fatal(err)
	}
	goOff := map[string]uintptr{
		"daddr": unsafe.Offsetof(FlowKey{}.Daddr), "saddr": unsafe.Offsetof(FlowKey{}.Saddr),
		"dport": unsafe.Offsetof(FlowKey{}.Dport), "sport": unsafe.Offsetof(FlowKey{}.Sport),
		"proto": unsafe.Offsetof(FlowKey{}.Proto),
	}
	for _, m := range fk.Members {
		if m.Name == "pad" {
			continue
		}
		off, ok := goOff[m.Name]
		if !ok {
			t.Errorf("flow_key.%s has no Go field", m.Name)
			continue
		}
		if uintptr(m.Offset.Bytes()) != off {
			t.Errorf("flow_key.%s: C offset %d, Go %d", m.Name, m.Offset.Bytes(), off)
		}
		delete(goOff, m.Name)
	}
	for name := range goOff {
		t.Errorf("flow_key has no member %s", name)
	}
}

func TestEnumNames(t *testing.T) {
	for _, c := range []struct {
		enum, prefix, end string
		want              int
		first, last       string
	}{
		{"match_kind", "MATCH_", "MATCH_KINDS", MatchKinds, "cookie", ""},
		{"ops_counter", "OPS_", "OPS_COUNTERS", OpsCounters, "connect", ""},
	} {
		names, err := Names(c.enum, c.prefix, c.end)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != c.want {
			t.Errorf("%s: %d names, generated constant says %d", c.enum, len(names), c.want)
		}
		for i, n := range names {
			if n == "" {
				t.Errorf("%s: value %d has no name (values must be dense)", c.enum, i)
			}
		}
		if names[0] != c.first || (c.last != "" && names[len(names)-1] != c.last) {
			t.Errorf("%s: names %v", c.enum, names)
		}
	}
	if _, err := Names("no_such_enum", "", "X"); err == nil {
		t.Error("unknown enum accepted")
	}
	if _, err := Names("lane", "LANE_", "NO_END"); err == nil {
		t.Error("missing terminator accepted")
	}
}

func TestDstKey(t *testing.T) {
	for _, c := range []struct {
		prefix string
		port   uint16
		plen   uint32
	}{
		{"10.0.0.0/8", 443, 16 + 96 + 8},
		{"192.0.2.10/32", 0, 16 + 128},
		{"2001:db8::/32", 53, 16 + 32},
		{"::/0", 0, 16},
	} {
		p := netip.MustParsePrefix(c.prefix)
		k := NewDstKey(p, c.port)
		if k.Prefixlen != c.plen || k.Prefix() != p || k.Port() != c.port {
			t.Errorf("%s port %d: key %+v -> %s port %d", p, c.port, k, k.Prefix(), k.Port())
		}
	}
}

func TestFlowKey(t *testing.T) {
	for _, c := range []struct{ src, dst string }{
		{"", "192.0.2.10"},
		{"10.0.0.2", "192.0.2.10"},
		{"", "2001:db8::1"},
		{"fd00::2", "2001:db8::1"},
	} {
		var src netip.Addr
		if c.src != "" {
			src = netip.MustParseAddr(c.src)
		}
		dst := netip.MustParseAddr(c.dst)
		k := NewFlowKey(src, dst, 443, 5000, 6)
		if k.Src() != src || k.Addr() != dst || k.Dport != 443 || k.Sport != 5000 || k.Proto != 6 {
			t.Errorf("src %q dst %s: key %+v -> src %s dst %s", c.src, dst, k, k.Src(), k.Addr())
		}
		if dst.Is4() && k.Daddr[10] != 0xff {
			t.Errorf("IPv4 destination not stored v4-mapped: %v", k.Daddr)
		}
		if src.Is4() && k.Saddr[10] != 0xff {
			t.Errorf("IPv4 local address not stored v4-mapped: %v", k.Saddr)
		}
		if !src.IsValid() && k.Saddr != ([16]uint8{}) {
			t.Errorf("any local address not all-zero: %v", k.Saddr)
		}
	}
}
