// Integration tests of the engine as root: real processes started by the
// test, checked with sched_getattr / prlimit / /proc; the watcher's reaction
// time against 1 s polling; the watchdog demoting a runaway RT busy loop.
package sched

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
	"golang.org/x/sys/unix"
)

// copyBinary copies an executable under a unique name so that a rule can
// match exactly the processes the test starts.
func copyBinary(t *testing.T, src, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Skipf("need %s: %v", src, err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

type engineRun struct {
	e       *Engine
	cancel  context.CancelFunc
	done    chan error
	mu      sync.Mutex
	applied map[int]time.Time
	ch      chan Applied
}

func startEngine(t *testing.T, c config.TaskSections, opt Options) *engineRun {
	t.Helper()
	r := &engineRun{applied: map[int]time.Time{}, ch: make(chan Applied, 1000), done: make(chan error, 1)}
	opt.OnApply = func(a Applied) {
		r.mu.Lock()
		r.applied[a.PID] = time.Now()
		r.mu.Unlock()
		select {
		case r.ch <- a:
		default:
		}
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e, err := New(c, opt)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.e, r.cancel = e, cancel
	go func() { r.done <- e.Run(ctx) }()
	t.Cleanup(r.stop)
	// Wait until the engine has subscribed and scanned.
	deadline := time.Now().Add(5 * time.Second)
	for e.Status().Mode == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	return r
}

func (r *engineRun) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.e.Close()
	r.cancel = nil
}

func (r *engineRun) waitApplied(t *testing.T, pid int, d time.Duration) Applied {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case a := <-r.ch:
			if a.PID == pid {
				if a.Err != "" {
					t.Fatalf("apply to %d: %s", pid, a.Err)
				}
				return a
			}
		case <-timeout:
			t.Fatalf("rule not applied to pid %d within %v", pid, d)
		}
	}
}

func startProc(t *testing.T, path string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(path, args...)
	// Own process group, killed whole: killing only a `timeout` wrapper
	// would leave its busy child running forever.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd
}

