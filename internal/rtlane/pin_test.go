// pin_test.go: the pinned sections (pin.go) against everything of the
// runtime that must still get through: stop-the-world collections while
// readers and the releaser send, normal goroutines holding the lane's
// SpinLock meanwhile, and trace hooks that take a Go mutex.
package rtlane

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/rtclient"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestPinnedPathUnderStopTheWorld runs pinnedPathGC in a child process, so
// that a deadlock (a stop-the-world waiting for a pinned thread that waits
// for it) fails the test instead of hanging it: the child is killed after
// 3 minutes.
func TestPinnedPathUnderStopTheWorld(t *testing.T) {
	if os.Getenv("LANES_PIN_CHILD") != "" {
		pinnedPathGC(t)
		return
	}
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestPinnedPathUnderStopTheWorld$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LANES_PIN_CHILD="+socketDir(t))
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Errorf("%v (killed after 3 minutes if it hung)\n%s", err, out)
	}
}

// pinnedPathGC: two granted clients send datagrams through the lane (one
// with direct release, so both the readers and the releaser send) while
// other goroutines force collections, read the lane's counters (its
// SpinLock, from normal goroutines) and allocate; a trace hook takes a
// sync.Mutex. Every datagram must be answered and accounted for. On
// loopback in this namespace (no namespaces a killed child would leave).
func pinnedPathGC(t *testing.T) {
	const clients, perClient = 2, 2000
	rx, err := ListenReceiver(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close() // not read: what overflows its buffer is dropped there, after the lane's send
	cfg := DefaultConfig()
	cfg.Enabled, cfg.Rate = true, 1_000_000_000
	cfg.Socket = filepath.Join(os.Getenv("LANES_PIN_CHILD"), "rt.sock")
	var traceMu sync.Mutex
	var traced int
	l := runLane(t, cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithTrace(func(Event) {
		traceMu.Lock()
		traced++
		traceMu.Unlock()
	}))

	var stop atomic.Bool
	var bg sync.WaitGroup
	bg.Add(3)
	go func() { // stop-the-world, again and again
		defer bg.Done()
		for !stop.Load() {
			runtime.GC()
		}
	}()
	go func() { // the lane's lock from a normal goroutine
		defer bg.Done()
		for !stop.Load() {
			_ = l.Stats()
		}
	}()
	go func() { // garbage, so collections also start on their own
		defer bg.Done()
		var keep [][]byte
		for !stop.Load() {
			keep = append(keep, make([]byte, 4096))
			if len(keep) > 256 {
				keep = nil
			}
		}
	}()

	var wg sync.WaitGroup
	admitted := make([]int, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread of its own, as a realtime client has
			c, err := rtclient.Dial(cfg.Socket)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for range perClient {
				res, err := c.SendWithin(uint32(i+1), rx.Addr, time.Second, []byte("pinned"))
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				if res.Admitted {
					admitted[i]++
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	bg.Wait()

	want := admitted[0] + admitted[1]
	if want == 0 {
		t.Fatalf("nothing admitted")
	}
	// Every admitted datagram leaves the queue, sent or reported, and is
	// traced twice (admission, release or drop); the releaser's trace
	// events follow its counters, after its pinned section.
	var st Snapshot
	n := 0
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		st = l.Stats()
		traceMu.Lock()
		n = traced
		traceMu.Unlock()
		if st.Depth == 0 && int(st.Totals.Sent+st.Totals.DroppedLate+st.Totals.SendErrors) == want && n >= 2*want {
			break
		}
	}
	if got := st.Totals.Sent + st.Totals.DroppedLate + st.Totals.SendErrors; int(got) != want || st.Totals.Admitted != uint64(want) {
		t.Errorf("admitted %d (lane: %d), left the queue %d (%+v)", want, st.Totals.Admitted, got, st.Totals)
	}
	if n < 2*want {
		t.Errorf("%d trace events for %d admitted datagrams, want admission and release of each", n, want)
	}
}
