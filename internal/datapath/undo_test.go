// undo_test.go checks that LEDBAT++ gives back the window a loss took when
// the kernel finds the loss spurious: a background upload whose ACKs wait
// in the other direction's queue past its RTO (a page load's download)
// resumes at its window, not at one packet.
package datapath

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// the other direction: a TBF at ackPathBps on the receiver's egress, and a
// burst that queues ackStallBytes in it (ackStallBytes*8/ackPathBps = 450
// ms, past the RTO's 200 ms floor)
const (
	ackPathBps    = 10_000_000
	ackStallBytes = 562_500
	tcpCALoss     = 4 // include/net/tcp.h's TCP_CA_Loss
)

// TestBackgroundWindowBackAfterSpuriousRTO: a background upload (LEDBAT++)
// over a veth pair whose ACKs then wait 450 ms behind a UDP burst in the
// receiver's egress queue. Its RTO fires, and the ACKs that come show the
// kernel it was spurious (F-RTO: TcpExt TCPSpuriousRTOs). Judged:
// the window when the socket leaves the Loss state is at least half the
// window before the burst. The rule it replaced (no undo, --no-undo) left
// it at 2 to 6 packets: printed, not judged.
func TestBackgroundWindowBackAfterSpuriousRTO(t *testing.T) {
	for _, c := range []struct {
		name   string
		noUndo bool
	}{{"no-undo", true}, {"undo", false}} {
		t.Run(c.name, func(t *testing.T) {
			before, after, undone := windowAcrossSpuriousRTO(t, c.noUndo)
			t.Logf("cwnd %d before the ACKs' wait, %d when the Loss state ended; undone RTOs %d", before, after, undone)
			if undone == 0 {
				t.Fatal("the kernel found no RTO spurious (TCPSpuriousRTOs, TCPLossUndo): the set-up made none")
			}
			if !c.noUndo && after < before/2 {
				t.Errorf("cwnd %d after a spurious RTO, %d before: want at least half given back", after, before)
			}
		})
	}
}

// windowAcrossSpuriousRTO runs one background upload through the ACKs'
// wait and returns its cwnd before the wait, when the Loss state ended, and
// how many RTOs the kernel undid meanwhile.
func windowAcrossSpuriousRTO(t *testing.T, noUndo bool) (before, after uint32, undone int64) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openBackgroundCC(t, p.A, p.LinkA, experiments.Set{NoUndo: noUndo})
	if err := h.Lanes.SetUIDLane(0, lane.Background); err != nil {
		t.Fatal(err)
	}
	// a present foreground: LEDBAT++ defers its periodic slowdowns, which
	// would otherwise set the window to 2 at the first ACK after the wait;
	// told, not harmed (an untold one lets the background's own delay, a
	// loaded machine's backlog, hold it at 2); and no timestamps, so that
	// LEDBAT++ does not scale the window by the other direction's queue
	// either (ledbat_keep_rate): F-RTO tells the RTO spurious without them
	t.Cleanup(toldForeground(h, idx))
	p.A.Do(t, func() error { return os.WriteFile("/proc/sys/net/ipv4/tcp_timestamps", []byte("0"), 0o644) })
	shapeEgress(t, p.B, p.LinkB, ackPathBps)
	_, toB := startSink(t, p.B, p.AddrB, 5301)
	up := dialCC(t, p.A, toB, "cubic")
	startWriting(t, up)
	if took, cw := waitCwnd(t, up, 10*time.Second, func(cw uint32) bool { return cw > 16 }); cw <= 16 {
		t.Fatalf("background upload: cwnd %d after %v, want > 16", cw, took)
	}
	if _, cc := tcpInfo(t, up); cc != h.bg.Name {
		t.Fatalf("background upload runs %q, want LEDBAT++ (%s)", cc, h.bg.Name)
	}
	undo0 := undoneRTOs(t, p.A)
	before = tcpInfoFull(t, up).Snd_cwnd
	udpBurst(t, p.B, p.AddrA, ackStallBytes)
	after = cwndLeavingLoss(t, up, 3*time.Second)
	return before, after, undoneRTOs(t, p.A) - undo0
}

