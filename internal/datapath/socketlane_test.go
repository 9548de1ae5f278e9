// socketlane_test.go: a socket's lane by cookie, and that restoring one
// never brings back the entry of a socket that closed.
package datapath

import (
	"testing"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestRestoreSocketLaneOnlyWhileOpen(t *testing.T) {
	requireCgroup2(t)
	ns := testutil.NewNetNS(t)
	var h *Host
	ns.Do(t, func() (err error) { h, err = OpenHost(HostConfig{Instance: "restore"}); return err })
	defer h.Close()
	const live, closed = 4242, 4343
	if err := h.Lanes.SetSocketLane(live, lane.Background); err != nil {
		t.Fatal(err)
	}
	// closed: sock_ops removed its entry at TCP_CLOSE; the registration
	// that had moved it is swept later and restores its earlier lane
	for _, c := range []uint64{live, closed} {
		if err := h.Lanes.RestoreSocketLane(c, lane.Realtime); err != nil {
			t.Fatal(err)
		}
	}
	if l, ok := h.Lanes.SocketLane(live); !ok || l != lane.Realtime {
		t.Errorf("open socket: lane %v (%v), want realtime", l, ok)
	}
	if l, ok := h.Lanes.SocketLane(closed); ok {
		t.Errorf("closed socket got an entry back: %v", l)
	}
}
