// Package rt holds experiment rt: a periodic task's wake-up latency under
// load, default against real-time configurations.
//
// rt.go: experiment `rt`, docs/papers.md §004 — how late a periodic (30 ms) task
// wakes up under CPU plus interrupt load, in the paper's four configurations:
//
//	(a) default kernel, task at SCHED_OTHER
//	(b) full preemption (PREEMPT_DYNAMIC switched to "full"; skipped with the
//	    reason when the kernel does not allow switching, e.g. under lockdown)
//	(c) real-time priority set by hand (SCHED_FIFO on the measuring thread)
//	(d) real-time priority applied by the watcher: the task starts at
//	    SCHED_OTHER and the sched engine, seeing its exec through the proc
//	    connector, raises every thread of it to SCHED_FIFO
//
// Topology and load (shared by all configurations, started once):
//
//	lab process: CPU load (N busy `sh` loops, SCHED_OTHER), sched engine (d)
//	  netns H (tested host): tester child process `lanes latency --netns`
//	     <== veth ==> netns P: UDP + ICMP flood at H (--net-rate pps)
//
// Each configuration runs the tester as a child process (env.Exe latency
// --json), so that (d) can be applied from outside exactly as in the paper.
// The table puts the paper's maxima (12.0 / 10.2 / 3.1 ms) beside ours; the
// histograms go to <plot-dir>/rt-<time>-latency.{png,svg} and, with every
// 1 µs bin, into result.json.
package rt

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/latency"
	"github.com/lanes-net/lanes/internal/plot"
	"github.com/lanes-net/lanes/internal/sched"
)

// rtRun is one configuration's outcome.
type rtRun struct {
	Key     string          `json:"key"`
	Name    string          `json:"name"`
	PaperMS string          `json:"paper_max_ms"`
	Skipped string          `json:"skipped,omitempty"`
	Result  *latency.Result `json:"result,omitempty"`
	Extra   map[string]any  `json:"extra,omitempty"`
}

func init() {
	testbed.Register(testbed.Experiment{Name: "rt", Summary: "wake-up latency under CPU+interrupt load: default, full preemption, RT by hand, RT by watcher (§004)",
		Quick: "5 s per configuration",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			dur := fs.Duration("duration", 30*time.Second, "measurement time per configuration (--quick: 5s)")
			period := fs.Duration("period", 30*time.Millisecond, "wake-up period")
			cpuLoad := fs.Int("cpu-load", runtime.NumCPU(), "busy worker processes at normal priority")
			netRate := fs.Int("net-rate", 20000, "UDP+ICMP flood rate at the tested host, packets/s")
			prio := fs.Int("priority", 80, "SCHED_FIFO priority for (c) and (d)")
			plotDir := fs.String("plot-dir", "results", "folder for rt-<time>-latency.png/.svg")
			cyclic := fs.Bool("cyclictest", true, "also run cyclictest at SCHED_FIFO under the same load, for reference")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				if env.Quick {
					*dur = 5 * time.Second
				}
				return runRT(ctx, env, rtParams{dur: *dur, period: *period, cpuLoad: *cpuLoad, netRate: *netRate,
					prio: *prio, plotDir: *plotDir, cyclictest: *cyclic})
			}
		}})
}

type rtParams struct {
	dur, period      time.Duration
	cpuLoad, netRate int
	prio             int
	plotDir          string
	cyclictest       bool
}

const rtHistMax = 50 * time.Millisecond

