// Package latency measures how late a thread wakes up from a periodic
// absolute timer (the "jitter" of docs/papers.md §004, the quantity cyclictest
// reports), optionally under CPU and interrupt load.
//
// Each measuring thread is a goroutine locked to its own OS thread. It sets
// its scheduling policy and CPU affinity on that thread only, then loops:
//
//	next += period
//	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next)
//	late = clock_gettime(CLOCK_MONOTONIC) - next
//
// and files each lateness in a histogram of 1 µs bins up to a bound (larger
// values are counted as overflow, the maximum is kept exactly).
//
// Note: the hot path stays out of the Go runtime. The sleep is a raw
// clock_nanosleep (syscall.RawSyscall6: no entersyscall/exitsyscall, so the
// woken thread never has to win its P back), the timestamp a raw
// clock_gettime(CLOCK_MONOTONIC) (monoclock.NowNoSplit; cyclictest reads the
// same clock through the vDSO, which Go reaches only through a function with
// a stack check), and every function of the loop is go:nosplit, so it has
// no stack check where a cooperative preemption could park the thread. The goroutine
// therefore keeps its P for the whole run: Run raises GOMAXPROCS so the rest
// of the process still has Ps, and turns the garbage collector off (a
// stop-the-world would wait for a thread that never reaches a safe point).
// What the runtime can still do is signal the thread (sysmon's asynchronous
// preemption, SIGURG, every 10 ms of "running"): `lanes latency` re-executes
// itself with GODEBUG=asyncpreemptoff=1 (ExecQuiet) so that it does not.
// docs/tasks.md has the measurements behind this choice. The thread is never
// unlocked: when the goroutine ends the runtime destroys the OS thread, so a
// real-time thread is never returned to the pool.
package latency

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/pmqos"
)

// Policy names accepted by Config.Policy.
var policies = map[string]uint32{
	"other": unix.SCHED_NORMAL,
	"fifo":  unix.SCHED_FIFO,
	"rr":    unix.SCHED_RR,
	"idle":  unix.SCHED_IDLE,
}

// Config describes one measurement run.
type Config struct {
	Period   time.Duration // wake-up period (default 30 ms, as in the paper)
	Duration time.Duration // run this long (0: use Loops)
	Loops    int           // or this many wake-ups per thread
	Policy   string        // other, fifo, rr, idle, or keep (leave the thread as it is, e.g. set from outside)
	Priority int           // 1..99 for fifo/rr, nice value for other
	Threads  int           // measuring threads (default 1)
	Affinity []int         // CPUs; thread i is pinned to Affinity[i%len]; empty: no pinning
	Mlock    bool          // mlockall(MCL_CURRENT|MCL_FUTURE) first
	HistMax  time.Duration // histogram bound (1 µs bins), default 20 ms
	// PMLatency is the CPU wake-up latency (µs) requested through PM QoS
	// while measuring, as cyclictest's --latency (default 0 there and
	// here: idle CPUs only poll); -1 leaves the system's setting alone.
	PMLatency int
	// Setup, if set, runs on each measuring thread after it is locked and
	// before its policy is set (e.g. to enter a network namespace).
	Setup func() error
}

// DefaultConfig is the paper's set-up: one thread, 30 ms period, 10 s.
func DefaultConfig() Config {
	return Config{Period: 30 * time.Millisecond, Duration: 10 * time.Second, Policy: "other",
		Threads: 1, HistMax: 20 * time.Millisecond}
}

// Validate checks the configuration before anything is started.
func (c Config) Validate() error {
	if c.Period < 100*time.Microsecond || c.Period > 10*time.Second {
		return fmt.Errorf("period %v out of range (100µs..10s)", c.Period)
	}
	if c.Duration <= 0 && c.Loops <= 0 {
		return errors.New("need a duration or a loop count")
	}
	p, ok := policies[c.Policy]
	if !ok && c.Policy != "keep" {
		return fmt.Errorf("unknown policy %q (want other, fifo, rr, idle or keep)", c.Policy)
	}
	switch p {
	case unix.SCHED_FIFO, unix.SCHED_RR:
		if c.Priority < 1 || c.Priority > 99 {
			return fmt.Errorf("priority %d out of range for %s (1..99)", c.Priority, c.Policy)
		}
	case unix.SCHED_NORMAL:
		if c.Policy == "keep" {
			break
		}
		if c.Priority < -20 || c.Priority > 19 {
			return fmt.Errorf("priority %d is used as nice for policy other and must be -20..19", c.Priority)
		}
	}
	if c.Threads < 1 || c.Threads > 64 {
		return fmt.Errorf("threads %d out of range (1..64)", c.Threads)
	}
	for _, cpu := range c.Affinity {
		if cpu < 0 || cpu >= runtime.NumCPU() {
			return fmt.Errorf("cpu %d does not exist (have 0..%d)", cpu, runtime.NumCPU()-1)
		}
	}
	if c.PMLatency < -1 {
		return fmt.Errorf("pm latency %d: want µs >= 0, or -1 to leave it alone", c.PMLatency)
	}
	if c.HistMax < time.Microsecond || c.HistMax > 10*time.Second {
		return fmt.Errorf("histogram bound %v out of range (1µs..10s)", c.HistMax)
	}
	return nil
}

