// tasks.go is the policy's `tasks:` rules and `task_safety:` section (run
// by internal/sched, the task policy engine): what a rule matches and
// applies, and the safety ceiling every rule is checked against.
package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
)

// TaskRule is one entry of the policy's `tasks:` list. All match fields that are
// set must match (AND); a rule with no match field is refused. The first
// matching rule wins.
type TaskRule struct {
	Name string `yaml:"name"`

	// Match.
	Exe     string `yaml:"exe"`     // executable: absolute path or base name; shell glob allowed
	Comm    string `yaml:"comm"`    // /proc/PID/comm (15 chars); shell glob allowed
	Cmdline string `yaml:"cmdline"` // regular expression over the NUL-separated-as-space command line
	UID     *UID   `yaml:"uid"`     // real uid: a user name or number
	Cgroup  string `yaml:"cgroup"`  // cgroup path prefix (v2 path, or any v1 hierarchy's path)
	Parent  string `yaml:"parent"`  // parent's comm; shell glob allowed

	// Apply.
	Policy      string    `yaml:"policy"`        // fifo, rr, other, batch, idle; empty: leave as is
	Priority    int       `yaml:"priority"`      // 1..max_rt_priority for fifo/rr
	Nice        *int      `yaml:"nice"`          // -20..19 for other/batch (or with no policy)
	CPUs        []int     `yaml:"cpus"`          // CPU affinity
	Lane        lane.Lane `yaml:"lane"`          // network lane, through the daemon's MoveToLane hook
	CPUWeight   int       `yaml:"cpu_weight"`    // cgroup cpu weight 1..10000 (v2 scale; v1 shares = weight*1024/100)
	CPUIdle     bool      `yaml:"cpu_idle"`      // cgroup cpu.idle = 1
	ResetOnFork *bool     `yaml:"reset_on_fork"` // RT only; default true: children do not inherit RT
}

// TaskSafety is the policy's `task_safety:` section.
type TaskSafety struct {
	MaxRTPriority int          `yaml:"max_rt_priority"` // ceiling for rules (default 50)
	RTTime        Duration     `yaml:"rttime"`          // RLIMIT_RTTIME on promoted processes (default 200ms, as rtkit)
	Watchdog      TaskWatchdog `yaml:"watchdog"`
}

// TaskWatchdog demotes every promoted task when a normal-priority canary thread
// on some CPU has not run for Starve.
type TaskWatchdog struct {
	Enabled  *bool    `yaml:"enabled"`  // default true
	Starve   Duration `yaml:"starve"`   // default 800ms (the RT throttle leaves 50ms/1s: a 950ms gap)
	Interval Duration `yaml:"interval"` // canary tick, default 50ms
}

// TaskSections is both sections; the policy embeds it inline:
//
//	type Policy struct { ...; config.TaskSections `yaml:",inline"` }
type TaskSections struct {
	Tasks  []TaskRule `yaml:"tasks"`
	Safety TaskSafety `yaml:"task_safety"`
}

// DefaultTaskSections has no rules and rtkit-like safety.
func DefaultTaskSections() TaskSections { return TaskSections{Safety: DefaultTaskSafety()} }

// DefaultTaskSafety is the safety section used for unset fields.
func DefaultTaskSafety() TaskSafety {
	on := true
	return TaskSafety{MaxRTPriority: 50, RTTime: Duration(200 * time.Millisecond),
		Watchdog: TaskWatchdog{Enabled: &on, Starve: Duration(800 * time.Millisecond), Interval: Duration(50 * time.Millisecond)}}
}

// WithDefaults fills unset safety fields from DefaultTaskSafety.
func (s TaskSafety) WithDefaults() TaskSafety {
	d := DefaultTaskSafety()
	if s.MaxRTPriority == 0 {
		s.MaxRTPriority = d.MaxRTPriority
	}
	if s.RTTime == 0 {
		s.RTTime = d.RTTime
	}
	if s.Watchdog.Enabled == nil {
		s.Watchdog.Enabled = d.Watchdog.Enabled
	}
	if s.Watchdog.Starve == 0 {
		s.Watchdog.Starve = d.Watchdog.Starve
	}
	if s.Watchdog.Interval == 0 {
		s.Watchdog.Interval = d.Watchdog.Interval
	}
	return s
}

// Validate checks both sections; errors are *FieldError with paths
// like "tasks[2].priority" or "task_safety.rttime".
func (c TaskSections) Validate() error {
	if err := c.Safety.Validate(); err != nil {
		return Prefix("task_safety", err)
	}
	s := c.Safety.WithDefaults()
	names := map[string]int{}
	var errs []error
	for i, r := range c.Tasks {
		if err := r.Validate(s); err != nil {
			errs = append(errs, Prefix(fmt.Sprintf("tasks[%d]", i), err))
		}
		if r.Name != "" {
			if j, dup := names[r.Name]; dup {
				errs = append(errs, Errorf(fmt.Sprintf("tasks[%d].name", i), "duplicate rule name %q (also tasks[%d])", r.Name, j))
				continue
			}
			names[r.Name] = i
		}
	}
	return errors.Join(errs...)
}

