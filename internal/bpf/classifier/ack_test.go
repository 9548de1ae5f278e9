// ack_test.go checks the classifier's pure-ACK test (the ACK class takes
// an interactive socket's pure ACKs while it has a downlink cap) through
// BPF_PROG_TEST_RUN of lanes_pure_ack, and that with the class on a pure
// ACK of a socket without a cap stays in its lane. The capped socket's
// path needs a real socket's cookie: internal/datapath TestAckClass. A
// background download's pure ACK at its floor beside a foreground goes to
// the held-ACK class.
package classifier

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/yield"
)

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

// tcpSeg builds Ethernet + IP + a TCP header with optLen bytes of options
// (a multiple of 4) + payload bytes.
func tcpSeg(src, dst netip.Addr, flags uint8, optLen, payload int, fragOff uint16) []byte {
	eth := make([]byte, 14)
	th := make([]byte, 20+optLen)
	binary.BigEndian.PutUint16(th[0:], 443)
	binary.BigEndian.PutUint16(th[2:], 40000)
	th[12] = uint8((20+optLen)/4) << 4
	th[13] = flags
	for i := 20; i < len(th); i++ {
		th[i] = 1 // NOP options
	}
	l4 := append(th, make([]byte, payload)...)
	if dst.Is4() {
		binary.BigEndian.PutUint16(eth[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(l4)))
		binary.BigEndian.PutUint16(ip[6:], fragOff)
		ip[8] = 64
		ip[9] = 6
		s, d := src.As4(), dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		return append(append(eth, ip...), l4...)
	}
	binary.BigEndian.PutUint16(eth[12:], 0x86dd)
	ip := make([]byte, 40)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
	ip[6] = 6
	ip[7] = 64
	s, d := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	return append(append(eth, ip...), l4...)
}

func TestPureAck(t *testing.T) {
	objs := loadForTest(t)
	udp := pkt{src: v4src, dst: v4dst, sport: 53, dport: 5353, proto: 17}.build()
	for _, fam := range []struct {
		name     string
		src, dst netip.Addr
	}{{"ipv4", v4src, v4dst}, {"ipv6", v6src, v6dst}} {
		for _, tc := range []struct {
			name string
			data []byte
			want uint32
		}{
			{"ack", tcpSeg(fam.src, fam.dst, tcpACK, 0, 0, 0), 1},
			{"ack with timestamps", tcpSeg(fam.src, fam.dst, tcpACK, 12, 0, 0), 1},
			{"ack with SACK blocks and timestamps", tcpSeg(fam.src, fam.dst, tcpACK, 40, 0, 0), 1},
			{"ack with PSH", tcpSeg(fam.src, fam.dst, tcpACK|tcpPSH, 12, 0, 0), 1},
			{"data", tcpSeg(fam.src, fam.dst, tcpACK|tcpPSH, 12, 1448, 0), 0},
			{"one byte of data", tcpSeg(fam.src, fam.dst, tcpACK, 12, 1, 0), 0},
			{"SYN-ACK", tcpSeg(fam.src, fam.dst, tcpSYN|tcpACK, 12, 0, 0), 0},
			{"FIN-ACK", tcpSeg(fam.src, fam.dst, tcpFIN|tcpACK, 12, 0, 0), 0},
			{"RST-ACK", tcpSeg(fam.src, fam.dst, tcpRST|tcpACK, 0, 0, 0), 0},
			{"no ACK flag", tcpSeg(fam.src, fam.dst, 0, 0, 0, 0), 0},
		} {
			t.Run(fam.name+"/"+tc.name, func(t *testing.T) {
				ret, err := objs.LanesPureAck.Run(&ebpf.RunOptions{Data: tc.data})
				if err != nil {
					t.Fatal(err)
				}
				if ret != tc.want {
					t.Errorf("pure_ack = %d, want %d", ret, tc.want)
				}
			})
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"udp", udp},
		{"ipv4 fragment", tcpSeg(v4src, v4dst, tcpACK, 0, 0, 100)},
		{"ipv4 more fragments", tcpSeg(v4src, v4dst, tcpACK, 0, 0, 0x2000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ret, err := objs.LanesPureAck.Run(&ebpf.RunOptions{Data: tc.data}); err != nil || ret != 0 {
				t.Errorf("pure_ack = %d (%v), want 0", ret, err)
			}
		})
	}
}