// Stats summarises the lateness samples of one thread or of all threads.
// Durations are in microseconds in JSON.
type Stats struct {
	Samples  int      `json:"samples"`
	MinUS    float64  `json:"min_us"`
	AvgUS    float64  `json:"avg_us"`
	P50US    float64  `json:"p50_us"`
	P99US    float64  `json:"p99_us"`
	MaxUS    float64  `json:"max_us"`
	Hist     []uint64 `json:"hist"`     // Hist[i]: samples with i µs <= late < i+1 µs
	Overflow uint64   `json:"overflow"` // samples >= len(Hist) µs
}

// ThreadResult is one measuring thread's outcome.
type ThreadResult struct {
	Thread int   `json:"thread"`
	TID    int   `json:"tid"`
	CPU    int   `json:"cpu"` // pinned CPU, -1 if not pinned
	Stats  Stats `json:"stats"`
}

// Result is a whole run.
type Result struct {
	Tool     string `json:"tool"` // "lanes" or "cyclictest"
	PeriodUS int64  `json:"period_us"`
	Policy   string `json:"policy"`
	Priority int    `json:"priority"`
	// PMLatencyUS is the PM QoS wake-up latency held during the run, -1
	// if none was (not asked, or no /dev/cpu_dma_latency).
	PMLatencyUS int            `json:"pm_latency_us"`
	Threads     []ThreadResult `json:"threads"`
	All         Stats          `json:"all"`
}

// Run measures wake-up lateness as configured. It returns early, with what
// was measured so far, when stop is closed.
func Run(c Config, stop <-chan struct{}) (*Result, error) {
	if c.HistMax == 0 {
		c.HistMax = DefaultConfig().HistMax
	}
	if c.Threads == 0 {
		c.Threads = 1
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// One idle P for every measuring thread beyond the CPUs' worth of other
	// goroutines (see the package comment).
	if want := runtime.NumCPU() + c.Threads + 1; runtime.GOMAXPROCS(0) < want {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(want))
	}
	// No garbage collection while measuring: a stop-the-world phase waits
	// for every running goroutine (e.g. a net-load sender starved by the CPU
	// load) and holds the measuring thread at its syscall exit meanwhile
	// (seen as a 16 ms sample at SCHED_FIFO). The loop does not allocate; the
	// memory limit still forces a collection if something else does a lot.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(512 << 20))
	if c.Mlock {
		if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
			return nil, fmt.Errorf("mlockall: %w", err)
		}
		defer unix.Munlockall()
	}
	loops := c.Loops
	if loops <= 0 {
		loops = int(c.Duration / c.Period)
		if loops < 1 {
			loops = 1
		}
	}
	res := &Result{Tool: "lanes", PeriodUS: c.Period.Microseconds(), Policy: c.Policy, Priority: c.Priority,
		PMLatencyUS: -1, Threads: make([]ThreadResult, c.Threads)}
	// A missing PM QoS device (containers, some Android kernels) only
	// leaves the idle states as they are; the result says so.
	if pm, err := pmqos.Hold(c.PMLatency); err == nil && pm != nil {
		defer pm.Close()
		res.PMLatencyUS = c.PMLatency
	}
	hists := make([]*hist, c.Threads)
	errs := make([]error, c.Threads)
	var wg sync.WaitGroup
	// All threads start from one common origin, offset like cyclictest -d 0
	// (same interval, no distance), one period from now.
	for i := range c.Threads {
		cpu := -1
		if len(c.Affinity) > 0 {
			cpu = c.Affinity[i%len(c.Affinity)]
		}
		hists[i] = newHist(c.HistMax)
		res.Threads[i] = ThreadResult{Thread: i, CPU: cpu}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tid, err := measure(c, cpu, loops, hists[i], stop)
			res.Threads[i].TID = tid
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := newHist(c.HistMax)
	for i, h := range hists {
		res.Threads[i].Stats = h.stats()
		all.merge(h)
	}
	res.All = all.stats()
	return res, nil
}

// measure is one thread's loop. It never unlocks its OS thread (see the
// package comment).
func measure(c Config, cpu, loops int, h *hist, stop <-chan struct{}) (int, error) {
	runtime.LockOSThread()
	tid := unix.Gettid()
	if c.Setup != nil {
		if err := c.Setup(); err != nil {
			return tid, fmt.Errorf("thread setup: %w", err)
		}
	}
	if cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return tid, fmt.Errorf("pin thread to cpu %d: %w", cpu, err)
		}
	}
	if c.Policy != "keep" {
		if err := SetThreadPolicy(0, c.Policy, c.Priority); err != nil {
			return tid, err
		}
	}
	var stopped atomic.Bool
	if stop != nil {
		select {
		case <-stop:
			stopped.Store(true)
		default:
		}
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-stop:
				stopped.Store(true)
			case <-done:
			}
		}()
	}
	hotLoop(c.Period.Nanoseconds(), loops, h, &stopped)
	return tid, nil
}

