// dirqueue_test.go: the account's direction queues (lanes_fg_harm's
// dir_qd_*, BackgroundClass.DirectionQueue) follow a foreground upload's
// queue at a remote bottleneck, read at each of its ACKs while a
// background transfer is active (fgrcv.h's fg_ack_up), not once per round
// trip (RTT_CB), and leave the other direction's empty: the QUIC/UDP
// class takes that queue off its probes' round trip.
package datapath

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

func TestDirectionQueueFollowsAForegroundUpload(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewRoutedPath(t)
	// the upload's bottleneck: R toward B, 10 Mbit/s, 300 KB (240 ms)
	if out, err := p.R.Command("tc", "qdisc", "add", "dev", p.LinkRB, "root", "tbf", "rate", "10mbit", "burst", "15k", "limit", "300k").CombinedOutput(); err != nil {
		t.Fatalf("tbf: %v %s", err, out)
	}
	var h *Host
	p.A.Do(t, func() (err error) { h, err = OpenHost(HostConfig{Instance: "dirq", Yield: true}); return err })
	t.Cleanup(func() { h.Close() })
	if _, off := h.off[CapRLEDBAT]; h.ops == nil || off {
		t.Skipf("no sock_ops or no rLEDBAT in sock_ops here: %v", h.Capabilities())
	}
	var idx int
	p.A.Do(t, func() error {
		l, err := netlink.LinkByName(p.LinkA)
		if err == nil {
			idx = l.Attrs().Index
		}
		return err
	})
	_, addr := startSink(t, p.B, p.AddrB, 9531)
	c := dialCC(t, p.A, addr, "cubic")
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	// a background transfer is active (the class marks it at each step)
	var looks, queued, fresh, near int
	var most, mostDown, mostOwn time.Duration
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		h.Background.MarkBgActive()
		q, ok := h.Background.DirectionQueue(idx, Upload, 50*time.Millisecond)
		if d, okd := h.Background.DirectionQueue(idx, Download, time.Second); okd {
			mostDown = max(mostDown, d)
		}
		own := sockQueue(t, c)
		looks++
		mostOwn = max(mostOwn, own)
		if own < 100*time.Millisecond {
			continue
		}
		queued++
		if !ok {
			continue
		}
		fresh++
		most = max(most, q)
		if diff := q - own; diff > -own/4-20*time.Millisecond && diff < own/4+20*time.Millisecond {
			near++
		}
	}
	t.Logf("%d looks, %d with the upload's own queue over 100 ms (largest %v), %d of those a reading within 50 ms, %d near its own (±25 %% + 20 ms); "+
		"largest reading %v; the download direction's largest %v", looks, queued, mostOwn, fresh, near, most, mostDown)
	if queued < 20 {
		t.Fatalf("the upload's own queue stood over 100 ms at %d of %d looks: %s", queued, looks, dirqState(t, h, c, idx))
	}
	if fresh < queued/2 {
		t.Fatalf("%d of %d looks with a queue had a reading of the upload direction within 50 ms, want its ACKs read as they come: %s",
			fresh, queued, dirqState(t, h, c, idx))
	}
	if near < fresh/2 || most < 100*time.Millisecond {
		t.Errorf("the upload direction's queue %v at most, near the upload's own (RTT over its minimum) at %d of %d looks", most, near, fresh)
	}
	if mostDown > 30*time.Millisecond {
		t.Errorf("the download direction read %v with no queue that way", mostDown)
	}
}

// dirqState tells what the account and the upload's socket held when a
// reading was missing: the interface's harm entry (Seen: sock_ops' last
// foreground RTT sample; DirQueueAt: its last direction reading), the
// host's background-active stamp, the socket's congestion control and cwnd.
func dirqState(t *testing.T, h *Host, c *net.TCPConn, idx int) string {
	now := monotonicNS()
	age := func(at uint64) string {
		if at == 0 {
			return "never"
		}
		return time.Duration(now-at).String() + " ago"
	}
	var hm yield.Harm
	herr := h.cls.LanesFgHarm.Lookup(uint32(idx), &hm)
	var active uint64
	aerr := h.ops.LanesRlActive.Lookup(uint32(0), &active)
	ti := tcpInfoFull(t, c)
	var cc string
	if raw, err := c.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) { cc, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION) })
	}
	return fmt.Sprintf("harm entry (err %v): RTT sample %s, up reading %s, down reading %s; background active %s (err %v); "+
		"socket %s cwnd %d, rtt %v, min %v, state %d",
		herr, age(hm.Seen), age(hm.DirQueueAt[yield.Up]), age(hm.DirQueueAt[yield.Down]), age(active), aerr,
		cc, ti.Snd_cwnd, time.Duration(ti.Rtt)*time.Microsecond, time.Duration(ti.Min_rtt)*time.Microsecond, ti.Ca_state)
}

// sockQueue is c's smoothed RTT over its minimum (TCP_INFO).
func sockQueue(t *testing.T, c *net.TCPConn) time.Duration {
	t.Helper()
	ti := tcpInfoFull(t, c)
	return time.Duration(ti.Rtt-ti.Min_rtt) * time.Microsecond
}