func runRT(ctx context.Context, env *testbed.Env, p rtParams) (*testbed.Result, error) {
	if p.prio < 1 || p.prio > 98 {
		return nil, fmt.Errorf("priority %d out of range 1..98", p.prio)
	}
	r := &testbed.Result{Experiment: "rt", Started: time.Now(), Params: map[string]any{
		"duration_per_config": p.dur.String(), "period": p.period.String(), "cpu_load": p.cpuLoad,
		"net_rate_pps": p.netRate, "priority": p.prio}}
	exe := env.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("lanes binary: %w", err)
		}
	}
	kernel := sched.ReadKernelRT()
	// The flood goroutines share this process with the watcher of (d): keep
	// idle Ps so the watcher never waits behind them for one.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), runtime.NumCPU()+4)))
	// ...and no stop-the-world collections delaying it (bounded by a memory limit).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(512 << 20))
	bound := 6*p.dur + 2*time.Minute // the loads stop by themselves even if we die
	env.Printf("rt: starting load: %d busy workers, %d pps UDP+ICMP flood over a private veth\n", p.cpuLoad, p.netRate)
	nl, err := latency.StartNetLoad(latency.NetLoadConfig{Rate: p.netRate, Duration: bound, Exe: exe})
	if err != nil {
		return nil, fmt.Errorf("net load: %w", err)
	}
	defer nl.Close()
	cl, err := latency.StartCPULoad(p.cpuLoad, bound)
	if err != nil {
		return nil, fmt.Errorf("cpu load: %w", err)
	}
	defer cl.Stop()

	runs, err := runRTConfigs(ctx, env, p, r, kernel, exe, nl)
	if err != nil {
		return nil, err
	}
	if err := nl.Close(); err != nil {
		r.Notes = append(r.Notes, err.Error())
	}
	sent, recv := nl.Counts()
	r.Tables = []testbed.Table{rtTable(p, runs)}
	for _, x := range runs {
		if x.Skipped != "" {
			r.Notes = append(r.Notes, fmt.Sprintf("(%s) not run: %s", x.Key, x.Skipped))
		}
	}
	r.Notes = append(r.Notes,
		fmt.Sprintf("kernel %s, preemption %s (from %s), HZ %d, %s", kernel.Release, kernel.PreemptModel, kernel.PreemptSource, kernel.HZ, kernel.RTThrottle()),
		fmt.Sprintf("flood: %d packets sent, %d UDP datagrams received in the tested namespace", sent, recv),
		"paper: Android phone, stock kernel vs preemptible kernel + ICMP alignment-trap fix vs app at RT priority; here: a 2-core VM shared with other work, so absolute numbers differ")
	for _, x := range runs {
		if x.Key == "d" && x.Extra != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("(d) watcher: %v", x.Extra["summary"]))
		}
	}
	if path, err := plotRT(p.plotDir, r.Started, runs); err != nil {
		r.Notes = append(r.Notes, "plot: "+err.Error())
	} else {
		r.Notes = append(r.Notes, "histograms: "+path+" (.png and .svg)")
	}
	r.Data = runs
	r.Environment = testbed.CaptureEnvironment(nil, env, map[string]string{
		"preempt_model": kernel.PreemptModel, "preempt_source": kernel.PreemptSource, "hz": strconv.Itoa(kernel.HZ),
		"rt_throttle": kernel.RTThrottle()})
	r.Duration = time.Since(r.Started)
	return r, nil
}

// runRTConfigs measures the paper's configurations (a)-(d) and, if asked,
// cyclictest, one after the other under the running load nl; each tester
// runs as a child `lanes latency` in the flood's namespace.
func runRTConfigs(ctx context.Context, env *testbed.Env, p rtParams, r *testbed.Result, kernel sched.KernelRT, exe string, nl *latency.NetLoad) ([]rtRun, error) {
	child := testerChild(ctx, exe, p, nl)
	var runs []rtRun
	var err error

	env.Printf("rt: (a) default, SCHED_OTHER, %v...\n", p.dur)
	a := rtRun{Key: "a", Name: "default (" + kernel.PreemptModel + " preemption), SCHED_OTHER", PaperMS: "12.0"}
	if a.Result, err = child("a", "--policy", "other"); err != nil {
		return nil, fmt.Errorf("(a): %w", err)
	}
	runs = append(runs, a)

	b, err := runRTFullPreempt(env, p, r, child)
	if err != nil {
		return nil, err
	}
	runs = append(runs, b)

	env.Printf("rt: (c) SCHED_FIFO %d set by hand, %v...\n", p.prio, p.dur)
	c := rtRun{Key: "c", Name: fmt.Sprintf("RT priority by hand (fifo %d)", p.prio), PaperMS: "3.1"}
	if c.Result, err = child("c", "--policy", "fifo", "--priority", strconv.Itoa(p.prio)); err != nil {
		return nil, fmt.Errorf("(c): %w", err)
	}
	runs = append(runs, c)

	env.Printf("rt: (d) SCHED_FIFO %d applied by the watcher, %v...\n", p.prio, p.dur)
	d := rtRun{Key: "d", Name: fmt.Sprintf("RT priority by the watcher (fifo %d)", p.prio), PaperMS: "— (c, automatic)"}
	if d.Result, d.Extra, err = runWatched(ctx, env, p, child); err != nil {
		return nil, fmt.Errorf("(d): %w", err)
	}
	runs = append(runs, d)

	if p.cyclictest {
		ct := rtRun{Key: "ct", Name: fmt.Sprintf("cyclictest fifo %d (reference)", p.prio), PaperMS: ""}
		env.Printf("rt: cyclictest at SCHED_FIFO %d, %v...\n", p.prio, p.dur)
		ct.Result, err = latency.RunCyclictest(latency.Config{Period: p.period, Duration: p.dur, Policy: "fifo", Priority: p.prio,
			Threads: 1, HistMax: rtHistMax}, nl)
		if err != nil {
			ct.Skipped = err.Error()
		}
		runs = append(runs, ct)
	}
	return runs, nil
}