// Validate checks the safety section (unset fields take defaults).
func (s TaskSafety) Validate() error {
	if s.MaxRTPriority < 0 || s.MaxRTPriority > 98 {
		return Errorf("max_rt_priority", "%d out of range 1..98 (99 is kept for the watchdog)", s.MaxRTPriority)
	}
	if s.RTTime < 0 || (s.RTTime != 0 && s.RTTime.D() < time.Millisecond) || s.RTTime.D() > time.Hour {
		return Errorf("rttime", "%v out of range (1ms..1h)", s.RTTime)
	}
	w := s.Watchdog
	if w.Interval < 0 || (w.Interval != 0 && w.Interval.D() < time.Millisecond) {
		return Errorf("watchdog.interval", "%v too short (min 1ms)", w.Interval)
	}
	if w.Starve < 0 {
		return Errorf("watchdog.starve", "negative")
	}
	ws := s.WithDefaults().Watchdog
	if ws.Starve.D() < 2*ws.Interval.D() {
		return Errorf("watchdog.starve", "%v must be at least twice the interval %v", ws.Starve, ws.Interval)
	}
	return nil
}

var policyNames = map[string]bool{"": true, "other": true, "normal": true, "batch": true, "idle": true, "fifo": true, "rr": true}

// IsRT says whether the rule asks for a real-time policy.
func (r TaskRule) IsRT() bool { return r.Policy == "fifo" || r.Policy == "rr" }

// Validate checks one rule against the (defaulted) safety section.
func (r TaskRule) Validate(s TaskSafety) error {
	if r.Exe == "" && r.Comm == "" && r.Cmdline == "" && r.UID == nil && r.Cgroup == "" && r.Parent == "" {
		return Errorf("", "rule matches nothing: set at least one of exe, comm, cmdline, uid, cgroup, parent")
	}
	for _, g := range []struct{ field, pat string }{{"exe", r.Exe}, {"comm", r.Comm}, {"parent", r.Parent}} {
		if _, err := filepath.Match(g.pat, ""); err != nil {
			return Errorf(g.field, "bad glob %q: %v", g.pat, err)
		}
	}
	if r.Exe != "" && strings.Contains(r.Exe, "/") && !strings.HasPrefix(r.Exe, "/") {
		return Errorf("exe", "%q: want an absolute path or a base name", r.Exe)
	}
	if len(r.Comm) > 15 && !strings.ContainsAny(r.Comm, "*?[") {
		return Errorf("comm", "%q is longer than 15 characters and can never match (the kernel truncates comm)", r.Comm)
	}
	if r.Cmdline != "" {
		if _, err := regexp.Compile(r.Cmdline); err != nil {
			return Errorf("cmdline", "bad regular expression: %v", err)
		}
	}
	if r.Cgroup != "" && !strings.HasPrefix(r.Cgroup, "/") {
		return Errorf("cgroup", "%q: want a path starting with /", r.Cgroup)
	}
	if !policyNames[r.Policy] {
		return Errorf("policy", "unknown policy %q (want fifo, rr, other, batch or idle)", r.Policy)
	}
	if r.IsRT() {
		if r.Priority < 1 || r.Priority > s.MaxRTPriority {
			return Errorf("priority", "%d out of range 1..%d (task_safety.max_rt_priority)", r.Priority, s.MaxRTPriority)
		}
		if r.Nice != nil {
			return Errorf("nice", "nice has no effect with policy %s", r.Policy)
		}
		if r.CPUWeight != 0 || r.CPUIdle {
			return Errorf("policy", "cpu_weight/cpu_idle are for normal tasks, not %s (with RT group scheduling a cpu cgroup without RT runtime would refuse it)", r.Policy)
		}
	} else {
		if r.Priority != 0 {
			return Errorf("priority", "priority is only for fifo/rr (use nice for %q)", r.Policy)
		}
		if r.ResetOnFork != nil {
			return Errorf("reset_on_fork", "only meaningful with fifo/rr")
		}
	}
	if r.Nice != nil && (*r.Nice < -20 || *r.Nice > 19) {
		return Errorf("nice", "%d out of range -20..19", *r.Nice)
	}
	if r.Policy == "idle" && r.Nice != nil {
		return Errorf("nice", "nice has no effect with policy idle")
	}
	for i, c := range r.CPUs {
		if c < 0 || c >= 1024 {
			return Errorf(fmt.Sprintf("cpus[%d]", i), "cpu %d out of range", c)
		}
	}
	if r.CPUWeight != 0 && (r.CPUWeight < 1 || r.CPUWeight > 10000) {
		return Errorf("cpu_weight", "%d out of range 1..10000", r.CPUWeight)
	}
	if r.CPUWeight != 0 && r.CPUIdle {
		return Errorf("cpu_idle", "cpu_idle and cpu_weight exclude each other")
	}
	if r.Name != "" && !validName(r.Name) {
		return Errorf("name", "%q: use letters, digits, '-', '_' and '.' only (it names a cgroup)", r.Name)
	}
	if (r.CPUWeight != 0 || r.CPUIdle) && r.Name == "" {
		return Errorf("name", "a rule with cpu_weight or cpu_idle needs a name (it names the cgroup)")
	}
	return nil
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
