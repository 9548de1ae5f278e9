// account_shares_test.go: a background upload's share of the capacity
// estimate in status's account, against its class's bytes.
package daemon_test

import (
	"math"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestAccountSharesBackgroundUpload: a background upload alone (10 Mbit/s
// bottleneck past the router) reads in status's account as background's
// rate (the background class's bytes between two status calls) and its
// share of the upload capacity estimate, interactive's ~0.
func TestAccountSharesBackgroundUpload(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, uplinkBottleneck)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	bulk(t, p.A, base, lanesBin, "run", "--socket", sock, "--lane", "background", "--") // stopped at cleanup
	time.Sleep(3 * time.Second)
	st0, t0 := status(t, sock), time.Now()
	time.Sleep(1500 * time.Millisecond)
	st1, dt := status(t, sock), time.Since(t0).Seconds()
	if len(st1.Interfaces) == 0 || len(st1.Interfaces[0].Account) == 0 {
		t.Fatalf("no account in status: %+v", st1.Interfaces)
	}
	up := st1.Interfaces[0].Account[0]
	t.Logf("account up: capacity %.2f Mbit/s, shares %+v, why %q", float64(up.CapacityBps)/1e6, up.Shares, up.Why)
	if up.Dir != "up" || up.CapacityBps == 0 || len(up.Shares) != len(lane.All) || up.Why == "" {
		t.Fatalf("account up %+v: want a capacity estimate, a share per lane and why", up)
	}
	for _, s := range up.Shares {
		kernel := float64(laneBytesOf(st1, s.Lane)-laneBytesOf(st0, s.Lane)) * 8 / dt
		t.Logf("%s: %.2f Mbit/s, share %.4f; its class's bytes over the interval %.2f Mbit/s",
			s.Lane, float64(s.Bps)/1e6, s.Share, kernel/1e6)
		if math.Abs(float64(s.Bps)-kernel) > 0.15*kernel+50e3 {
			t.Errorf("%s: %.2f Mbit/s in the account, its class's bytes %.2f", s.Lane, float64(s.Bps)/1e6, kernel/1e6)
		}
		if want := float64(s.Bps) / float64(up.CapacityBps); math.Abs(s.Share-want) > 1e-9 {
			t.Errorf("%s: share %.4f, want its rate ÷ the estimate %.4f", s.Lane, s.Share, want)
		}
		if s.Lane == lane.Interactive && s.Bps > 50e3 {
			t.Errorf("interactive at %.2f Mbit/s beside a background upload alone, want ~0", float64(s.Bps)/1e6)
		}
		if s.Lane == lane.Background && s.Bps == 0 {
			t.Errorf("background at 0 while it uploads alone")
		}
	}
}

// laneBytesOf is lane l's bytes on st's first interface.
func laneBytesOf(st *api.Status, l lane.Lane) uint64 {
	for _, ls := range st.Interfaces[0].Lanes {
		if ls.Lane == l {
			return ls.Bytes
		}
	}
	return 0
}
