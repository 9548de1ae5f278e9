// memberloop_test.go: an access-group member's request loop is paced, and
// its log lines bounded (N11), measured.
package daemon_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

// TestMemberRegisterLoopCostBounded (audit N11): an access-group member looping register and
// unregister of socketless UDP flows on 8 connections made 4,414 requests
// a second: the daemon at 101 % of a core, root's status p99 48.6 ms,
// 132,000 log lines (20 MB) in 15 s. Fix: members are paced as other
// callers, their log lines bounded per uid. The test runs the loop for
// 4 s, bounds the log lines and logs the daemon's CPU share and root's
// status latency.
func TestMemberRegisterLoopCostBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newAttackBed(t, "access:\n  group: users\n")
	const member = 61000
	before := strings.Count(b.d.out.String(), `msg="api change"`)
	cpu0, t0 := procCPU(t, b.d.cmd.Process.Pid), time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	requests := 0
	for i := range 8 {
		c := b.client(t, member, []uint32{100})
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for sport := uint16(20000 + 1000*i); time.Since(t0) < 4*time.Second; sport++ {
				f := api.Flow{Dst: b.p.AddrB.String(), DPort: 9, SPort: sport, Proto: "udp"}
				c.Register(f, lane.Interactive)
				c.Unregister(f)
				n += 2
			}
			mu.Lock()
			requests += n
			mu.Unlock()
		}()
	}
	var statusWorst time.Duration
	for time.Since(t0) < 4*time.Second {
		s0 := time.Now()
		status(t, b.sock)
		statusWorst = max(statusWorst, time.Since(s0))
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	elapsed, cpu := time.Since(t0), procCPU(t, b.d.cmd.Process.Pid)-cpu0
	lines := strings.Count(b.d.out.String(), `msg="api change"`) - before
	t.Logf("a member's loop on 8 connections: %d requests in %v (%.0f/s), the daemon at %.1f %% of a core, %d log lines; root's status slowest %v",
		requests, elapsed.Round(time.Millisecond), float64(requests)/elapsed.Seconds(), 100*cpu.Seconds()/elapsed.Seconds(),
		lines, statusWorst.Round(time.Millisecond))
	if bound := 20 + int(elapsed.Seconds()*10) + 1; lines > bound {
		t.Errorf("a member's loop wrote %d change lines in %v, bound %d", lines, elapsed, bound)
	}
}
