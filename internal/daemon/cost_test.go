// cost_test.go: what the daemon costs a battery-powered device. At rest: a
// daemon on one veth (device-bottleneck, the default policy's mode), no
// traffic, measured over LANES_COST (off by default: a measurement, not a
// test of CI's budget; `make cost` runs it for 60 s, and the yield's
// reaction beside it). It prints its wake-ups a second (voluntary and
// involuntary context switches of all its threads), its CPU in ms a minute
// and its RSS beside the goals, and fails above them. Under traffic: the
// default policy on the remote-bottleneck path (remote_test.go), a
// background upload under `lanes run` and a foreground upload of 4 MB
// beside it; the daemon's CPU per MB that crossed the link.
//
//	make cost
//	LANES_COST=60s ./scripts/go test -count=1 -run 'TestDaemonCost' -v ./internal/daemon/
package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/policy"
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
	w0, c0 := ctxSwitches(t, pid), schedCPU(t, pid)
	time.Sleep(dur)
	w1, c1 := ctxSwitches(t, pid), schedCPU(t, pid)
	wake := float64(w1-w0) / dur.Seconds()
	cpu := float64(c1-c0) / 1e6 * float64(time.Minute) / float64(dur)
	rss := rssKB(t, pid)
	threads, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	t.Logf("at rest over %v: wake-ups %.2f/s (goal <= %.0f), CPU %.2f ms a minute (goal <= %.0f), RSS %d kB (goal <= %d), %d threads",
		dur, wake, goalWakeups, cpu, goalCPUms, rss, goalRSSkB, len(threads))
	if wake > goalWakeups || cpu > goalCPUms || rss > goalRSSkB {
		t.Errorf("above a goal")
	}
}

func TestDaemonCostUnderTraffic(t *testing.T) {
	if _, err := time.ParseDuration(os.Getenv("LANES_COST")); err != nil {
		t.Skip("a measurement: set LANES_COST=60s")
	}
	testutil.RequireRoot(t)
	p, base := remotePath(t, uplinkBottleneck)
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	pid := d.cmd.Process.Pid
	time.Sleep(2 * time.Second)
	bulk(t, p.A, base, lanesBin, "run", "--socket", sock, "--lane", "background", "--") // stopped at cleanup
	time.Sleep(3 * time.Second)
	bg0, fg0, c0, t0 := laneBytes(t, sock, "background"), laneBytes(t, sock, "interactive"), schedCPU(t, pid), time.Now()
	fg := request(t, p.A, "post", base, 4<<20)
	time.Sleep(2 * time.Second) // the background alone again, after the hold
	bg1, fg1, c1 := laneBytes(t, sock, "background"), laneBytes(t, sock, "interactive"), schedCPU(t, pid)
	mb := float64(bg1-bg0+fg1-fg0) / 1e6
	t.Logf("under traffic for %v: %.1f MB (background %.1f, foreground %.1f; its 4 MB upload in %.2f s), daemon CPU %.2f ms: %.3f ms per MB; RSS %d kB",
		time.Since(t0).Round(time.Millisecond), mb, float64(bg1-bg0)/1e6, float64(fg1-fg0)/1e6, fg.Seconds,
		float64(c1-c0)/1e6, float64(c1-c0)/1e6/mb, rssKB(t, pid))
	if mb < 4 {
		t.Errorf("only %.1f MB crossed the link", mb)
	}
}

// schedCPU sums the scheduler's run time (ns) of a process's threads.
func schedCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(files) == 0 {
		t.Fatalf("schedstat of %d: %v", pid, err)
	}
	var sum time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that ended
		}
		var ns int64
		fmt.Sscan(string(b), &ns)
		sum += time.Duration(ns)
	}
	return sum
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
