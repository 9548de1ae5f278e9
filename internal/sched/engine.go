// engine.go: the task policy engine. It subscribes to process events first,
// then scans /proc (so nothing starting in between is missed), and from then
// on reacts to each event:
//
//   - exec (process)  -> read /proc/PID, match, apply; reaction time is
//     measured from the event's kernel timestamp to the moment the policy is set
//   - fork (thread)   -> a new thread of a tracked process gets the rule's
//     policy too (RT threads are created SCHED_OTHER under reset-on-fork)
//   - fork (process)  -> matched when the parent is tracked or a rule matches on parent
//   - comm (process)  -> re-matched (rules on comm)
//   - exit            -> forgotten
//
// Without the proc connector (no CONFIG_PROC_EVENTS, no CAP_NET_ADMIN, or a
// network namespace other than the initial one, which the kernel sends no
// events to) the events come from BPF programs on the scheduler's
// tracepoints (bpfevents.go); without both, or when asked to, it polls
// /proc, which is the baseline the connector is compared with. Close puts every tracked process back as it was (policy,
// affinity, cgroup) and removes the engine's cgroups.
package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/procstat"
	"golang.org/x/sys/unix"
)

// Options are the engine's non-policy settings, given by the daemon.
type Options struct {
	// MoveToLane puts a process into a network lane for rule r (the daemon's datapath
	// creates lane cgroups under cgroup v2). Nil: lane rules are logged only.
	MoveToLane func(pid int, l lane.Lane, r config.TaskRule) error
	// Poll, if > 0, scans /proc at this interval instead of using the proc
	// connector (the 1 s polling baseline uses time.Second).
	Poll time.Duration
	// OnApply is called after a rule has been applied (tests, metrics).
	OnApply func(Applied)
	// Log receives the engine's messages; nil uses slog.Default().
	Log *slog.Logger
	// NoWatchdog disables the watchdog whatever the policy says (tests of
	// other parts that must not start RT threads).
	NoWatchdog bool
	// BPFEvents takes process events from the BPF tracepoint programs even
	// where the proc connector works (tests comparing the two).
	BPFEvents bool
	// Netns is the inode of the network namespace whose processes the
	// engine acts on (netns.go); 0: every process.
	Netns uint64
}

// Applied records one application of a rule.
type Applied struct {
	PID       int           `json:"pid"`
	Comm      string        `json:"comm"`
	Rule      string        `json:"rule"`
	RuleIndex int           `json:"rule_index"`
	Source    string        `json:"source"` // scan, exec, fork, comm, poll
	Reaction  time.Duration `json:"reaction_ns"`
	Err       string        `json:"error,omitempty"`
}

// tracked is a process the engine has applied a rule to.
type tracked struct {
	rule       config.TaskRule
	idx        int
	key        string // which effective rule (see Ruleset.Match)
	threads    map[int]savedThread
	rt         bool
	demoted    bool
	cgroupOrig string // path in the cpu hierarchy before we moved it; "" if not moved
}

// Engine applies task rules to processes as they start.
type Engine struct {
	rules  *Ruleset
	safety config.TaskSafety
	opt    Options
	log    *slog.Logger
	cg     CPUCgroup

	mu          sync.Mutex
	procs       map[int]*tracked
	reactions   []time.Duration
	promoted    uint64 // rules applied to a process (promotions), for metrics
	demotions   int
	lastDemo    string // reason of the last watchdog demotion
	mode        string
	conn        eventSource
	scoped      bool       // conn reports only Netns's processes (netns.go)
	unreadNetns sync.Once  // the warning of elsewhere (netns.go)
	pace        eventPacer // the watcher thread's own (eventpace.go)
	wd          *watchdog
	closed      bool
}

// New compiles the rules; it starts nothing.
func New(c config.TaskSections, opt Options) (*Engine, error) {
	s := c.Safety.WithDefaults()
	rs, err := Compile(c.Tasks, s)
	if err != nil {
		return nil, err
	}
	e := &Engine{rules: rs, safety: s, opt: opt, log: opt.Log, procs: map[int]*tracked{}}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.log = e.log.With("component", "sched")
	for _, r := range c.Tasks {
		if r.CPUWeight != 0 || r.CPUIdle {
			e.cg = DetectCPUCgroup()
			break
		}
	}
	return e, nil
}

// watcherNice is the nice value of the thread that reads events and applies
// rules: under CPU load a nice-0 watcher took ~50 ms to react (it competes
// with the load); -10 gives it ~10x the weight of a nice-0 hog, so it runs
// at once, without the risks of an RT watcher (a fork storm cannot starve
// the machine through it).
const watcherNice = -10