// testerChild returns what runs one configuration's tester: `lanes latency`
// as a child process in the flood's tested namespace, with the
// configuration's own arguments and a tag naming it.
func testerChild(ctx context.Context, exe string, p rtParams, nl *latency.NetLoad) func(string, ...string) (*latency.Result, error) {
	base := []string{"latency", "--json", "--period", p.period.String(), "--duration", p.dur.String(),
		"--hist-max", rtHistMax.String(), "--netns", "/proc/self/fd/3"}
	return func(key string, extra ...string) (*latency.Result, error) {
		args := append(append(append([]string(nil), base...), extra...), "--tag", fmt.Sprintf("rt-%s-%d", key, os.Getpid()))
		return runTester(ctx, exe, args, nl)
	}
}

// runRTFullPreempt measures configuration (b): full preemption set for the
// run (skipped where the kernel cannot switch), restored after it.
func runRTFullPreempt(env *testbed.Env, p rtParams, r *testbed.Result, child func(string, ...string) (*latency.Result, error)) (rtRun, error) {
	b := rtRun{Key: "b", Name: "full preemption, SCHED_OTHER", PaperMS: "10.2"}
	prev, err := sched.SetPreempt("full")
	if err != nil {
		b.Skipped = err.Error()
		env.Printf("rt: (b) skipped: %v\n", err)
		return b, nil
	}
	env.Printf("rt: (b) full preemption (was %s), %v...\n", prev, p.dur)
	b.Result, err = child("b", "--policy", "other")
	restored := restorePreempt(prev, r)
	if err != nil {
		return b, fmt.Errorf("(b): %w", err)
	}
	b.Extra = map[string]any{"previous_mode": prev, "restored_mode": restored}
	return b, nil
}

// restorePreempt sets the mode (b) found back and returns the mode the
// kernel reports afterwards; the result's notes say what happened.
func restorePreempt(prev string, r *testbed.Result) string {
	if _, err := sched.SetPreempt(prev); err != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("could not restore preemption %q: %v (run: lanes tune preempt %s)", prev, err, prev))
	}
	k := sched.ReadKernelRT()
	r.Notes = append(r.Notes, fmt.Sprintf("(b) preemption %s -> full -> %s (from %s)", prev, k.PreemptModel, k.PreemptSource))
	return k.PreemptModel
}

// rtTable is the wake-up latency table, one row per configuration.
func rtTable(p rtParams, runs []rtRun) testbed.Table {
	t := testbed.Table{Title: fmt.Sprintf("Wake-up latency, %v period, %d busy workers + %d pps UDP/ICMP flood (ms)", p.period, p.cpuLoad, p.netRate),
		Columns: []string{"config", "paper max", "max", "p99", "p50", "avg", "samples"}}
	ms := func(us float64) string { return fmt.Sprintf("%.3f", us/1e3) }
	for _, x := range runs {
		label := "(" + x.Key + ") " + x.Name
		if x.Key == "ct" {
			label = x.Name
		}
		if x.Result == nil {
			t.Rows = append(t.Rows, []string{label, x.PaperMS, "not run", "", "", "", ""})
			continue
		}
		s := x.Result.All
		t.Rows = append(t.Rows, []string{label, x.PaperMS, ms(s.MaxUS), ms(s.P99US), ms(s.P50US), ms(s.AvgUS), strconv.Itoa(s.Samples)})
	}
	return t
}

