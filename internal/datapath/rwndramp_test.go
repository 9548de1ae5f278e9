// rwndramp_test.go checks how a lowered downlink cap reaches a sender that
// its window holds: the right edge the receiver offers keeps advancing,
// at the new cap's share of each byte received (rwndcap.h, rwnd_ramp),
// instead of standing (but for rounding) until the data offered under the
// old cap has arrived, which held the sender back and squeezed its next
// window into part of the RTT.
package datapath

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/testutil"
)

// edgeSample is the sender's view of the receiver's right edge: bytes
// acknowledged and the window offered beyond them.
type edgeSample struct {
	at          time.Time
	acked, edge uint64
}

// watchEdge samples the sender's TCP_INFO every 500 µs until stop is closed;
// it returns once the first sample is taken.
func watchEdge(t *testing.T, dl *download, stop <-chan struct{}) func() []edgeSample {
	t.Helper()
	raw, err := dl.snd.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []edgeSample
	done, first := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			raw.Control(func(fd uintptr) {
				if ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
					mu.Lock()
					got = append(got, edgeSample{time.Now(), ti.Bytes_acked, ti.Bytes_acked + uint64(ti.Snd_wnd)})
					if len(got) == 1 {
						close(first)
					}
					mu.Unlock()
				}
			})
		}
	}()
	select { // the first sample, before the caller changes anything
	case <-first:
	case <-time.After(testutil.Patience(time.Second)):
		t.Fatal("no TCP_INFO sample in 1 s")
	}
	return func() []edgeSample {
		<-done
		return got
	}
}

// shapeLink puts a tbf of rate bytes/s with a deep queue on link, so that
// a sender there holds its window in that queue (an RTT of window / rate).
func shapeLink(t *testing.T, ns *testutil.NetNS, link string, rate uint64) {
	t.Helper()
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		return netlink.QdiscAdd(&netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index,
			Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate: rate, Limit: 4 << 20, Buffer: netlink.Xmittime(rate, 3028)})
	})
}

// keepSending writes on dl's sender until stop is closed.
func keepSending(dl *download, stop <-chan struct{}) {
	buf := make([]byte, 64<<10)
	for {
		select {
		case <-stop:
			return
		default:
		}
		dl.snd.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		dl.snd.Write(buf)
	}
}

func TestDownlinkCapLoweredKeepsEdgeMoving(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	if err := sockops.HaveWindowClamp(); err != nil {
		t.Skipf("downlink caps need sock_ops TCP_WINDOW_CLAMP: %v", err)
	}
	const rate = 1 << 20 // bytes/s: a 256 KB window is 250 ms of the sender's queue
	shapeLink(t, p.B, p.LinkB, rate)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "dlr"})
	if err := d.Caps.SetDownlinkCaps(true); err != nil {
		t.Fatal(err)
	}
	dl := newDownload(t, p, "9302")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); keepSending(dl, stop) }()
	t.Cleanup(func() { close(stop); wg.Wait() })

	const old, lowered = 256 << 10, 192 << 10
	if err := d.Caps.SetSocketRwndCap(dl.cookie, old); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the sender fills the old cap, a few rounds
	watchStop := make(chan struct{})
	samples := watchEdge(t, dl, watchStop)
	time.Sleep(20 * time.Millisecond)
	lowerAt := time.Now()
	if err := d.Caps.SetSocketRwndCap(dl.cookie, lowered); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // more than one window of 256 KB at 1 MB/s
	close(watchStop)
	got := samples()
	if len(got) < 2 || !got[0].at.Before(lowerAt) {
		t.Fatalf("%d TCP_INFO samples, none before the cap was lowered", len(got))
	}
	if len(got) < 100 { // 1,200 natively (every 0.5 ms); 55 under aarch64 TCG on a loaded host
		testutil.TimingErrorf(t, "only %d TCP_INFO samples in %v: the edge's figure below is coarse", len(got), got[len(got)-1].at.Sub(got[0].at))
	}
	moved, at := edgeMoved(got, lowerAt, (old-lowered)*3/4)
	if testing.Verbose() && os.Getenv("LANES_EDGE_DUMP") != "" {
		for _, s := range got {
			t.Logf("%6.1f ms acked %d window %d edge %d", float64(s.at.Sub(lowerAt).Microseconds())/1000, s.acked, s.edge-s.acked, s.edge)
		}
	}
	t.Logf("cap %d -> %d bytes: the sender's right edge moved %d bytes while %d bytes were acknowledged (%d samples)",
		old, lowered, moved, at, len(got))
	// the ramp lets the edge advance lowered/old = 3/4 of each byte
	// received; at least half is asked for (the rounding up to whole
	// units of the window scale alone moved it 0.2-0.3 of each byte)
	if at == 0 || moved < at/2 {
		t.Errorf("the right edge moved %d bytes over %d bytes received after the cap was lowered: the sender was held back", moved, at)
	}
}

// edgeMoved is how far the right edge moved past the last sample before
// the cap was lowered at t, over the samples within upTo bytes acknowledged
// since (while the data offered under the old cap was still arriving: an
// edge held until then moves only by the kernel's rounding of each window
// up to whole units of the window scale), and the bytes acknowledged when
// it moved furthest.
func edgeMoved(got []edgeSample, t time.Time, upTo uint64) (moved, at uint64) {
	base := got[0]
	for _, s := range got {
		if s.at.After(t) {
			break
		}
		base = s
	}
	for _, s := range got {
		if !s.at.After(t) || s.acked < base.acked || s.acked-base.acked > upTo {
			continue
		}
		if s.edge > base.edge && s.edge-base.edge > moved {
			moved, at = s.edge-base.edge, s.acked-base.acked
		}
	}
	return moved, at
}