// Run watches processes until ctx ends. It returns nil on cancellation.
// The work runs on a thread of its own at nice watcherNice.
func (e *Engine) Run(ctx context.Context) error {
	if e.rules.Len() == 0 {
		<-ctx.Done()
		return nil
	}
	if e.hasRT() && *e.safety.Watchdog.Enabled && !e.opt.NoWatchdog {
		e.wd = newWatchdog(e.safety.Watchdog, e.safety.MaxRTPriority+1, e.demoteAll, e.log)
		go e.wd.run(ctx)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, nice and all.
		runtime.LockOSThread()
		a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: watcherNice}
		if err := unix.SchedSetAttr(0, &a, 0); err != nil {
			e.log.Debug("watcher thread keeps default nice", "err", err)
		}
		errc <- e.watch(ctx)
	}()
	return <-errc
}

func (e *Engine) watch(ctx context.Context) error {
	if e.opt.Poll <= 0 {
		src, mode, err := e.openSource()
		if err == nil {
			e.mu.Lock()
			e.conn = src
			e.mu.Unlock()
			e.scan("scan")
			e.mu.Lock()
			e.mode = mode // ready: subscribed and scanned
			e.mu.Unlock()
			return e.listen(ctx, src)
		}
		e.log.Warn("no process events, polling /proc every 1s", "err", err)
		e.opt.Poll = time.Second
	}
	e.scan("scan")
	e.mu.Lock()
	e.mode = "poll " + e.opt.Poll.String()
	e.mu.Unlock()
	t := time.NewTicker(e.opt.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			e.scan("poll")
		}
	}
}

// openSource subscribes to process events: the proc connector, else the
// BPF tracepoint programs; it names the one it took.
func (e *Engine) openSource() (eventSource, string, error) {
	src, mode, cerr, err := openEventSource(e.opt.BPFEvents, uint32(e.opt.Netns))
	if err == nil && cerr != nil {
		e.log.Info("process events from BPF tracepoints", "proc_connector", cerr)
	}
	e.scoped = err == nil && cerr != nil // the BPF source, for e.opt.Netns
	return src, mode, err
}

func (e *Engine) hasRT() bool {
	for _, r := range e.rules.rules {
		if r.IsRT() {
			return true
		}
	}
	return false
}

