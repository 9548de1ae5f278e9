// tupleshapes_test.go: the host keeps lanes_tuple_shapes in step with its
// keys, so flow_lookup's skipping never hides a registered flow.
package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// tcpFrame is an Ethernet + IPv4 + TCP header frame src:sport -> dst:dport.
func tcpFrame(src, dst netip.Addr, sport, dport uint16) []byte {
	b := make([]byte, 14+20+20)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	return b
}

func TestTupleShapesFollowKeys(t *testing.T) {
	requireCgroup2(t)
	ns := testutil.NewNetNS(t)
	var h *Host
	ns.Do(t, func() (err error) { h, err = OpenHost(HostConfig{Instance: "shapes"}); return err })
	defer h.Close()
	src, dst := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
	a := FlowKey{Src: src, Dst: dst, DPort: 443, SPort: 5000, Proto: 6}
	b := FlowKey{Src: src, Dst: dst, DPort: 443, SPort: 5001, Proto: 6} // same shape
	w := FlowKey{Dst: dst, DPort: 443, SPort: 5000}                     // any proto, any src
	laneOf := func(sport uint16) lane.Lane {
		t.Helper()
		l, _, err := h.TryClassify(tcpFrame(src, dst, sport, 443))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	step := func(what string, err error, want5000, want5001 lane.Lane) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if g0, g1 := laneOf(5000), laneOf(5001); g0 != want5000 || g1 != want5001 {
			t.Errorf("after %s: sport 5000 %v, 5001 %v; want %v, %v", what, g0, g1, want5000, want5001)
		}
	}
	bg, rt, in := lane.Background, lane.Realtime, lane.Interactive
	step("a", h.Lanes.SetFlowLane(a, bg), bg, in)
	step("b", h.Lanes.SetFlowLane(b, bg), bg, bg)
	step("a again (replaced)", h.Lanes.SetFlowLane(a, rt), rt, bg)
	step("w", h.Lanes.SetFlowLane(w, bg), rt, bg)
	step("delete a", h.Lanes.DeleteFlow(a), bg, bg) // w now
	step("delete a twice", h.Lanes.DeleteFlow(a), bg, bg)
	step("delete b", h.Lanes.DeleteFlow(b), bg, in)
	step("delete w", h.Lanes.DeleteFlow(w), in, in)
	step("a back", h.Lanes.SetFlowLane(a, rt), rt, in)
	var mask uint32
	if err := h.cls.LanesTupleShapes.Lookup(uint32(0), &mask); err != nil || mask != 1 {
		t.Errorf("shapes mask %#x (%v), want 0x1: only a's shape", mask, err)
	}
}