// runWatched runs configuration (d): the engine watches for the tester's
// exec and promotes it; the tester itself keeps whatever it is given.
func runWatched(ctx context.Context, env *testbed.Env, p rtParams, child func(string, ...string) (*latency.Result, error)) (*latency.Result, map[string]any, error) {
	tag := fmt.Sprintf("--tag rt-d-%d$", os.Getpid())
	applied := make(chan sched.Applied, 64)
	cfg := config.TaskSections{
		Tasks:  []config.TaskRule{{Name: "rt-tester", Cmdline: tag, Policy: "fifo", Priority: p.prio}},
		Safety: config.TaskSafety{MaxRTPriority: max(p.prio, 50), RTTime: 0},
	}
	eng, err := sched.New(cfg, sched.Options{Log: env.Log, OnApply: func(a sched.Applied) {
		select {
		case applied <- a:
		default:
		}
	}})
	if err != nil {
		return nil, nil, err
	}
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(ectx) }()
	defer func() {
		cancel()
		<-done
		eng.Close()
	}()
	for deadline := time.Now().Add(5 * time.Second); eng.Status().Mode == "" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	res, err := child("d", "--policy", "keep")
	if err != nil {
		return nil, nil, err
	}
	st := eng.Status()
	extra := map[string]any{"mode": st.Mode, "reaction_p50_us": st.ReactP50US, "reaction_p99_us": st.ReactP99US,
		"watchdog_demotions": st.Demotions}
	var got []sched.Applied
	for len(applied) > 0 {
		got = append(got, <-applied)
	}
	extra["applied"] = got
	if len(got) == 0 {
		extra["summary"] = "the rule was NOT applied: (d) ran at SCHED_OTHER"
	} else {
		extra["summary"] = fmt.Sprintf("rule applied to pid %d on %s, %v after the exec event (%s); watchdog demotions %d",
			got[0].PID, got[0].Source, got[0].Reaction.Round(time.Microsecond), st.Mode, st.Demotions)
		if st.Demotions > 0 {
			extra["summary"] = fmt.Sprint(extra["summary"], " (", st.LastDemote, ")")
		}
	}
	return res, extra, nil
}

// runTester runs `lanes latency --json ...` inside the tested namespace of
// nl (passed as fd 3) and returns its result.
func runTester(ctx context.Context, exe string, args []string, nl *latency.NetLoad) (*latency.Result, error) {
	fd, err := unix.Dup(int(nl.Host))
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "netns")
	defer f.Close()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.ExtraFiles = []*os.File{f}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %v: %w: %s", exe, args, err, bytes.TrimSpace(errb.Bytes()))
	}
	var v struct {
		Results []*latency.Result `json:"results"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || len(v.Results) == 0 {
		return nil, fmt.Errorf("tester output: %v (%q)", err, truncate(out.String(), 200))
	}
	return v.Results[0], nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// plotRT draws each configuration's histogram (share of samples per bin)
// and CDF over latency in ms: the whole range with 100 µs bins, and a
// zoom on the first millisecond with 10 µs bins where the RT runs live.
func plotRT(dir string, started time.Time, runs []rtRun) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	xmax := 1.0 // ms, at least
	for _, x := range runs {
		if x.Result != nil {
			xmax = math.Max(xmax, math.Min(x.Result.All.MaxUS/1e3, rtHistMax.Seconds()*1e3))
		}
	}
	prefix := filepath.Join(dir, "rt-"+started.UTC().Format("20060102-150405")+"-latency")
	for _, f := range []struct {
		suffix string
		binUS  int
		xmax   float64
		title  string
	}{
		{"", 100, xmax, "Wake-up latency under CPU + interrupt load (paper 004)"},
		{"-zoom", 10, 1, "Wake-up latency, first millisecond (paper 004)"},
	} {
		fig := rtFigure(runs, f.binUS, f.xmax, f.title)
		for _, ext := range []string{".png", ".svg"} {
			if err := fig.Save(prefix + f.suffix + ext); err != nil {
				return "", err
			}
		}
	}
	return prefix, nil
}

func rtFigure(runs []rtRun, binUS int, xmaxMS float64, title string) *plot.Figure {
	nb := int(math.Ceil(xmaxMS*1e3/float64(binUS))) + 1
	hist := plot.Panel{YLabel: "share of wake-ups", Unit: fmt.Sprintf("%% per %d us", binUS)}
	cdf := plot.Panel{YLabel: "wake-ups on time", Unit: "% <= x", YMin: 0, YMax: 100}
	for _, x := range runs {
		if x.Result == nil {
			continue
		}
		s := x.Result.All
		folded := make([]float64, nb)
		for i, v := range s.Hist {
			folded[min(i/binUS, nb-1)] += float64(v) // the last bin collects the rest
		}
		total := float64(max(1, s.Samples))
		hs := plot.Series{Name: "(" + x.Key + ")"}
		cs := plot.Series{Name: "(" + x.Key + ")"}
		var cum float64
		for i, v := range folded[:nb-1] {
			xm := float64(i*binUS) / 1e3
			hs.X, hs.Y = append(hs.X, xm), append(hs.Y, 100*v/total)
			cum += v
			cs.X, cs.Y = append(cs.X, xm+float64(binUS)/1e3), append(cs.Y, 100*cum/total)
		}
		hist.Series = append(hist.Series, hs)
		cdf.Series = append(cdf.Series, cs)
	}
	return &plot.Figure{Title: title, XLabel: "latency", XUnit: "ms", Panels: []plot.Panel{hist, cdf}}
}