func (e *Engine) listen(ctx context.Context, conn eventSource) error {
	if err := conn.SetReadTimeout(200 * time.Millisecond); err != nil {
		return fmt.Errorf("proc connector timeout: %w", err)
	}
	var evs []Event
	for ctx.Err() == nil {
		var err error
		evs, err = conn.Read(evs[:0])
		now := time.Now()
		for _, ev := range e.pace.due(now) {
			e.handle(ev)
		}
		if run, overruns, dropped := e.pace.rescanNow(now); run {
			e.log.Warn("process events lost, rescanning /proc (at most once per "+rescanEvery.String()+")",
				"overruns", overruns, "dropped_over_uid_rate", dropped)
			e.scan("scan")
		}
		switch {
		case errors.Is(err, errTimeout):
			continue
		case errors.Is(err, ErrOverrun):
			e.pace.overruns++
			e.pace.rescan = true
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, ev := range evs {
			if e.foreignEvent(ev) {
				continue
			}
			if (ev.What == procEventExec || ev.What == procEventComm && ev.PID == ev.TGID) && !e.pace.admit(ev, now) {
				continue
			}
			e.handle(ev)
		}
	}
	return nil
}

func (e *Engine) handle(ev Event) {
	switch ev.What {
	case procEventExec:
		e.consider(ev.TGID, "exec", int64(ev.TimeNS))
	case procEventComm:
		if ev.PID == ev.TGID {
			e.consider(ev.TGID, "comm", int64(ev.TimeNS))
		}
	case procEventFork:
		if ev.PID != ev.TGID {
			e.newThread(ev.TGID, ev.PID)
			return
		}
		e.mu.Lock()
		_, parentTracked := e.procs[ev.ParentTG]
		e.mu.Unlock()
		if parentTracked || e.rules.NeedsParent() {
			e.consider(ev.TGID, "fork", int64(ev.TimeNS))
		}
	case procEventExit:
		if ev.PID == ev.TGID {
			e.pace.forget(ev.TGID)
		}
		e.mu.Lock()
		if ev.PID == ev.TGID {
			delete(e.procs, ev.TGID)
		} else if t := e.procs[ev.TGID]; t != nil {
			delete(t.threads, ev.PID)
		}
		e.mu.Unlock()
	}
}

// scan looks at every process in /proc not tracked yet.
func (e *Engine) scan(source string) {
	pids, err := listPIDs()
	if err != nil {
		e.log.Error("scan /proc", "err", err)
		return
	}
	self := os.Getpid()
	for _, pid := range pids {
		if pid == self {
			continue
		}
		e.mu.Lock()
		_, known := e.procs[pid]
		e.mu.Unlock()
		if known {
			continue
		}
		var since int64
		if source == "poll" {
			since = startTimeMono(pid)
		}
		e.consider(pid, source, since)
	}
}

// consider matches a process and applies (or changes) its rule. sinceNS is
// the CLOCK_MONOTONIC time of the triggering event (0: no reaction time).
func (e *Engine) consider(pid int, source string, sinceNS int64) {
	if pid == os.Getpid() {
		return
	}
	p, err := readProc(pid, e.rules.need)
	if err != nil {
		if !isGone(err) {
			e.log.Debug("read process", "pid", pid, "err", err)
		}
		return
	}
	// the namespace is read after what the rules match, for every source:
	// a child forked here that enters another namespace and then execs
	// (ip netns exec) read between the two looked like ours and matched as
	// the new program, and the event of its first exec (of ip, still in
	// our namespace) may be read after the second: what the kernel's
	// filter saw at the event is not the namespace it lives in now
	if e.elsewhere(pid) {
		e.mu.Lock()
		e.leftLocked(pid)
		e.mu.Unlock()
		return
	}
	r, idx := e.rules.Match(p)
	key := fmt.Sprintf("%d|%v", idx, r)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if t := e.procs[pid]; t != nil {
		if t.key == key {
			return
		}
		// A new image or name that another rule (or none) matches.
		if err := e.revertLocked(pid, t); err != nil {
			e.log.Warn("revert", "pid", pid, "err", err)
		}
		delete(e.procs, pid)
	}
	if idx < 0 {
		return
	}
	a := Applied{PID: pid, Comm: p.Comm, Rule: r.Name, RuleIndex: idx, Source: source}
	t, err := e.applyLocked(pid, r, idx)
	if err == nil {
		e.promoted++
	}
	if sinceNS > 0 {
		a.Reaction = time.Duration(monoclock.Now() - sinceNS)
		if err == nil && len(e.reactions) < 100000 {
			e.reactions = append(e.reactions, a.Reaction)
		}
	}
	if err != nil {
		a.Err = err.Error()
		if !isGone(err) {
			e.log.Warn("apply task rule", "pid", pid, "comm", p.Comm, "rule", ruleLabel(r, idx), "err", err)
		}
	}
	if t != nil {
		t.key = key
		e.procs[pid] = t
	}
	if err == nil {
		e.log.Debug("applied task rule", "pid", pid, "comm", p.Comm, "rule", ruleLabel(r, idx), "source", source, "reaction", a.Reaction)
	}
	if e.opt.OnApply != nil {
		e.opt.OnApply(a)
	}
}

func ruleLabel(r config.TaskRule, idx int) string {
	if r.Name != "" {
		return r.Name
	}
	return "tasks[" + strconv.Itoa(idx) + "]"
}

// applyLocked applies r to every thread of pid. On a partial failure the
// returned tracked still records what was changed so it can be reverted.
func (e *Engine) applyLocked(pid int, r config.TaskRule, idx int) (*tracked, error) {
	tids, err := threads(pid)
	if err != nil {
		return nil, err
	}
	t := &tracked{rule: r, idx: idx, threads: map[int]savedThread{}, rt: r.IsRT()}
	var errs []error
	if t.rt {
		// Limit first, so the process is never RT without the limit.
		if err := limitRTTime(pid, uint64(e.safety.RTTime.D().Microseconds())); err != nil {
			return nil, err
		}
	}
	for _, tid := range tids {
		s, err := applyThread(tid, r)
		if err != nil {
			if !isGone(err) {
				errs = append(errs, err)
			}
			continue
		}
		t.threads[tid] = s
	}
	if r.CPUWeight != 0 || r.CPUIdle {
		if err := e.moveToGroupLocked(pid, r, t); err != nil {
			errs = append(errs, err)
		}
	}
	if r.Lane != lane.Unset {
		if e.opt.MoveToLane == nil {
			e.log.Debug("lane rule without a MoveToLane hook", "pid", pid, "lane", r.Lane)
		} else if err := e.opt.MoveToLane(pid, r.Lane, r); err != nil {
			errs = append(errs, fmt.Errorf("move %d to lane %s: %w", pid, r.Lane, err))
		}
	}
	if len(t.threads) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("pid %d: %w", pid, os.ErrNotExist)
	}
	return t, errors.Join(errs...)
}

func (e *Engine) moveToGroupLocked(pid int, r config.TaskRule, t *tracked) error {
	dir, err := e.cg.group(r.Name, r.CPUWeight, r.CPUIdle)
	if err != nil {
		return err
	}
	orig, err := e.cg.cgroupOf(pid)
	if err != nil {
		return err
	}
	if err := moveTo(dir, pid); err != nil {
		return err
	}
	t.cgroupOrig = orig
	return nil
}

