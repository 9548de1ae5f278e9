// workpace_test.go: an unprivileged caller pays for the work its requests
// cost the daemon, not one token a request.
package apiserver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/testutil"
)

// slowStatus is a handler whose status takes a fixed time, as a udp-flows
// page beside 19,000 sockets does.
type slowStatus struct {
	*handler
	took time.Duration
}

func (h slowStatus) Status() (*api.Status, error) {
	time.Sleep(h.took)
	return h.handler.Status()
}

// TestCostlyRequestsPacedByWork (audit N15, udp-flows): nobody's loop of
// udp-flows pages beside 19,000 UDP sockets held the daemon at 31.5-37.8 %
// of a core: each page cost the daemon tens of ms and the caller one
// token. Fix: a request costs, after it is handled, a token per workTime
// of its handling. The test sends 30 requests that take 10 ms each as
// nobody: at a token a request they went in 0.3 s; charged by work they
// must wait for their debt (only a slower machine makes them slower).
func TestCostlyRequestsPacedByWork(t *testing.T) {
	testutil.RequireRoot(t)
	const nobody, took, requests = 65534, 10 * time.Millisecond, 30
	path := filepath.Join(t.TempDir(), "lanes.sock")
	for dir := filepath.Dir(path); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
		os.Chmod(dir, 0o755) // t.TempDir is 0700: let nobody reach the socket
	}
	serve(t, path, slowStatus{&handler{}, took})
	var c *client.Client
	testutil.AsUser(t, nobody, nobody, nil, func() (err error) { c, err = client.Dial(path); return err })
	defer c.Close()
	t0 := time.Now()
	for range requests {
		if _, err := c.Status(); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(t0)
	// the tokens charged before the last request less the burst came back
	// at UserRate while the requests went
	tokens := (requests - 1) * (1 + float64(took)/float64(workTime))
	want := time.Duration((tokens - UserBurst) / UserRate * float64(time.Second))
	t.Logf("%d requests of %v each in %v (paced: at least %v)", requests, took, elapsed.Round(time.Millisecond), want.Round(time.Millisecond))
	if elapsed < want {
		t.Errorf("%d requests of %v each went in %v: not paced by their work (want at least %v)", requests, took, elapsed, want)
	}
}
