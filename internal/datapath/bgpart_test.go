// bgpart_test.go: the harm test's background part (sock_ops bgpart.h,
// HostConfig.HarmPart): a background upload's bytes in flight beyond the
// hold's window are summed on its interface (lanes_bg_part, key 0: every
// interface) while it sends, and taken back when it closes, so a
// foreground's delay is judged against what holding the background would
// take away.
package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

func TestBackgroundPartCounted(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	var h *Host
	p.A.Do(t, func() (err error) {
		h, err = OpenHost(HostConfig{Instance: "bgpart", Yield: true, HarmPart: true})
		return err
	})
	t.Cleanup(func() { h.Close() })
	if h.ops == nil {
		t.Skipf("no sock_ops here: %v", h.Capabilities())
	}
	_, addr := startSink(t, p.B, p.AddrB, 9531)
	dst, _ := netip.AddrFromSlice(p.AddrB)
	if err := h.SetDstLane(DstRule{Prefix: netip.PrefixFrom(dst, dst.BitLen()), DPort: 9531}, lane.Background); err != nil {
		t.Fatal(err)
	}
	part := func() yield.Part {
		var v yield.Part
		if err := h.ops.LanesBgPart.Lookup(uint32(0), &v); err != nil {
			return yield.Part{}
		}
		return v
	}

	c := dialCC(t, p.A, addr, "cubic")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write(buf)
		}
	}()
	var most int64
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		most = max(most, part().Bytes)
	}
	close(stop)
	<-done
	c.Close()
	if most <= 0 {
		t.Errorf("a background upload counted no bytes beyond the hold's window on its interface (largest %d)", most)
	}
	var left int64 = -1
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if left = part().Bytes; left == 0 {
			break
		}
	}
	if left != 0 {
		t.Errorf("the closed background upload left %d bytes counted (want 0)", left)
	}
	t.Logf("background part: largest %d bytes while sending, %d after the close", most, left)
}
