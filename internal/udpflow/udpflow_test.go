package udpflow

import (
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

func TestFromSock(t *testing.T) {
	s := tcpmon.Sock{Src: netip.MustParseAddrPort("[::ffff:10.0.0.1]:5000"), Dst: netip.MustParseAddrPort("10.0.0.2:443"),
		Cookie: 7, UID: 1000, Inode: 42, CgroupID: 9, RQueue: 10, WQueue: 20, NSKMem: 9}
	s.SKMem[8] = 3
	f := fromSock(&s)
	if f.Src != "10.0.0.1:5000" || f.Dst != "10.0.0.2:443" || !f.Connected() || f.Drops != 3 || f.Proto != "udp" || f.Cookie != 7 {
		t.Errorf("connected socket: %+v", f)
	}
	s.Dst = netip.AddrPortFrom(netip.IPv6Unspecified(), 0)
	f = fromSock(&s)
	if f.Connected() || f.Dst != "*:*" || f.State != "unconnected" || f.Peers() != "*:*" {
		t.Errorf("unconnected socket: %+v", f)
	}
	f.Remotes = []string{"10.0.0.2:4433"}
	if f.Peers() != "10.0.0.2:4433" {
		t.Errorf("peers of an unconnected socket with class-table remotes: %q", f.Peers())
	}
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	WriteTable(&b, []Flow{
		{Src: "10.0.0.1:5000", Dst: "*:*", Remotes: []string{"10.0.0.2:4433"}, State: "unconnected", Lane: lane.Background,
			Why: "cgroup x", BgClass: true, BgHeld: true, PID: 12, Comm: "quic"},
		{Src: "10.0.0.1:5001", Dst: "10.0.0.2:7", State: "connected", Lane: lane.Interactive, Why: "no rule", BgClass: false},
	})
	out := b.String()
	for _, want := range []string{"background  quic/12", "10.0.0.2:4433", "held", "cgroup x", "interactive -", "no rule"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestDumpAndOwners: a UDP socket of this process is in the dump with its
// cookie and inode, and FillOwners names this process.
func TestDumpAndOwners(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := raw.Control(func(fd uintptr) { err = syscall.Fstat(int(fd), &st) }); err != nil || st.Ino == 0 {
		t.Fatalf("fstat: %v", err)
	}
	flows, err := Dump()
	if err != nil {
		t.Fatal(err)
	}
	var mine []Flow
	for _, f := range flows {
		if f.Src == c.LocalAddr().String() {
			mine = append(mine, f)
		}
	}
	if len(mine) != 1 || mine[0].Inode != uint32(st.Ino) || mine[0].Cookie == 0 || mine[0].Connected() {
		t.Fatalf("our socket %s (inode %d) in the dump: %+v", c.LocalAddr(), st.Ino, mine)
	}
	FillOwners(mine, "/proc")
	if mine[0].PID != syscall.Getpid() || mine[0].Comm == "" {
		t.Errorf("owner: pid %d comm %q, want %d", mine[0].PID, mine[0].Comm, syscall.Getpid())
	}
}

// TestFillRates: a socket's rates are its counts' difference over the
// time between its two readings; a socket new in the second listing, or
// read at the same time (a reused listing), has none; counts that went
// back (its port's entry made again) give no rate that way; the lanes'
// sums leave the daemon's own sockets out.
func TestFillRates(t *testing.T) {
	prev := []Flow{
		{Cookie: 1, Lane: lane.Background, Sent: 1000, Received: 5000, CountedAt: 1e9},
		{Cookie: 2, Lane: lane.Interactive, Sent: 9000, Received: 0, CountedAt: 1e9},
		{Cookie: 4, Lane: lane.Interactive, Sent: 0, CountedAt: 1e9, Daemon: true},
	}
	cur := []Flow{
		{Cookie: 1, Lane: lane.Background, Sent: 2000, Received: 25000, CountedAt: 1.5e9},
		{Cookie: 2, Lane: lane.Interactive, Sent: 100, Received: 500, CountedAt: 1.5e9},
		{Cookie: 3, Lane: lane.Interactive, Sent: 700, CountedAt: 1.5e9},
		{Cookie: 4, Lane: lane.Interactive, Sent: 1e6, CountedAt: 1.5e9, Daemon: true},
	}
	FillRates(prev, cur)
	if f := cur[0]; f.UpBps != 16000 || f.DownBps != 320000 {
		t.Errorf("background socket: up %v, down %v bit/s; want 16000, 320000", f.UpBps, f.DownBps)
	}
	if f := cur[1]; f.UpBps != 0 || f.DownBps != 8000 {
		t.Errorf("socket whose sent count went back: up %v, down %v; want 0, 8000", f.UpBps, f.DownBps)
	}
	if f := cur[2]; f.UpBps != 0 || f.DownBps != 0 {
		t.Errorf("new socket: up %v, down %v; want none", f.UpBps, f.DownBps)
	}
	again := append([]Flow(nil), cur...)
	FillRates(cur, again) // a reused listing: the same CountedAt
	if again[0].UpBps != cur[0].UpBps {
		t.Errorf("a reused listing changed the rate: %v, was %v", again[0].UpBps, cur[0].UpBps)
	}
	by := LaneRates(cur)
	if r := by[lane.Interactive]; r.Flows != 2 || r.UpBps != 0 || r.DownBps != 8000 {
		t.Errorf("interactive: %+v; want 2 flows (the daemon's left out), down 8000", r)
	}
}