// TestAckClassNeedsCap: with the ACK class on, a pure ACK of a socket
// without a downlink cap (the test run's socket: no lanes_sock_rwnd
// entry) stays interactive and is not counted as the class's.
func TestAckClassNeedsCap(t *testing.T) {
	objs := loadForTest(t)
	if err := objs.LanesAckOn.Put(uint32(0), uint32(1)); err != nil {
		t.Fatal(err)
	}
	before, err := ReadStats(objs.LanesClsStats)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := objs.LanesClassify.Run(&ebpf.RunOptions{Data: tcpSeg(v4src, v4dst, tcpACK, 12, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	after, err := ReadStats(objs.LanesClsStats)
	if err != nil {
		t.Fatal(err)
	}
	i := StatsIndex(KindDefault, lane.Interactive)
	if after[i].Packets != before[i].Packets+1 {
		t.Errorf("default/interactive counter %d -> %d, want one more", before[i].Packets, after[i].Packets)
	}
	var per []struct{ Packets, Bytes uint64 }
	if err := objs.LanesAckStats.Lookup(uint32(0), &per); err != nil {
		t.Fatal(err)
	}
	for _, c := range per {
		if c.Packets != 0 {
			t.Errorf("ACK class counted %d packets of a socket without a cap", c.Packets)
		}
	}
}

// heldAckKey is bgclass.h's BG_HELD_ACK_KEY: lanes_bg_state's key of an
// interface's held-ACK event, or'ed with its ifindex.
const heldAckKey = 0x80000000

// TestHeldAckAtTheFloor: a background download's pure ACK goes to the
// held-ACK class (its event posted: lanes_bg_state's held-ACK key) where
// sock_ops marks the interface's download at its floor (lanes_rl_floor)
// beside a foreground that receives (a foreground TCP socket's download
// reading, or a present foreground no TCP sample speaks for); alone, or
// beside a foreground that only sends (an upload), it does not, nor once
// the mark is cleared.
func TestHeldAckAtTheFloor(t *testing.T) {
	objs := loadForTest(t)
	peer := netip.MustParseAddr("10.9.8.11")
	if err := objs.LanesDst.Put(abi.NewDstKey(netip.PrefixFrom(peer, 32), 0), uint32(lane.Background)); err != nil {
		t.Fatal(err)
	}
	ack := tcpSeg(v4src, peer, tcpACK, 12, 0, 0)
	held := func() bool {
		var s ClassifierBgState
		return objs.LanesBgState.Lookup(uint32(heldAckKey|loIdx), &s) == nil && s.Posted != 0
	}
	run := func() {
		t.Helper()
		if _, err := objs.LanesClassify.Run(&ebpf.RunOptions{Data: ack}); err != nil {
			t.Fatal(err)
		}
	}
	if err := objs.LanesRlFloor.Put(uint32(loIdx), monotonicNS()); err != nil {
		t.Fatal(err)
	}
	run()
	if held() {
		t.Fatal("at the floor, no foreground: the ACK held")
	}
	// a foreground TCP socket that only sends (an upload: sock_ops'
	// lanes_fg_harm.seen, no download reading) is not harmed by the floor
	if err := objs.LanesFgHarm.Put(uint32(loIdx), yield.Harm{Seen: monotonicNS()}); err != nil {
		t.Fatal(err)
	}
	run()
	if held() {
		t.Fatal("at the floor beside a foreground TCP upload's sample: the ACK held")
	}
	// a foreground TCP socket's download reading (sock_ops' fg_dir_queue),
	// on a link too slow for the classifier's stamp
	var down yield.Harm
	down.Seen, down.DirQueueAt[yield.Down] = monotonicNS(), monotonicNS()
	if err := objs.LanesFgHarm.Put(uint32(loIdx), down); err != nil {
		t.Fatal(err)
	}
	run()
	if !held() {
		t.Fatal("at the floor beside a foreground TCP download's reading: the ACK not held")
	}
	if err := objs.LanesFgHarm.Delete(uint32(loIdx)); err != nil {
		t.Fatal(err)
	}
	if err := objs.LanesBgState.Delete(uint32(heldAckKey | loIdx)); err != nil {
		t.Fatal(err)
	}
	fg := pkt{src: v4src, dst: v4dst, sport: 40007, dport: 443, proto: 6} // interactive
	passed(t, objs.LanesClassify, fg.build(), 10)                         // stamps loopback present
	run()
	if !held() {
		t.Fatal("at the floor beside a present foreground no TCP sample speaks for: the ACK not held")
	}
	if err := objs.LanesBgState.Delete(uint32(heldAckKey | loIdx)); err != nil {
		t.Fatal(err)
	}
	if err := objs.LanesFgHarm.Put(uint32(loIdx), yield.Harm{Seen: monotonicNS()}); err != nil {
		t.Fatal(err)
	}
	run()
	if held() {
		t.Fatal("at the floor beside a present foreground whose TCP socket only sends: the ACK held")
	}
	if err := objs.LanesRlFloor.Put(uint32(loIdx), uint64(0)); err != nil {
		t.Fatal(err)
	}
	run()
	if held() {
		t.Error("the floor's mark cleared: the ACK held")
	}
}
