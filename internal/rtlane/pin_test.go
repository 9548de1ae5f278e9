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
	var traced atomic.Int64
	l := runLane(t, cfg, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithTrace(func(Event) { traced.Add(1) }))

	stopStress := gcStress(l)
	want := sendPinned(t, cfg.Socket, rx.Addr, clients, perClient)
	stopStress()
	if want == 0 {
		t.Fatalf("nothing admitted")
	}
	// Every admitted datagram leaves the queue, sent or reported, and is
	// traced twice (admission, release or drop); the releaser's trace
	// events follow its counters, after its pinned section.
	var st Snapshot
	n := 0
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		st, n = l.Stats(), int(traced.Load())
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

// gcStress runs stop-the-world collections again and again, takes the
// lane's lock from a normal goroutine, and makes garbage so collections
// also start on their own, until the returned function is called.
func gcStress(l *Lane) (stop func()) {
	var done atomic.Bool
	var bg sync.WaitGroup
	bg.Add(3)
	go func() {
		defer bg.Done()
		for !done.Load() {
			runtime.GC()
		}
	}()
	go func() {
		defer bg.Done()
		for !done.Load() {
			_ = l.Stats()
		}
	}()
	go func() {
		defer bg.Done()
		var keep [][]byte
		for !done.Load() {
			keep = append(keep, make([]byte, 4096))
			if len(keep) > 256 {
				keep = nil
			}
		}
	}()
	return func() { done.Store(true); bg.Wait() }
}

// sendPinned runs clients, each on a thread of its own as a realtime
// client has, sending perClient datagrams through the lane at socket to
// dst; it returns how many were admitted.
func sendPinned(t *testing.T, socket string, dst netip.AddrPort, clients, perClient int) int {
	var wg sync.WaitGroup
	admitted := make([]int, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			c, err := rtclient.Dial(socket)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for range perClient {
				res, err := c.SendWithin(uint32(i+1), dst, time.Second, []byte("pinned"))
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
	sum := 0
	for _, a := range admitted {
		sum += a
	}
	return sum
}
