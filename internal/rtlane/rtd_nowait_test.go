// rtd_nowait_test.go: lanes-rtd never waits for room in a socket: a full
// one fails that datagram and the loop goes on serving every client.
package rtlane

import (
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/rtlane/wire"
	"github.com/lanes-net/lanes/internal/testutil"
)

// slowLink puts an HTB qdisc of bps on the bed's sending device, so that
// what lanes-rtd sends stays charged to its socket for a while.
func (b *bed) slowLink(t *testing.T, bps uint64) {
	t.Helper()
	b.p.A.Do(t, func() error {
		link, err := netlink.LinkByName(b.p.LinkA)
		if err != nil {
			return err
		}
		idx := link.Attrs().Index
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
		q.Defcls = 1
		if err := netlink.QdiscAdd(q); err != nil {
			return err
		}
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: netlink.MakeHandle(1, 0), Handle: netlink.MakeHandle(1, 1)},
			netlink.HtbClassAttrs{Rate: bps, Ceil: bps})
		return netlink.ClassAdd(c)
	}) // removed with the bed's namespace
}

// TestFullSocketNeverWaits: the lane's own sockets sent with SO_SNDTIMEO
// 2 ms, so lanes-rtd, at real-time priority, slept up to 2 ms per datagram
// whenever a socket's buffer was full, and every client's next reply
// waited behind it. Fix: every send is MSG_DONTWAIT (lane.c, send_nowait);
// a full socket fails that datagram (a send-error notice, counted as
// helper.send_full) and the loop goes on. Here the link holds what is
// sent (HTB at 100 kbit/s) and the lane's sockets have the smallest
// buffer: after the first few datagrams every send finds its socket full.
// Judged: the socket was found full, its datagrams reported as send
// errors, and root's reply p50 stays below 1 ms (a wait per send makes
// every reply 2 ms or more; 50-100 µs without at load 4 on 2 CPUs).
func TestFullSocketNeverWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	b.slowLink(t, 100_000)
	for _, fd := range b.lane.tx[0] {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 1); err != nil {
			t.Fatal(err)
		}
	}
	dst := netip.MustParseAddrPort(b.rx.Addr.String())
	root, err := dialAs(t, b.cfg.Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	var lat []time.Duration
	notices := map[string]int{}
	for seq := uint32(1); seq <= n; seq++ {
		t0 := time.Now()
		if err := unix.Sendmsg(root.fd, wire.AppendRequest(nil, &wire.Request{Type: wire.TypeSend, Flags: wire.FlagRelative,
			Flow: 1, Seq: seq, Deadline: 1_000_000, Dst: dst, Payload: make([]byte, 1000)}), nil, nil, unix.MSG_NOSIGNAL); err != nil {
			t.Fatal(err)
		}
		for {
			rep, err := root.read()
			if err != nil {
				t.Fatal(err)
			}
			if rep.Type == wire.TypeDropped {
				notices[wire.ReasonString(rep.Reason)]++
				continue
			}
			if rep.Type != wire.TypeAdmit || rep.Seq != seq {
				t.Fatalf("send %d: reply %#x seq %d %s", seq, rep.Type, rep.Seq, wire.ReasonString(rep.Reason))
			}
			lat = append(lat, time.Since(t0))
			break
		}
	}
	root.sync()
	h := b.lane.Stats().Helper
	if h == nil {
		t.Fatal("no lanes-rtd figures in the stats")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("%d sends into a full socket: send_full %d, notices %v; root's reply p50/p99 %v / %v",
		n, h.SendFull, notices, p50.Round(time.Microsecond), p99.Round(time.Microsecond))
	if h.SendFull == 0 || notices["send-error"] == 0 {
		t.Fatalf("the socket was never found full (send_full %d, notices %v): the test's link did not hold", h.SendFull, notices)
	}
	if p50 >= time.Millisecond {
		testutil.TimingErrorf(t, "root's reply p50 %v with the lane's socket full: lanes-rtd waits for room", p50)
	}
}
