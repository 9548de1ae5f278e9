// cost_test.go: what the daemon costs a battery-powered device at rest: a
// daemon on one veth (device-bottleneck, the default policy's mode), no
// traffic, measured over LANES_COST (off by default: a measurement, not a
// test of CI's budget; `make cost` runs it for 60 s). It prints its
// wake-ups a second (voluntary and involuntary context switches of all its
// threads), its CPU in ms a minute and its RSS beside the goals, and fails
// above them.
//
//	make cost
//	LANES_COST=60s ./scripts/go test -count=1 -run TestDaemonCostAtRest -v ./internal/daemon/
package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// Goals at rest (issue: a daemon a phone can afford).
const (
	goalWakeups = 1.0  // a second
	goalCPUms   = 12.0 // a minute
	goalRSSkB   = 20 << 10
)

func TestDaemonCostAtRest(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("LANES_COST"))
	if err != nil || dur <= 0 {
		t.Skip("a measurement: set LANES_COST=60s")
	}
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	d, _ := startDaemon(t, p.A, devicePolicy(p.LinkA))
	pid := d.cmd.Process.Pid
	time.Sleep(5 * time.Second) // its start's work done
	w0, c0 := ctxSwitches(t, pid), procCPU(t, pid)
	time.Sleep(dur)
	w1, c1 := ctxSwitches(t, pid), procCPU(t, pid)
	wake := float64(w1-w0) / dur.Seconds()
	cpu := float64((c1-c0)/time.Millisecond) * float64(time.Minute) / float64(dur)
	rss := rssKB(t, pid)
	threads, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	t.Logf("at rest over %v: wake-ups %.2f/s (goal <= %.0f), CPU %.1f ms a minute (goal <= %.0f, USER_HZ resolution: 10 ms), RSS %d kB (goal <= %d), %d threads",
		dur, wake, goalWakeups, cpu, goalCPUms, rss, goalRSSkB, len(threads))
	if wake > goalWakeups || cpu > goalCPUms || rss > goalRSSkB {
		t.Errorf("above a goal")
	}
}

// ctxSwitches sums the voluntary and involuntary context switches of all
// of a process's threads.
func ctxSwitches(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(strings.SplitN(l, ":", 2)[0], "voluntary_ctxt_switches") {
				var v int
				fmt.Sscan(strings.TrimSpace(strings.SplitN(l, ":", 2)[1]), &v)
				n += v
			}
		}
	}
	return n
}
