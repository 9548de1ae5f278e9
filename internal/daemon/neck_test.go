// neck_test.go: the test path's bottleneck as its root qdisc counts it
// (R's TBF on a remote path, A's shaper on a shaped one): what it sent,
// dropped and held while a measurement ran. A traffic test logs it beside
// its figures, so that a probe's delay reads against what the emulated
// link did: on a loaded machine a late qdisc watchdog loses the link's
// tokens, and the link carries less than its rate with a queue standing.
package daemon_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// neckCount is one reading of the bottleneck's root qdisc.
type neckCount struct {
	Root    bool   `json:"root"`
	Bytes   uint64 `json:"bytes"`
	Drops   uint64 `json:"drops"`
	Backlog uint64 `json:"backlog"`
}

// neck is the bottleneck of path p: its namespace and device.
type neck struct {
	ns  *testutil.NetNS
	dev string
}

func neckOf(p *testutil.Path) neck {
	if p.R != nil {
		return neck{p.R, p.LinkRB}
	}
	return neck{p.A, p.LinkA}
}

// read returns the root qdisc's counters (zero where tc does not answer:
// the reading is a diagnosis, not a figure the test judges).
func (n neck) read() neckCount {
	out, err := n.ns.Command("tc", "-s", "-j", "qdisc", "show", "dev", n.dev).Output()
	var qs []neckCount
	if err != nil || json.Unmarshal(out, &qs) != nil {
		return neckCount{}
	}
	for _, q := range qs {
		if q.Root {
			return q
		}
	}
	return neckCount{}
}

// neckWatch is the bottleneck over a measurement: its counters at the
// start and its backlog sampled every 50 ms until stop.
type neckWatch struct {
	n       neck
	start   neckCount
	t0      time.Time
	mu      sync.Mutex
	backlog []uint64
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// watchNeck starts the watch; it ends at stop, or when the test ends.
func watchNeck(t *testing.T, p *testutil.Path) *neckWatch {
	w := &neckWatch{n: neckOf(p), t0: time.Now(), done: make(chan struct{})}
	t.Cleanup(w.end)
	w.start = w.n.read()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
				b := w.n.read().Backlog
				w.mu.Lock()
				w.backlog = append(w.backlog, b)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// end stops the sampling (once).
func (w *neckWatch) end() {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
}

// stop ends the watch and says what the bottleneck did meanwhile.
func (w *neckWatch) stop() string {
	w.end()
	end, secs := w.n.read(), time.Since(w.t0).Seconds()
	slices.Sort(w.backlog)
	if len(w.backlog) == 0 || end.Bytes < w.start.Bytes {
		return "the bottleneck not read"
	}
	return fmt.Sprintf("the bottleneck (%s) carried %.2f Mbit/s, dropped %d packets, its backlog p50/max %d/%d KB over %d readings",
		w.n.dev, float64(end.Bytes-w.start.Bytes)*8/secs/1e6, end.Drops-w.start.Drops,
		w.backlog[len(w.backlog)/2]>>10, w.backlog[len(w.backlog)-1]>>10, len(w.backlog))
}