func TestWatcherAppliesRule(t *testing.T) {
	testutil.RequireRoot(t)
	sleeper := copyBinary(t, "/bin/sleep", "lnsched-sleep")
	c := config.TaskSections{
		Tasks: []config.TaskRule{
			{Name: "rt-sleep", Exe: "lnsched-sleep", Cmdline: "^" + regexp.QuoteMeta(sleeper) + " 30$", Policy: "fifo", Priority: 12, CPUs: []int{0}},
			{Name: "nice-sleep", Exe: "lnsched-sleep", Cmdline: " 31$", Nice: iptr(7)},
		},
		Safety: config.TaskSafety{RTTime: config.Duration(300 * time.Millisecond)},
	}
	r := startEngine(t, c, Options{NoWatchdog: true})
	if m := r.e.Status().Mode; m != "netlink" {
		t.Fatalf("mode %q, want netlink (proc connector)", m)
	}
	rt := startProc(t, sleeper, "30")
	nice := startProc(t, sleeper, "31")
	a := r.waitApplied(t, rt.Process.Pid, 5*time.Second)
	if a.Source != "exec" || a.Rule != "rt-sleep" {
		t.Errorf("applied %+v, want rule rt-sleep on exec", a)
	}
	r.waitApplied(t, nice.Process.Pid, 5*time.Second)

	attr, err := unix.SchedGetAttr(rt.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_FIFO || attr.Priority != 12 || attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0 {
		t.Errorf("rt process: policy %s prio %d flags %#x, want fifo 12 with reset-on-fork", PolicyName(attr.Policy), attr.Priority, attr.Flags)
	}
	var lim unix.Rlimit
	if err := unix.Prlimit(rt.Process.Pid, unix.RLIMIT_RTTIME, nil, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur != 300000 || lim.Max != 600000 {
		t.Errorf("RLIMIT_RTTIME %d/%d, want 300000/600000 µs", lim.Cur, lim.Max)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(rt.Process.Pid, &set); err != nil {
		t.Fatal(err)
	}
	if set.Count() != 1 || !set.IsSet(0) {
		t.Errorf("affinity %v, want cpu 0 only", set)
	}
	nattr, err := unix.SchedGetAttr(nice.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if nattr.Policy != unix.SCHED_NORMAL || nattr.Nice != 7 {
		t.Errorf("nice process: %s nice %d, want other nice 7", PolicyName(nattr.Policy), nattr.Nice)
	}
	st := r.e.Status()
	if len(st.Tracked) != 2 || st.Applied < 2 {
		t.Errorf("status %+v", st)
	}
	t.Logf("reaction exec -> applied: p50 %.0f µs p99 %.0f µs", st.ReactP50US, st.ReactP99US)

	// Close puts things back.
	r.stop()
	attr, err = unix.SchedGetAttr(rt.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_NORMAL {
		t.Errorf("after Close: %s, want other", PolicyName(attr.Policy))
	}
}

// TestInitialScan: a process running before the engine starts gets its rule
// from the /proc scan.
func TestInitialScan(t *testing.T) {
	testutil.RequireRoot(t)
	sleeper := copyBinary(t, "/bin/sleep", "lnsched-early")
	p := startProc(t, sleeper, "30")
	time.Sleep(50 * time.Millisecond)
	r := startEngine(t, config.TaskSections{Tasks: []config.TaskRule{{Comm: "lnsched-early", Policy: "idle"}}}, Options{NoWatchdog: true})
	a := r.waitApplied(t, p.Process.Pid, 3*time.Second)
	if a.Source != "scan" {
		t.Errorf("source %q, want scan", a.Source)
	}
	attr, err := unix.SchedGetAttr(p.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_IDLE {
		t.Errorf("policy %s, want idle", PolicyName(attr.Policy))
	}
}

// TestCPUIdleCgroup puts a process into the rule's cpu cgroup (v1 or v2,
// whichever has the cpu controller) and removes the group on Close.
func TestCPUIdleCgroup(t *testing.T) {
	testutil.RequireRoot(t)
	cg := DetectCPUCgroup()
	if cg.Version == 0 {
		t.Skip("no cpu cgroup controller")
	}
	sleeper := copyBinary(t, "/bin/sleep", "lnsched-bg")
	name := fmt.Sprintf("t%d", os.Getpid())
	r := startEngine(t, config.TaskSections{Tasks: []config.TaskRule{{Name: name, Comm: "lnsched-bg", CPUIdle: true}}}, Options{NoWatchdog: true})
	p := startProc(t, sleeper, "30")
	r.waitApplied(t, p.Process.Pid, 3*time.Second)
	path, err := cg.cgroupOf(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + cgroupParent + "/" + name; path != want {
		t.Errorf("cgroup %q, want %q (%s)", path, want, cg)
	}
	dir := filepath.Join(cg.Mount, cgroupParent, name)
	if cg.HasIdle {
		b, _ := os.ReadFile(filepath.Join(dir, "cpu.idle"))
		if strings.TrimSpace(string(b)) != "1" {
			t.Errorf("cpu.idle = %q", b)
		}
	}
	r.stop()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s left behind after Close (%v)", dir, err)
	}
	if path, _ := cg.cgroupOf(p.Process.Pid); path != "/" {
		t.Errorf("after Close the process is in %q, want /", path)
	}
}

// TestReactionNetlinkVsPoll starts processes at random moments and measures
// the time from the start (just before fork+exec) to the applied policy,
// with the proc connector and with a 1 s /proc polling loop. It prints both;
// it only asserts the obvious: the connector reacts faster than polling.
func TestReactionNetlinkVsPoll(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("starts ~40 processes over a few seconds")
	}
	sleeper := copyBinary(t, "/bin/sleep", "lnsched-react")
	rule := config.TaskSections{Tasks: []config.TaskRule{{Comm: "lnsched-react", Nice: iptr(3)}}}
	var lastStatus Status
	measure := func(opt Options, n int, spread time.Duration) []time.Duration {
		r := startEngine(t, rule, opt)
		defer r.stop()
		defer func() { lastStatus = r.e.Status() }()
		var out []time.Duration
		for i := range n {
			start := time.Now()
			p := startProc(t, sleeper, "5")
			r.waitApplied(t, p.Process.Pid, 3*time.Second)
			r.mu.Lock()
			out = append(out, r.applied[p.Process.Pid].Sub(start))
			r.mu.Unlock()
			p.Process.Kill()
			// Spread start times evenly over the polling phase.
			time.Sleep(10*time.Millisecond + time.Duration((i*373)%1000)*spread/1000)
		}
		return out
	}
	nl := measure(Options{NoWatchdog: true}, 30, 20*time.Millisecond)
	nlStatus := lastStatus
	bpf := measure(Options{NoWatchdog: true, BPFEvents: true}, 30, 20*time.Millisecond)
	if lastStatus.Mode == "bpf tracepoints" {
		t.Logf("start -> policy applied: BPF tracepoint events p50 %v p99 %v (n=%d); exec event -> applied p50 %.0f µs p99 %.0f µs",
			durQ(bpf, .5), durQ(bpf, .99), len(bpf), lastStatus.ReactP50US, lastStatus.ReactP99US)
	} else {
		t.Logf("BPF tracepoint events not available here (mode %q)", lastStatus.Mode)
	}
	poll := measure(Options{NoWatchdog: true, Poll: time.Second}, 6, time.Second)
	// Under CPU load: one busy loop per CPU at normal priority, bounded.
	var hogs []*exec.Cmd
	for range unixNumCPU() {
		hogs = append(hogs, startProc(t, "timeout", "20", "sh", "-c", "while :; do :; done"))
	}
	loaded := measure(Options{NoWatchdog: true}, 30, 20*time.Millisecond)
	loadedStatus := lastStatus
	for _, h := range hogs {
		h.Process.Kill()
	}
	q := func(d []time.Duration, f float64) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		i := int(f*float64(len(s))+0.999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	t.Logf("start -> policy applied: proc connector p50 %v p99 %v (n=%d); 1 s polling p50 %v p99 %v (n=%d)",
		q(nl, .5), q(nl, .99), len(nl), q(poll, .5), q(poll, .99), len(poll))
	t.Logf("exec event -> applied (engine's own clock): idle p50 %.0f µs p99 %.0f µs; under CPU load p50 %.0f µs p99 %.0f µs",
		nlStatus.ReactP50US, nlStatus.ReactP99US, loadedStatus.ReactP50US, loadedStatus.ReactP99US)
	fmt.Printf("REACTION exec-event->applied idle p50=%.0fus p99=%.0fus | cpuload p50=%.0fus p99=%.0fus\n",
		nlStatus.ReactP50US, nlStatus.ReactP99US, loadedStatus.ReactP50US, loadedStatus.ReactP99US)
	t.Logf("proc connector under CPU load (%d busy loops): p50 %v p99 %v (n=%d)", len(hogs), q(loaded, .5), q(loaded, .99), len(loaded))
	fmt.Printf("REACTION netlink p50=%v p99=%v n=%d | poll1s p50=%v p99=%v n=%d | netlink+cpuload p50=%v p99=%v n=%d\n",
		q(nl, .5), q(nl, .99), len(nl), q(poll, .5), q(poll, .99), len(poll), q(loaded, .5), q(loaded, .99), len(loaded))
	if q(nl, .5) >= q(poll, .5) {
		t.Errorf("proc connector (p50 %v) not faster than 1 s polling (p50 %v)", q(nl, .5), q(poll, .5))
	}
}

// TestWatchdogDemotesRunaway promotes a CPU-bound shell loop to SCHED_FIFO
// and expects the watchdog to demote it. Safety: the loop is pinned to one
// CPU (taskset and the rule), RLIMIT_RTTIME kills it after 3 s of RT CPU,
// the test kills it after 6 s in any case, and RT throttling leaves normal
// tasks 5% of that CPU; the other CPU is untouched.
func TestWatchdogDemotesRunaway(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.SkipUnlessCommand(t, "taskset")
	if testing.Short() {
		t.Skip("runs a real-time busy loop for up to a few seconds")
	}
	k := ReadKernelRT()
	if k.RTRuntimeUS < 0 || k.RTRuntimeUS >= k.RTPeriodUS {
		t.Skipf("RT throttling is off (sched_rt_runtime_us=%d): refusing to run an RT busy loop", k.RTRuntimeUS)
	}
	cpu := unixNumCPU() - 1
	loop := copyBinary(t, "/bin/sh", "lnsched-runaway")
	c := config.TaskSections{
		Tasks: []config.TaskRule{{Name: "runaway", Comm: "lnsched-runawa*", Policy: "fifo", Priority: 5, CPUs: []int{cpu}}},
		Safety: config.TaskSafety{MaxRTPriority: 10, RTTime: config.Duration(3 * time.Second),
			Watchdog: config.TaskWatchdog{Starve: config.Duration(300 * time.Millisecond), Interval: config.Duration(20 * time.Millisecond)}},
	}
	r := startEngine(t, c, Options{})
	cmd := exec.Command("taskset", "-c", fmt.Sprint(cpu), loop, "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hardStop := time.AfterFunc(6*time.Second, func() { cmd.Process.Kill() })
	t.Cleanup(func() { hardStop.Stop(); cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	r.waitApplied(t, pid, 3*time.Second)
	promoted := time.Now()
	var demotedAfter time.Duration
	for time.Since(promoted) < 4*time.Second {
		attr, err := unix.SchedGetAttr(pid, 0)
		if err != nil {
			t.Fatalf("runaway process gone before demotion (RLIMIT_RTTIME?): %v", err)
		}
		if attr.Policy == unix.SCHED_NORMAL {
			demotedAfter = time.Since(promoted)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	if demotedAfter == 0 {
		t.Fatalf("runaway RT loop not demoted within 4 s (status %+v)", r.e.Status())
	}
	st := r.e.Status()
	t.Logf("demoted %v after promotion; demotions %d", demotedAfter.Round(time.Millisecond), st.Demotions)
	if st.Demotions < 1 {
		t.Errorf("status reports %d demotions", st.Demotions)
	}
}

func unixNumCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 1
	}
	return set.Count()
}

// TestAdoptAfterRestart: a process already at the rule's RT policy (as left
// by a daemon that was killed) is adopted, and Close makes it normal again
// instead of "restoring" RT.
func TestAdoptAfterRestart(t *testing.T) {
	testutil.RequireRoot(t)
	sleeper := copyBinary(t, "/bin/sleep", "lnsched-adopt")
	p := startProc(t, sleeper, "30")
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_RR, Priority: 9}
	if err := unix.SchedSetAttr(p.Process.Pid, &a, 0); err != nil {
		t.Fatal(err)
	}
	r := startEngine(t, config.TaskSections{Tasks: []config.TaskRule{{Comm: "lnsched-adopt", Policy: "rr", Priority: 9}}}, Options{NoWatchdog: true})
	r.waitApplied(t, p.Process.Pid, 3*time.Second)
	r.stop()
	got, err := unix.SchedGetAttr(p.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Policy != unix.SCHED_NORMAL {
		t.Errorf("after Close: %s %d, want other", PolicyName(got.Policy), got.Priority)
	}
}

// TestLaneHook: a lane rule calls the daemon's MoveToLane hook, and since it
// changes no CPU setting, Close leaves the process's own changes alone.
func TestLaneHook(t *testing.T) {
	testutil.RequireRoot(t)
	sleeper := copyBinary(t, "/bin/sleep", "lnsched-lane")
	var mu sync.Mutex
	moved := map[int]lane.Lane{}
	hook := func(pid int, l lane.Lane, _ config.TaskRule) error {
		mu.Lock()
		defer mu.Unlock()
		moved[pid] = l
		return nil
	}
	r := startEngine(t, config.TaskSections{Tasks: []config.TaskRule{{Name: "lane.bg", Comm: "lnsched-lane", Lane: lane.Background}}},
		Options{NoWatchdog: true, MoveToLane: hook})
	p := startProc(t, sleeper, "30")
	r.waitApplied(t, p.Process.Pid, 3*time.Second)
	mu.Lock()
	got := moved[p.Process.Pid]
	mu.Unlock()
	if got != lane.Background {
		t.Errorf("MoveToLane got %v for pid %d, want background", got, p.Process.Pid)
	}
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	if err := unix.SchedSetAttr(p.Process.Pid, &a, 0); err != nil {
		t.Fatal(err)
	}
	r.stop()
	cur, err := unix.SchedGetAttr(p.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Policy != unix.SCHED_IDLE {
		t.Errorf("Close changed a policy the engine never set: %s", PolicyName(cur.Policy))
	}
}

func durQ(d []time.Duration, f float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(f*float64(len(s))+0.999) - 1
	return s[max(0, min(i, len(s)-1))]
}
