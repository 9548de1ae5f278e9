// preempt_test.go: configuration (b) run for real where the kernel can
// switch its preemption model at run time (PREEMPT_DYNAMIC, debugfs
// readable): the model read back during (b) is full, the one before is
// restored after it, and `lanes doctor` reports each. Functional only: the
// tester's wake-up latencies are not judged.
package rt

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/latency"
	"github.com/lanes-net/lanes/internal/sched"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestFullPreemptSwitchedAndRestored(t *testing.T) {
	before := requireSwitchable(t)
	exe := labtest.LanesBinary(t)
	if before.PreemptModel == "full" {
		before = switchAwayFromFull(t, before)
	}
	t.Cleanup(func() { _, _ = sched.SetPreempt(before.PreemptModel) }) // should (b) not return
	t.Logf("before: %s", doctorSchedulerLine(exe))

	p := rtParams{dur: 2 * time.Second, period: 10 * time.Millisecond}
	nl, err := latency.StartNetLoad(latency.NetLoadConfig{Rate: 1000, Duration: 5 * time.Minute, Exe: exe})
	if err != nil {
		t.Fatalf("net load: %v", err)
	}
	defer nl.Close()
	var during sched.KernelRT
	var duringLine string
	tester := testerChild(context.Background(), exe, p, nl)
	child := func(key string, extra ...string) (*latency.Result, error) {
		during, duringLine = sched.ReadKernelRT(), doctorSchedulerLine(exe)
		return tester(key, extra...)
	}
	r := &testbed.Result{}
	b, err := runRTFullPreempt(labtest.TestEnv(t), p, r, child)
	after := sched.ReadKernelRT()
	afterLine := doctorSchedulerLine(exe)
	t.Logf("during: %s", duringLine)
	t.Logf("after: %s", afterLine)
	t.Logf("notes: %q", r.Notes)
	if err != nil || b.Skipped != "" {
		t.Fatalf("(b) on a switchable kernel: err %v, skipped %q", err, b.Skipped)
	}
	if during.PreemptModel != "full" || during.PreemptSource != "debugfs" {
		t.Errorf("during (b): preemption %s (from %s), want full (from debugfs)", during.PreemptModel, during.PreemptSource)
	}
	if after.PreemptModel != before.PreemptModel || b.Extra["restored_mode"] != before.PreemptModel {
		t.Errorf("after (b): preemption %s (recorded %v), want %s restored", after.PreemptModel, b.Extra["restored_mode"], before.PreemptModel)
	}
	if b.Extra["previous_mode"] != before.PreemptModel {
		t.Errorf("(b) recorded the previous mode %v, want %s", b.Extra["previous_mode"], before.PreemptModel)
	}
	wantLine(t, "during", duringLine, "preemption full (from debugfs)")
	wantLine(t, "after", afterLine, "preemption "+before.PreemptModel+" (from debugfs)")
	if b.Result == nil || b.Result.All.Samples == 0 {
		t.Fatalf("(b) measured nothing: %+v", b.Result)
	}
	t.Logf("(b) tester: %d wake-ups, max %.3f ms (not judged)", b.Result.All.Samples, b.Result.All.MaxUS/1e3)
}

// TestPreemptModeNotOfferedRefused: lanes refuses a mode the kernel does
// not list and leaves the model as it was; what the kernel itself answers
// to that mode written directly is logged.
func TestPreemptModeNotOfferedRefused(t *testing.T) {
	before := requireSwitchable(t)
	raw, _ := os.ReadFile("/sys/kernel/debug/sched/preempt")
	t.Logf("kernel %s: /sys/kernel/debug/sched/preempt reads %q", before.Release, raw)
	known := []string{"none", "voluntary", "full", "lazy"}
	i := slices.IndexFunc(known, func(m string) bool { return !slices.Contains(before.PreemptModes, m) })
	if i < 0 {
		t.Skipf("the kernel offers every mode lanes knows: %v", before.PreemptModes)
	}
	missing := known[i]
	_, err := sched.SetPreempt(missing)
	if err == nil || !strings.Contains(err.Error(), "offers") {
		t.Errorf("SetPreempt(%q) on a kernel offering %v: %v, want a refusal naming the offered modes", missing, before.PreemptModes, err)
	}
	t.Logf("lanes: %v", err)
	werr := os.WriteFile("/sys/kernel/debug/sched/preempt", []byte(missing), 0o644)
	t.Cleanup(func() { _, _ = sched.SetPreempt(before.PreemptModel) })
	t.Logf("the kernel, %q written directly: %v", missing, werr)
	if now := sched.ReadKernelRT(); now.PreemptModel != before.PreemptModel && werr == nil {
		t.Logf("the kernel accepted %q although it does not list it (now %s)", missing, now.PreemptModel)
	}
}

// requireSwitchable skips unless the kernel can switch preemption at run
// time and lanes reads the live mode; it returns what lanes reads.
func requireSwitchable(t *testing.T) sched.KernelRT {
	t.Helper()
	testutil.RequireRoot(t)
	k := sched.ReadKernelRT()
	if !k.PreemptDynamic {
		t.Skipf("kernel %s is not PREEMPT_DYNAMIC (preemption %s from %s): (b) cannot switch here", k.Release, k.PreemptModel, k.PreemptSource)
	}
	if k.PreemptSource != "debugfs" {
		t.Skipf("kernel %s: the live mode is not readable (%s): (b) cannot switch here", k.Release, k.PreemptNote)
	}
	t.Logf("kernel %s offers %v, now %s", k.Release, k.PreemptModes, k.PreemptModel)
	return k
}

// switchAwayFromFull moves a kernel that already runs full preemption to
// another offered mode, so that (b)'s switch and restore are visible; the
// original mode comes back when the test ends.
func switchAwayFromFull(t *testing.T, k sched.KernelRT) sched.KernelRT {
	t.Helper()
	i := slices.IndexFunc(k.PreemptModes, func(m string) bool { return m != "full" })
	if i < 0 {
		t.Skipf("the kernel offers only %v: no switch to show", k.PreemptModes)
	}
	if _, err := sched.SetPreempt(k.PreemptModes[i]); err != nil {
		t.Fatalf("switch to %s before (b): %v", k.PreemptModes[i], err)
	}
	t.Cleanup(func() { _, _ = sched.SetPreempt("full") })
	return sched.ReadKernelRT()
}

// doctorSchedulerLine runs `lanes doctor -v` and returns its scheduler line,
// or what it printed instead (its exit status names missing datapath
// features, not asked here). It never stops the test: it runs during (b).
func doctorSchedulerLine(exe string) string {
	out, err := exec.Command(exe, "doctor", "-v").Output()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "scheduler: ") {
			return sc.Text()
		}
	}
	return fmt.Sprintf("no scheduler line (%v): %q", err, out)
}

func wantLine(t *testing.T, when, line, want string) {
	t.Helper()
	if !strings.Contains(line, want) {
		t.Errorf("%s: doctor says %q, want %q", when, line, want)
	}
}