// openBackgroundCC opens a datapath in ns with LEDBAT++ for background
// sockets, the yield on, and an egress on link, whose index it returns;
// skipped where LEDBAT++ or sock_ops cannot run.
func openBackgroundCC(t *testing.T, ns *testutil.NetNS, link string, exp experiments.Set) (*Host, uint32) {
	var h *Host
	var idx uint32
	ns.Do(t, func() (err error) {
		if h, err = OpenHost(HostConfig{StateDir: testStateDir, Instance: "und", Yield: true, Experiments: exp}); err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		e, err := OpenEgress(h, EgressConfig{Interface: link})
		if err != nil {
			return err
		}
		t.Cleanup(func() { e.Close() })
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		idx = uint32(l.Attrs().Index)
		return nil
	})
	if h.ops == nil || h.bg == nil {
		t.Skipf("degraded: no sock_ops or no LEDBAT++ here: %v", h.Capabilities())
	}
	return h, idx
}

// toldForeground keeps idx's (and key 0's) foreground present and told
// (a foreground TCP sample, not harmed) until the returned stop.
func toldForeground(h *Host, idx uint32) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			now := monotonicNS()
			for _, k := range []uint32{idx, 0} {
				_ = h.cls.LanesFgActive.Put(k, yield.Window{Start: now, Active: now, Since: now, Episodes: 1, Packets: 5})
				_ = h.cls.LanesFgHarm.Put(k, yield.Harm{Seen: now})
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-ended }
}

// shapeEgress puts a TBF of bps with a deep queue at link's root in ns.
func shapeEgress(t *testing.T, ns *testutil.NetNS, link string, bps uint64) {
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		rate := bps / 8
		return netlink.QdiscAdd(&netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index,
			Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate: rate, Limit: 2 << 20, Buffer: netlink.Xmittime(rate, 3000)})
	})
}

// udpBurst sends n bytes of UDP datagrams from ns to ip at once.
func udpBurst(t *testing.T, ns *testutil.NetNS, ip net.IP, n int) {
	ns.Do(t, func() error {
		c, err := net.ListenUDP("udp", nil)
		if err != nil {
			return err
		}
		defer c.Close()
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
		}); err != nil {
			return err
		}
		if serr != nil {
			return serr
		}
		buf, to := make([]byte, 1400), &net.UDPAddr{IP: ip, Port: 9}
		for sent := 0; sent < n; sent += len(buf) {
			if _, err := c.WriteToUDP(buf, to); err != nil {
				return err
			}
		}
		return nil
	})
}

// cwndLeavingLoss polls c until it has entered and left the Loss state
// (an RTO) and returns its cwnd then; 0 when it did not within d.
func cwndLeavingLoss(t *testing.T, c *net.TCPConn, d time.Duration) uint32 {
	lost := false
	for start := time.Now(); time.Since(start) < d; time.Sleep(time.Millisecond) {
		ti := tcpInfoFull(t, c)
		if ti.Ca_state == tcpCALoss {
			lost = true
		} else if lost {
			return ti.Snd_cwnd
		}
	}
	return 0
}

// undoneRTOs is ns's count of RTOs the kernel found spurious and undid
// (TcpExt TCPSpuriousRTOs, by F-RTO, and TCPLossUndo, by timestamps or
// DSACKs).
func undoneRTOs(t *testing.T, ns *testutil.NetNS) int64 {
	var n int64
	ns.Do(t, func() error {
		b, err := os.ReadFile("/proc/thread-self/net/netstat")
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i+1 < len(lines); i += 2 {
			names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if len(names) == 0 || names[0] != "TcpExt:" || len(vals) != len(names) {
				continue
			}
			for k, name := range names {
				if name == "TCPSpuriousRTOs" || name == "TCPLossUndo" {
					v, _ := strconv.ParseInt(vals[k], 10, 64)
					n += v
				}
			}
		}
		return nil
	})
	return n
}
