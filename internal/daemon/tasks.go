// tasks.go: runs the task policy engine (internal/sched) inside the daemon
// for the policy's task rules and for lane rules that match processes by
// executable or name (those move matching processes into the lane cgroup as
// they start, through the proc connector). Both reach the processes of the
// daemon's network namespace only.
package daemon

import (
	"context"
	"fmt"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/sched"
)

type taskEngine struct {
	eng    *sched.Engine
	cancel context.CancelFunc
	done   chan error
}

func (d *Daemon) startTasks(ctx context.Context) error {
	d.kernel.mu.Lock()
	pol := d.kernel.pol
	d.kernel.mu.Unlock()
	cfg := pol.TaskSections
	cfg.Tasks = append(append([]config.TaskRule(nil), cfg.Tasks...), pol.ProcessLaneRules()...)
	if len(cfg.Tasks) == 0 {
		return nil
	}
	// its own namespace's processes only: another daemon serves the others
	eng, err := sched.New(cfg, sched.Options{MoveToLane: d.mover.movePID, Log: d.log, Netns: d.handlers.netns.Inode})
	if err != nil {
		return fmt.Errorf("task rules: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &taskEngine{eng: eng, cancel: cancel, done: make(chan error, 1)}
	go func() { t.done <- eng.Run(ctx) }()
	d.kernel.mu.Lock()
	d.kernel.tasks = t
	d.kernel.mu.Unlock()
	return nil
}

func (d *Daemon) stopTasks() {
	d.kernel.mu.Lock()
	t := d.kernel.tasks
	d.kernel.tasks = nil
	d.kernel.mu.Unlock()
	if t == nil {
		return
	}
	t.cancel()
	if err := <-t.done; err != nil && err != context.Canceled {
		d.log.Warn("task engine", "err", err)
	}
	if err := t.eng.Close(); err != nil {
		d.log.Warn("task engine close", "err", err)
	}
}

// tasksStatus is the task engine's status (on: an engine runs), read
// outside the kernel lock: the engine moves a process to its lane under
// its own lock and takes the kernel's there (applyLocked, MoveToLane), so
// reading it under the kernel's deadlocked status beside a rule's move.
func (h *apiHandlers) tasksStatus() (s sched.Status, on bool) {
	h.kernel.mu.Lock()
	t := h.kernel.tasks
	h.kernel.mu.Unlock()
	if t == nil {
		return s, false
	}
	return t.eng.Status(), true
}

// taskSummary is status's line of the task engine.
func taskSummary(s sched.Status) string {
	return fmt.Sprintf("%s, %d rules, %d processes tracked, reaction p50 %.0f us p99 %.0f us, watchdog demotions %d",
		s.Mode, s.Rules, len(s.Tracked), s.ReactP50US, s.ReactP99US, s.Demotions)
}
