// account_shares_test.go: a background upload's share of the capacity
// estimate in status's account, against its class's bytes, and the
// download estimate against the interface's arrivals.
package daemon_test

import (
	"encoding/json"
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
// share of the upload capacity estimate, interactive's ~0; the estimate
// is the bottleneck's rate.
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
	// the estimate is the link's, not a token bucket's burst at the
	// device's speed (it read 3.6 Gbit/s here from the kernel's last
	// rate sample; the background upload alone fills most of the link)
	if c := float64(up.CapacityBps); c < remoteLinkBps/2 || c > 2*remoteLinkBps {
		t.Errorf("upload capacity estimate %.2f Mbit/s past a %.0f Mbit/s bottleneck", c/1e6, remoteLinkBps/1e6)
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

// TestAccountDownloadEstimate: a download through a 10 Mbit/s bottleneck
// toward the device gives the down direction a capacity estimate at
// least its arrivals' mean rate over the same status calls (the
// interface's own rx counter), the estimate being their largest.
func TestAccountDownloadEstimate(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, downlinkBottleneck)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	start(t, p.A, "lab", "helper", "get", "--url", base, "--bytes", "2000000000") // stopped at cleanup
	time.Sleep(time.Second)
	name := status(t, sock).Interfaces[0].Name
	rx0, t0 := rxBytes(t, p.A, name), time.Now()
	var st *api.Status
	for range 5 {
		time.Sleep(600 * time.Millisecond)
		st = status(t, sock)
	}
	mean := float64(rxBytes(t, p.A, name)-rx0) * 8 / time.Since(t0).Seconds()
	acct := st.Interfaces[0].Account
	if len(acct) != 2 || acct[1].Dir != "down" {
		t.Fatalf("account %+v: want up and down", acct)
	}
	est := float64(acct[1].CapacityBps)
	t.Logf("down estimate %.2f Mbit/s, arrivals' mean over the calls %.2f Mbit/s (the bottleneck %.0f)",
		est/1e6, mean/1e6, remoteLinkBps/1e6)
	if mean < 1e6 {
		t.Fatalf("the download arrived at %.2f Mbit/s, want it running", mean/1e6)
	}
	if est < 0.9*mean {
		t.Errorf("down estimate %.2f Mbit/s below the arrivals' mean %.2f", est/1e6, mean/1e6)
	}
}

// rxBytes is interface name's received bytes in ns (ip -s link).
func rxBytes(t *testing.T, ns *testutil.NetNS, name string) uint64 {
	t.Helper()
	out, err := ns.Command("ip", "-j", "-s", "link", "show", "dev", name).Output()
	var links []struct {
		Stats struct {
			RX struct {
				Bytes uint64 `json:"bytes"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err != nil || json.Unmarshal(out, &links) != nil || len(links) != 1 {
		t.Fatalf("ip -s link show dev %s: %v %s", name, err, out)
	}
	return links[0].Stats.RX.Bytes
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

// TestAccountUploadEstimateFromQUIC: a QUIC upload alone in background (no
// TCP socket measures the link) gives the account's up direction the
// QUIC/UDP class's measured link as its capacity estimate (before, none:
// 0), and background's share of it.
func TestAccountUploadEstimateFromQUIC(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, _ := remotePath(t, uplinkBottleneck)
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	startQUICBulk(t, p, "up", lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	time.Sleep(3 * time.Second) // the class's first measurements
	var up api.LinkAccount
	for start := time.Now(); time.Since(start) < testutil.Patience(10*time.Second); time.Sleep(500 * time.Millisecond) {
		st := status(t, sock)
		if len(st.Interfaces) > 0 && len(st.Interfaces[0].Account) > 0 {
			if up = st.Interfaces[0].Account[0]; up.CapacityBps != 0 {
				break
			}
		}
	}
	t.Logf("account up beside a QUIC upload alone: capacity %.2f Mbit/s, shares %+v, why %q",
		float64(up.CapacityBps)/1e6, up.Shares, up.Why)
	if c := float64(up.CapacityBps); c < remoteLinkBps/2 || c > 2*remoteLinkBps {
		t.Errorf("upload capacity estimate %.2f Mbit/s past a %.0f Mbit/s bottleneck, want the class's measured link", c/1e6, remoteLinkBps/1e6)
	}
}
