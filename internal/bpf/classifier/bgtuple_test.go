// bgtuple_test.go: a background flow picked by a 5-tuple rule (a
// registration, a policy flow rule) enters the background non-TCP class
// by its own 5-tuple: the class's flow table holds the packet's full key
// (the ingress policer and the flows listing look it up so), not the
// wildcard key of the rule that matched; and TCP matched by a rule of any
// protocol stays out of the class.
package classifier

import (
	"net/netip"
	"testing"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
)

func TestBackgroundClassTupleRule(t *testing.T) {
	objs := loadForTest(t)
	peer := netip.MustParseAddr("10.9.8.7")
	if err := objs.LanesTupleShapes.Put(uint32(0), uint32(0xf)); err != nil {
		t.Fatal(err)
	}
	// A UDP registration (any local address) and a rule of any protocol.
	for _, k := range []abi.FlowKey{abi.NewFlowKey(netip.Addr{}, peer, 443, 40000, 17), abi.NewFlowKey(netip.Addr{}, peer, 443, 40001, 0)} {
		if err := objs.LanesTuple.Put(k, uint32(lane.Background)); err != nil {
			t.Fatal(err)
		}
	}
	// A class rate that lets the bucket's depth through and little more.
	for _, d := range []uint32{0, 1} {
		putBgCtl(t, objs, d, ClassifierBgCtl{Rate: 1000})
	}
	udp := pkt{src: v4src, dst: peer, sport: 40000, dport: 443, proto: 17}
	passed(t, objs.LanesClassify, udp.build(), 1)
	var ifindex uint32
	if err := objs.LanesBgFlows.Lookup(abi.NewFlowKey(v4src, peer, 443, 40000, 17), &ifindex); err != nil {
		t.Errorf("the registered UDP flow's full 5-tuple is not in the class's table: %v", err)
	}
	var n int
	var k abi.FlowKey
	it := objs.LanesBgFlows.Iterate()
	for it.Next(&k, &ifindex) {
		n++
	}
	if n != 1 {
		t.Errorf("%d entries in the class's table, want the UDP flow's alone", n)
	}

	tcp := pkt{src: v4src, dst: peer, sport: 40001, dport: 443, proto: 6}
	if got := passed(t, objs.LanesClassify, tcp.build(), 2000); got != 2000 {
		t.Errorf("TCP in background by a rule of any protocol: %d of 2000 passed the non-TCP class", got)
	}
	if err := objs.LanesBgFlows.Lookup(abi.NewFlowKey(v4src, peer, 443, 40001, 6), &ifindex); err == nil {
		t.Error("a TCP flow is in the non-TCP class's table")
	}
}
