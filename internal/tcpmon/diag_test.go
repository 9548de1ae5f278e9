// diag_test.go: unit tests of the sock_diag decoder on crafted messages:
// tcp_info of older and newer kernels' sizes, unknown and malformed
// attributes, netlink errors, interrupted dumps.
package tcpmon

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

var ne = binary.NativeEndian

// attr encodes one netlink attribute, padded to 4 bytes.
func attr(typ uint16, v []byte) []byte {
	b := make([]byte, 4, 4+len(v)+3)
	ne.PutUint16(b[0:], uint16(4+len(v)))
	ne.PutUint16(b[2:], typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// diagMsg builds an IPv4 inet_diag_msg followed by attrs.
func diagMsg(src, dst netip.AddrPort, cookie uint64, attrs ...[]byte) []byte {
	b := make([]byte, diagMsgLen)
	b[0] = unix.AF_INET
	b[1] = StateEstablished
	binary.BigEndian.PutUint16(b[4:], src.Port())
	binary.BigEndian.PutUint16(b[6:], dst.Port())
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(b[8:], s4[:])
	copy(b[24:], d4[:])
	ne.PutUint32(b[44:], uint32(cookie))
	ne.PutUint32(b[48:], uint32(cookie>>32))
	ne.PutUint32(b[56:], 11)   // rqueue
	ne.PutUint32(b[60:], 2222) // wqueue
	ne.PutUint32(b[64:], 1000) // uid
	ne.PutUint32(b[68:], 4242) // inode
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

// tcpInfoBytes builds a struct tcp_info of n bytes with recognisable values.
func tcpInfoBytes(n int) []byte {
	b := make([]byte, 400)
	b[offState] = StateEstablished
	b[offCAState] = byte(CARecovery)
	b[offRetransmits] = 2
	ne.PutUint32(b[offRTT:], 1234)
	ne.PutUint32(b[offRTTVar:], 56)
	ne.PutUint32(b[offSndCwnd:], 10)
	ne.PutUint32(b[offSndSSThresh:], 7)
	ne.PutUint32(b[offLost:], 3)
	ne.PutUint64(b[offBytesAcked:], 1<<40+5)
	ne.PutUint64(b[offBytesRecv:], 99)
	ne.PutUint32(b[offMinRTT:], 900)
	ne.PutUint64(b[offDeliveryRate:], 125000)
	ne.PutUint64(b[offBytesSent:], 1<<40+77)
	ne.PutUint32(b[offSndWnd:], 65535)
	return b[:n]
}

func TestParseDiagMsg(t *testing.T) {
	src := netip.MustParseAddrPort("10.1.2.3:40000")
	dst := netip.MustParseAddrPort("192.0.2.9:443")
	cgid := make([]byte, 8)
	ne.PutUint64(cgid, 777)
	mem := make([]byte, 16)
	ne.PutUint32(mem[4:], 8192)
	skmem := make([]byte, 4*9)
	ne.PutUint32(skmem[4*5:], 3000) // wmem_queued
	ne.PutUint32(skmem[4*8:], 4)    // drops
	msg := diagMsg(src, dst, 0x1122334455667788,
		attr(attrMeminfo, mem),
		attr(999, []byte("some attribute of a future kernel")), // unknown type
		attr(attrInfo, tcpInfoBytes(232)),                      // full 6.x size
		attr(attrCong, []byte("cubic\x00")),
		attr(attrSKMeminfo, skmem),
		attr(attrCgroupID, cgid),
	)
	s, err := parseDiagMsg(msg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Src != src || s.Dst != dst {
		t.Errorf("addresses %v -> %v, want %v -> %v", s.Src, s.Dst, src, dst)
	}
	if s.Cookie != 0x1122334455667788 || s.Inode != 4242 || s.UID != 1000 || s.RQueue != 11 || s.WQueue != 2222 {
		t.Errorf("header fields wrong: %+v", s)
	}
	if string(s.Cong) != "cubic" || s.CgroupID != 777 || !s.HasMem || s.Mem[1] != 8192 || s.NSKMem != 9 || s.SKMem[8] != 4 {
		t.Errorf("attributes wrong: cong %q cgroup %d mem %v skmem %v", s.Cong, s.CgroupID, s.Mem, s.SKMem)
	}
	ti := &s.Info
	if !s.HasInfo {
		t.Fatal("no tcp_info")
	}
	if ti.SndCwnd != 10 || ti.SndSSThresh != 7 || ti.RTT != 1234 || ti.CAState != CARecovery || ti.Lost != 3 ||
		ti.BytesAcked != 1<<40+5 || ti.BytesSent != 1<<40+77 || ti.SndWnd != 65535 || ti.MinRTT != 900 {
		t.Errorf("tcp_info wrong: %+v", ti)
	}
}

func TestParseTCPInfoByLength(t *testing.T) {
	// A 4.x kernel sends 192 bytes: no bytes_sent, no snd_wnd.
	old := ParseTCPInfo(tcpInfoBytes(192))
	if old.SndCwnd != 10 || old.BytesAcked != 1<<40+5 || old.DeliveryRate != 125000 {
		t.Errorf("old kernel's fields lost: %+v", old)
	}
	if old.BytesSent != 0 || old.SndWnd != 0 {
		t.Errorf("fields beyond a short tcp_info must be zero: %+v", old)
	}
	// The oldest layout (104 bytes) stops before pacing_rate.
	if oldest := ParseTCPInfo(tcpInfoBytes(104)); oldest.SndCwnd != 10 || oldest.BytesAcked != 0 {
		t.Errorf("104-byte tcp_info: %+v", oldest)
	}
	// A future kernel sends more than we know: read what we know.
	if nw := ParseTCPInfo(tcpInfoBytes(400)); nw.SndWnd != 65535 || nw.Len != 400 {
		t.Errorf("longer tcp_info: %+v", nw)
	}
	// Even nonsense lengths must not panic.
	for n := 0; n < 240; n++ {
		ParseTCPInfo(tcpInfoBytes(n))
	}
}

func TestParseDiagMsgMalformed(t *testing.T) {
	src := netip.MustParseAddrPort("10.0.0.1:1")
	dst := netip.MustParseAddrPort("10.0.0.2:2")
	if _, err := parseDiagMsg(make([]byte, 40)); err == nil {
		t.Error("short message accepted")
	}
	bad := diagMsg(src, dst, 1, attr(attrInfo, tcpInfoBytes(232)))
	ne.PutUint16(bad[diagMsgLen:], 2000) // attribute longer than the message
	if _, err := parseDiagMsg(bad); err == nil {
		t.Error("attribute overrunning the message accepted")
	}
	bad2 := diagMsg(src, dst, 1)
	bad2 = append(bad2, 2, 0, 2, 0) // length 2 < header
	if _, err := parseDiagMsg(bad2); err == nil {
		t.Error("attribute shorter than its header accepted")
	}
	fam := diagMsg(src, dst, 1)
	fam[0] = 99
	if _, err := parseDiagMsg(fam); err == nil {
		t.Error("unknown family accepted")
	}
	// Trailing bytes shorter than an attribute header are ignored.
	tail := append(diagMsg(src, dst, 1, attr(attrCong, []byte("bbr\x00"))), 0, 0)
	if s, err := parseDiagMsg(tail); err != nil || string(s.Cong) != "bbr" {
		t.Errorf("trailing padding: %v %q", err, s.Cong)
	}
	// Fuzz-ish: every truncation of a good message decodes or errors, never panics.
	good := diagMsg(src, dst, 1, attr(attrInfo, tcpInfoBytes(232)), attr(attrCong, []byte("cubic\x00")))
	for n := range good {
		parseDiagMsg(good[:n])
	}
}

// nlmsg wraps payload in a netlink header.
func nlmsg(typ, flags uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(payload)+3)
	ne.PutUint32(b[0:], uint32(nlmsgHdrLen+len(payload)))
	ne.PutUint16(b[4:], typ)
	ne.PutUint16(b[6:], flags)
	ne.PutUint32(b[8:], seq)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestParseDatagram(t *testing.T) {
	c := &diagConn{seq: 5}
	src := netip.MustParseAddrPort("10.0.0.1:1000")
	var got []uint64
	fn := func(s *Sock) { got = append(got, s.Cookie) }
	var dg []byte
	dg = append(dg, nlmsg(sockDiagByFamily, unix.NLM_F_MULTI, 5, diagMsg(src, src, 1))...)
	dg = append(dg, nlmsg(sockDiagByFamily, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, 5, make([]byte, 10))...) // bad
	dg = append(dg, nlmsg(sockDiagByFamily, unix.NLM_F_MULTI, 4, diagMsg(src, src, 99))...)                 // stale seq
	dg = append(dg, nlmsg(sockDiagByFamily, unix.NLM_F_MULTI, 5, diagMsg(src, src, 2))...)
	done, err := c.parseDatagram(dg, fn)
	if err != nil || done {
		t.Fatalf("parseDatagram = %v, %v", done, err)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("cookies %v, want [1 2]", got)
	}
	if c.BadMsgs != 1 || c.DumpIntr != 1 {
		t.Errorf("BadMsgs %d DumpIntr %d, want 1 1", c.BadMsgs, c.DumpIntr)
	}
	done, err = c.parseDatagram(nlmsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 5, make([]byte, 4)), fn)
	if !done || err != nil {
		t.Errorf("NLMSG_DONE: %v %v", done, err)
	}
	e := make([]byte, 20)
	errno := -int32(unix.EACCES)
	ne.PutUint32(e, uint32(errno))
	done, err = c.parseDatagram(nlmsg(unix.NLMSG_ERROR, 0, 5, e), fn)
	if !done || !errors.Is(err, unix.EACCES) {
		t.Errorf("NLMSG_ERROR: %v %v", done, err)
	}
	// A header claiming more bytes than the datagram has.
	trunc := nlmsg(sockDiagByFamily, 0, 5, diagMsg(src, src, 3))
	if _, err := c.parseDatagram(trunc[:50], fn); err == nil {
		t.Error("truncated datagram accepted")
	}
}

func TestCAState(t *testing.T) {
	for c := CAOpen; c <= CALoss; c++ {
		if got, ok := ParseCAState(c.String()); !ok || got != c {
			t.Errorf("round trip of %v", c)
		}
	}
	if CAState(9).String() != "unknown" {
		t.Error("unknown state name")
	}
}

// runBC interprets inet_diag bytecode as the kernel's inet_diag_bc_run does.
func runBC(t *testing.T, bc []byte, sport, dport uint16, cgroup uint64) bool {
	t.Helper()
	pc, n := 0, len(bc)
	for steps := 0; pc < n; steps++ {
		if steps > 100 || pc < 0 || pc+4 > n {
			t.Fatalf("bytecode runs wild at %d", pc)
		}
		code, yes, no := bc[pc], int(bc[pc+1]), int(ne.Uint16(bc[pc+2:]))
		var ok bool
		switch code {
		case bcJmp:
			ok = false
		case bcSEq:
			ok = sport == ne.Uint16(bc[pc+6:])
		case bcDEq:
			ok = dport == ne.Uint16(bc[pc+6:])
		case bcCgroupCond:
			ok = cgroup == ne.Uint64(bc[pc+4:])
		default:
			t.Fatalf("unknown op %d", code)
		}
		if ok {
			pc += yes
		} else {
			pc += no
		}
	}
	if pc != n && pc != n+4 {
		t.Fatalf("jump to %d in a %d-byte program", pc, n)
	}
	// The kernel's audit: every "no" target inside the program must be on
	// the chain of "yes" jumps from the start (valid_cc in inet_diag.c).
	onChain := map[int]bool{}
	for q := 0; q < n; q += int(bc[q+1]) {
		onChain[q] = true
		if bc[q+1] == 0 {
			t.Fatal("zero yes jump")
		}
	}
	for q := 0; q < n; q += int(bc[q+1]) {
		if no := q + int(ne.Uint16(bc[q+2:])); no < n && !onChain[no] {
			t.Fatalf("op at %d jumps to %d, not on the yes chain", q, no)
		}
	}
	return pc == n
}

func TestDiagFilterBytecode(t *testing.T) {
	if diagFilter(0, 0, 0, 0) != nil {
		t.Error("empty filter compiled to a program")
	}
	for _, tc := range []struct {
		lp, rp, ep uint16
		cg         uint64
		sport      uint16
		dport      uint16
		sockCg     uint64
		want       bool
	}{
		{lp: 80, sport: 80, dport: 1, want: true},
		{lp: 80, sport: 81, dport: 80, want: false},
		{rp: 443, sport: 1, dport: 443, want: true},
		{rp: 443, sport: 443, dport: 1, want: false},
		{ep: 5201, sport: 5201, dport: 9, want: true},
		{ep: 5201, sport: 9, dport: 5201, want: true},
		{ep: 5201, sport: 9, dport: 9, want: false},
		{lp: 1, rp: 2, sport: 1, dport: 2, want: true},
		{lp: 1, rp: 2, sport: 1, dport: 3, want: false},
		{ep: 7, cg: 99, sport: 7, sockCg: 99, want: true},
		{ep: 7, cg: 99, dport: 7, sockCg: 98, want: false},
		{cg: 99, sockCg: 99, want: true},
		{lp: 1, ep: 7, cg: 5, sport: 1, dport: 7, sockCg: 5, want: true},
		{lp: 1, ep: 7, cg: 5, sport: 1, dport: 8, sockCg: 5, want: false},
	} {
		bc := diagFilter(tc.lp, tc.rp, tc.ep, tc.cg)
		if got := runBC(t, bc, tc.sport, tc.dport, tc.sockCg); got != tc.want {
			t.Errorf("filter lp=%d rp=%d either=%d cg=%d on %d->%d cg %d: %v, want %v",
				tc.lp, tc.rp, tc.ep, tc.cg, tc.sport, tc.dport, tc.sockCg, got, tc.want)
		}
	}
}
