// fgrcv_test.go: a foreground download's receive side speaks for its harm
// (sock_ops fgrcv.h) only while a background download runs: alone, a
// foreground socket that only receives gives no sample and pays for no
// callback; beside a background download (rLEDBAT active) it marks its
// interface seen (lanes_fg_harm's seen, key 0: any interface), so a
// background download may share beside it instead of being held.
package datapath

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// startSource serves endless data to every connection to ip:port in ns.
func startSource(t *testing.T, ns *testutil.NetNS, ip net.IP, port int) string {
	t.Helper()
	var ln net.Listener
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	ns.Do(t, func() (err error) {
		ln, err = (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return addr
}

// seenWhileDownloading reads from a connection to addr in ns for d and
// returns whether seen said so at any of its looks (every 50 ms) while the
// download ran: a look at one instant can fall in a stall of a loaded VM.
// It looks before the close: the ACK of the connection's FIN is an RTT
// sample of its own (RTT_CB), so a look after the close would tell nothing
// about the receive side.
func seenWhileDownloading(t *testing.T, ns *testutil.NetNS, addr string, d time.Duration, seen func() bool) bool {
	t.Helper()
	c := dialCC(t, ns, addr, "cubic")
	done := make(chan int64)
	go func() { n, _ := io.Copy(io.Discard, c); done <- n }()
	got := false
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		got = got || seen()
	}
	c.Close()
	if n := <-done; n == 0 {
		t.Fatalf("the download from %s received nothing in %v", addr, d)
	}
	return got
}

func monoNow(t *testing.T) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

func TestForegroundDownloadSeenBesideBackgroundDownload(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	var h *Host
	p.A.Do(t, func() (err error) { h, err = OpenHost(HostConfig{Instance: "fgrcv", Yield: true}); return err })
	t.Cleanup(func() { h.Close() })
	if _, off := h.off[CapRLEDBAT]; h.ops == nil || off {
		t.Skipf("no sock_ops or no rLEDBAT in sock_ops here: %v", h.Capabilities())
	}
	bgAddr := startSource(t, p.B, p.AddrB, 9521)
	fgAddr := startSource(t, p.B, p.AddrB, 9522)
	dst, _ := netip.AddrFromSlice(p.AddrB)
	if err := h.Lanes.SetDstLane(DstRule{Prefix: netip.PrefixFrom(dst, dst.BitLen()), DPort: 9521}, lane.Background); err != nil {
		t.Fatal(err)
	}
	seen := func() bool {
		var hm yield.Harm
		return h.cls.LanesFgHarm.Lookup(uint32(0), &hm) == nil && hm.TCPSeen(monoNow(t))
	}

	if seenWhileDownloading(t, p.A, fgAddr, time.Second, seen) {
		t.Errorf("a foreground download alone marked its receive side seen (no background download to share)")
	}

	bg := dialCC(t, p.A, bgAddr, "cubic")
	bg.SetReadDeadline(time.Now().Add(4 * time.Second))
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, bg); close(done) }()
	t.Cleanup(func() { bg.Close(); <-done })
	time.Sleep(time.Second)
	if !seenWhileDownloading(t, p.A, fgAddr, time.Second, seen) {
		t.Errorf("a foreground download beside a background download did not mark its receive side seen")
	}
	hs, err := h.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sock_ops: %v", hs.Sockops)
}
