// watchdog.go: the rtkit-style starvation watchdog. One canary thread per
// CPU, pinned there at SCHED_OTHER, stamps the time every Interval; one
// watchdog thread at an RT priority above anything a rule may grant checks
// the stamps. If some CPU's canary has not run for Starve, normal tasks are
// starving there and every promoted process is demoted to SCHED_OTHER.
//
// Note: even a runaway SCHED_FIFO loop leaves normal tasks 5% of each CPU
// through RT throttling (sched_rt_runtime_us 950000 of 1000000), so the
// canary's gap is about 950 ms; the default Starve of 800 ms catches it,
// while a brief legitimate RT burst does not trigger.
package sched

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/monoclock"
)

type watchdog struct {
	cfg    config.TaskWatchdog
	prio   int
	demote func(reason string) int
	log    *slog.Logger
	last   []atomic.Int64 // per CPU: last canary stamp (CLOCK_MONOTONIC ns)
	fired  atomic.Int64
}

func newWatchdog(cfg config.TaskWatchdog, prio int, demote func(string) int, log *slog.Logger) *watchdog {
	return &watchdog{cfg: cfg, prio: min(99, max(1, prio)), demote: demote, log: log, last: make([]atomic.Int64, runtime.NumCPU())}
}

func (w *watchdog) run(ctx context.Context) {
	now := monoclock.Now()
	for cpu := range w.last {
		w.last[cpu].Store(now)
		go w.canary(ctx, cpu)
	}
	w.check(ctx)
}

// canary runs on its own thread pinned to cpu at normal priority. The
// thread is never unlocked: it ends with the goroutine.
func (w *watchdog) canary(ctx context.Context, cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		w.log.Warn("watchdog canary: cannot pin, CPU not watched", "cpu", cpu, "err", err)
		w.last[cpu].Store(1 << 62) // never stale
		return
	}
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	_ = unix.SchedSetAttr(0, &a, 0)
	ts := unix.NsecToTimespec(w.cfg.Interval.D().Nanoseconds())
	for ctx.Err() == nil {
		w.last[cpu].Store(monoclock.Now())
		_ = unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, nil)
	}
}

// check runs on an RT thread above every rule's priority.
func (w *watchdog) check(ctx context.Context) {
	runtime.LockOSThread()
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(w.prio),
		Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	if err := unix.SchedSetAttr(0, &a, 0); err != nil {
		w.log.Warn("watchdog runs without RT priority; it may itself starve", "err", err)
	}
	ts := unix.NsecToTimespec(w.cfg.Interval.D().Nanoseconds())
	starve := w.cfg.Starve.D().Nanoseconds()
	for ctx.Err() == nil {
		_ = unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &ts, nil)
		now := monoclock.Now()
		for cpu := range w.last {
			gap := now - w.last[cpu].Load()
			if gap <= starve {
				continue
			}
			reason := fmt.Sprintf("normal tasks on cpu %d starved for %v", cpu, time.Duration(gap).Round(time.Millisecond))
			n := w.demote(reason)
			w.fired.Add(1)
			if n == 0 {
				w.log.Warn("watchdog: starvation but no promoted task to demote", "cpu", cpu, "gap", time.Duration(gap))
			}
			// Start counting afresh for this CPU.
			w.last[cpu].Store(now)
		}
	}
}
