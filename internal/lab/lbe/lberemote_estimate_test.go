// lberemote_estimate_test.go: the account's upload capacity estimate on a
// bed with a round trip (20 ms one way), beside page loads whose download
// queue bunches a background upload's ACKs.
package lbe

import (
	"context"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/testutil"
)

// estimateLinkBps is the bed's fixed link, both ways.
const estimateLinkBps = 10e6

// TestRemoteUploadEstimateBesidePageLoads: a background upload beside
// page loads (12 GETs of 20-200 KB every 3 s) on a 10 Mbit/s link, 20 ms
// one way, 500 ms of buffer. Its ACKs wait behind the pages' download
// queue and arrive bunched as it drains; timed by their arrival alone
// (--rate-by-acks, the lab's full-ratebyacks) the estimate read 13.5 and
// 16.4 Mbit/s. Judged: the largest estimate over 3 pages within 1.25 of
// the link; the paired rule's printed, not judged.
func TestRemoteUploadEstimateBesidePageLoads(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	lanes := labtest.LanesBinary(t)
	for _, c := range []struct {
		method string
		judged bool
	}{{"full-ratebyacks", false}, {"full", true}} {
		most := uploadEstimateBesidePages(t, lanes, c.method)
		t.Logf("%s: upload capacity estimate beside page loads at most %.2f Mbit/s, %.2f of the link's %.0f",
			c.method, most/1e6, most/estimateLinkBps, estimateLinkBps/1e6)
		if c.judged && (most > 1.25*estimateLinkBps || most < estimateLinkBps/2) {
			t.Errorf("%s: upload capacity estimate at most %.2f Mbit/s on a %.0f Mbit/s link, want within 1.25",
				c.method, most/1e6, estimateLinkBps/1e6)
		}
	}
}

// uploadEstimateBesidePages runs one bed of method and returns the
// largest upload capacity estimate its daemon's status gave.
func uploadEstimateBesidePages(t *testing.T, lanes, method string) float64 {
	t.Helper()
	c := &RemoteConfig{FixedRate: estimateLinkBps, Delay: 20 * time.Millisecond, QueueTime: 500 * time.Millisecond,
		CC: "cubic", Lanes: lanes, Seed: 7}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rb, err := newRemoteBed(ctx, labtest.TestEnv(t), c, "fixed", remoteCase{Method: RemoteMethods[methodIndex(method)], Transport: TransportTCP})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.bed.Close()
	if _, err := rb.startBG("upload", rb.bg, true); err != nil {
		t.Fatal(err)
	}
	if err := testbed.SleepCtx(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	stop, err := rb.startBurstyFG(ctx, SteadyPageLoad, "upload", 0, &RemoteSteady{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var most float64
	for end := time.Now().Add(9 * time.Second); time.Now().Before(end); {
		if bps, ok := upEstimate(rb.sock); ok {
			most = max(most, bps)
		}
		if err := testbed.SleepCtx(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	return most
}

// upEstimate is the upload capacity estimate of the daemon at sock's
// first interface, bit/s.
func upEstimate(sock string) (float64, bool) {
	c, err := client.Dial(sock)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil || len(st.Interfaces) == 0 || len(st.Interfaces[0].Account) == 0 {
		return 0, false
	}
	return float64(st.Interfaces[0].Account[0].CapacityBps), true
}