// newThread gives a new thread of a tracked process the process's rule.
func (e *Engine) newThread(tgid, tid int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.procs[tgid]
	if t == nil || t.demoted || e.closed {
		return
	}
	s, err := applyThread(tid, t.rule)
	if err != nil {
		if !isGone(err) {
			e.log.Warn("apply task rule to new thread", "pid", tgid, "tid", tid, "err", err)
		}
		return
	}
	t.threads[tid] = s
}

// revertLocked restores a process's threads and cgroup.
func (e *Engine) revertLocked(pid int, t *tracked) error {
	var errs []error
	for tid, s := range t.threads {
		if err := restoreThread(tid, s, len(t.rule.CPUs) > 0); err != nil {
			errs = append(errs, err)
		}
	}
	if t.cgroupOrig != "" {
		if err := moveTo(filepath.Join(e.cg.Mount, t.cgroupOrig), pid); err != nil && !isGone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// demoteAll is the watchdog's action: every promoted (RT) process becomes
// SCHED_OTHER and is not promoted again while it lives.
func (e *Engine) demoteAll(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for pid, t := range e.procs {
		if !t.rt || t.demoted {
			continue
		}
		tids, err := threads(pid)
		if err != nil {
			continue
		}
		for _, tid := range tids {
			if err := demoteThread(tid); err != nil {
				e.log.Warn("watchdog demote", "pid", pid, "tid", tid, "err", err)
			}
		}
		t.demoted = true
		n++
		e.log.Warn("watchdog demoted real-time process", "pid", pid, "rule", ruleLabel(t.rule, t.idx), "reason", reason)
	}
	e.demotions += n
	if n > 0 {
		e.lastDemo = reason
	}
	return n
}

// Status is a snapshot for `lanes status` and tests.
type Status struct {
	Mode       string  `json:"mode"` // netlink, bpf tracepoints or poll <interval>
	Rules      int     `json:"rules"`
	Tracked    []Task  `json:"tracked"`
	Applied    int     `json:"applied"` // reactions measured
	ReactP50US float64 `json:"reaction_p50_us"`
	ReactP99US float64 `json:"reaction_p99_us"`
	Promotions uint64  `json:"promotions"` // task rules applied since start
	Demotions  int     `json:"watchdog_demotions"`
	LastDemote string  `json:"last_demotion,omitempty"` // the watchdog's reason
	CPUCgroup  string  `json:"cpu_cgroup"`
}

// Task is one tracked process.
type Task struct {
	PID     int    `json:"pid"`
	Rule    string `json:"rule"`
	Threads int    `json:"threads"`
	Demoted bool   `json:"demoted,omitempty"`
}

// Status returns the engine's current state.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Status{Mode: e.mode, Rules: e.rules.Len(), Applied: len(e.reactions), Promotions: e.promoted, Demotions: e.demotions, LastDemote: e.lastDemo, CPUCgroup: e.cg.String()}
	for pid, t := range e.procs {
		s.Tracked = append(s.Tracked, Task{PID: pid, Rule: ruleLabel(t.rule, t.idx), Threads: len(t.threads), Demoted: t.demoted})
	}
	sort.Slice(s.Tracked, func(i, j int) bool { return s.Tracked[i].PID < s.Tracked[j].PID })
	r := append([]time.Duration(nil), e.reactions...)
	sort.Slice(r, func(i, j int) bool { return r[i] < r[j] })
	s.ReactP50US = quantileUS(r, 0.50)
	s.ReactP99US = quantileUS(r, 0.99)
	return s
}

func quantileUS(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Nanoseconds()) / 1e3
}

// Close stops listening and puts every tracked process back as it was.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	for pid, t := range e.procs {
		if err := e.revertLocked(pid, t); err != nil {
			errs = append(errs, err)
		}
	}
	e.procs = map[int]*tracked{}
	if err := e.cg.removeGroups(); err != nil {
		errs = append(errs, fmt.Errorf("remove task cgroups: %w", err))
	}
	if e.conn != nil {
		errs = append(errs, e.conn.Close())
	}
	return errors.Join(errs...)
}

// startTimeMono converts a process's start time (/proc/PID/stat field 22,
// clock ticks since boot) to CLOCK_MONOTONIC ns; 0 if unknown. Boot time and
// monotonic time differ only by time spent suspended.
func startTimeMono(pid int) int64 {
	st, err := procstat.Read(pid)
	if err != nil {
		return 0
	}
	var boot, mono unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot)
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	return int64(st.Start()) - (boot.Nano() - mono.Nano())
}