// hotLoop is the measuring loop: sleep to the next point of a fixed grid
// (after a stall the next sleeps are short rather than the stall being hidden
// by re-basing, as cyclictest does), read the clock, file the lateness. It
// calls nothing that can enter the Go scheduler (see the package comment).
//
//go:nosplit
func hotLoop(period int64, loops int, h *hist, stopped *atomic.Bool) {
	next := monoclock.NowNoSplit() + period
	for i := 0; i < loops && !stopped.Load(); i++ {
		sleepUntil(next)
		h.add(monoclock.NowNoSplit() - next)
		next += period
	}
}

// SetThreadPolicy sets the scheduling policy of thread tid (0: the calling
// thread) by name: fifo and rr take a priority 1..99, other takes it as a
// nice value, idle ignores it.
func SetThreadPolicy(tid int, policy string, prio int) error {
	p, ok := policies[policy]
	if !ok {
		return fmt.Errorf("unknown policy %q", policy)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: p}
	switch p {
	case unix.SCHED_FIFO, unix.SCHED_RR:
		attr.Priority = uint32(prio)
	case unix.SCHED_NORMAL:
		attr.Nice = int32(prio)
	}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		return fmt.Errorf("sched_setattr(%s, %d): %w", policy, prio, err)
	}
	return nil
}

// timespec is struct timespec of a 64-bit kernel ABI (amd64, arm64).
type timespec struct{ sec, nsec int64 }

// sleepUntil sleeps until the absolute CLOCK_MONOTONIC time t (ns) by a raw
// system call, restarting after signals.
//
//go:nosplit
func sleepUntil(t int64) {
	ts := timespec{t / 1e9, t % 1e9}
	for {
		_, _, e := syscall.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME,
			uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// hist is a 1 µs-bin histogram that also keeps the exact min, max and sum.
type hist struct {
	bins     []uint64
	overflow uint64
	n        int
	min, max int64
	sum      float64
}

func newHist(bound time.Duration) *hist {
	return &hist{bins: make([]uint64, bound.Microseconds()), min: math.MaxInt64, max: math.MinInt64}
}

//go:nosplit
func (h *hist) add(ns int64) {
	if ns < 0 {
		ns = 0 // can only happen with a broken clock; count it as on time
	}
	us := ns / 1000
	if us < int64(len(h.bins)) {
		h.bins[us]++
	} else {
		h.overflow++
	}
	h.n++
	h.sum += float64(ns)
	h.min = min(h.min, ns)
	h.max = max(h.max, ns)
}

func (h *hist) merge(o *hist) {
	if len(o.bins) > len(h.bins) {
		h.bins = append(h.bins, make([]uint64, len(o.bins)-len(h.bins))...)
	}
	for i, v := range o.bins {
		h.bins[i] += v
	}
	h.overflow += o.overflow
	h.n += o.n
	h.sum += o.sum
	if o.n > 0 {
		h.min = min(h.min, o.min)
		h.max = max(h.max, o.max)
	}
}

func (h *hist) stats() Stats {
	s := Stats{Samples: h.n, Hist: trimHist(h.bins), Overflow: h.overflow}
	if h.n == 0 {
		return s
	}
	s.MinUS = float64(h.min) / 1e3
	s.MaxUS = float64(h.max) / 1e3
	s.AvgUS = h.sum / float64(h.n) / 1e3
	s.P50US = HistQuantile(h.bins, h.overflow, 0.50, s.MaxUS)
	s.P99US = HistQuantile(h.bins, h.overflow, 0.99, s.MaxUS)
	return s
}

// trimHist drops trailing empty bins (JSON stays small).
func trimHist(b []uint64) []uint64 {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return append([]uint64(nil), b[:n]...)
}

// HistQuantile returns the q-quantile (0..1) in µs of a 1 µs-bin histogram:
// the upper edge of the bin holding the rank, i.e. a value no sample below
// the quantile exceeds (cyclictest-style resolution). Ranks falling in the
// overflow are reported as maxUS.
func HistQuantile(bins []uint64, overflow uint64, q, maxUS float64) float64 {
	var total uint64
	for _, v := range bins {
		total += v
	}
	total += overflow
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	if rank < 1 {
		rank = 1
	}
	var cum uint64
	for i, v := range bins {
		cum += v
		if cum >= rank {
			return math.Min(float64(i+1), math.Max(maxUS, float64(i)))
		}
	}
	return maxUS
}

// Quantile returns the q-quantile of unsorted samples (sorted in place).
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}
