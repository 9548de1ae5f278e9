// ownsocks_test.go: the daemon's own sockets (lanes_own_socks) do not
// make the foreground present. Real UDP sockets in the default lane
// (interactive) send a burst through the classifier of a shaped tree: an
// unmarked one stamps the interface's foreground present, one marked by
// OwnSocket does not, and after its release it does again.
package datapath

import (
	"errors"
	"net"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestOwnSocketsAreNoForeground(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	h, idx := openShapedHost(t, p, HostConfig{StateDir: testStateDir, Instance: "ownsocks", Yield: true}, 100_000_000)
	burst := func(mark bool) bool {
		t.Helper()
		var present bool
		p.A.Do(t, func() error {
			c, err := net.ListenUDP("udp", nil) // unconnected: B's port unreachable refuses no write
			if err != nil {
				return err
			}
			defer c.Close()
			if mark {
				release, err := h.Background.OwnSocket(c)
				if err != nil {
					return err
				}
				defer release()
			}
			for range 20 { // 20 packets within a few ms: over FG_MIN_PACKETS in one window
				if _, err := c.WriteToUDP(make([]byte, 100), &net.UDPAddr{IP: p.AddrB, Port: 9}); err != nil {
					return err
				}
			}
			present, _ = h.Background.Foreground(idx, Upload)
			return nil
		})
		return present
	}
	clear := func() {
		t.Helper()
		if err := h.cls.LanesFgActive.Delete(uint32(idx)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Fatal(err)
		}
	}
	clear()
	if burst(true) {
		t.Error("the daemon's own socket stamped the foreground present")
	}
	clear()
	if !burst(false) {
		t.Error("a foreground socket's burst did not stamp the foreground present")
	}
	clear()
	if burst(true) {
		t.Error("a second own socket stamped the foreground present")
	}
	var n int
	it := h.cls.LanesOwnSocks.Iterate()
	var k uint64
	var v uint8
	for it.Next(&k, &v) {
		n++
	}
	if n != 0 {
		t.Errorf("%d own sockets left marked after their release", n)
	}
}
