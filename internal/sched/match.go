// match.go: rules compiled once (regular expressions) and matched against a
// ProcInfo. Matching is pure, so it is tested with tables.
package sched

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// compiled is a validated rule ready to match.
type compiled struct {
	config.TaskRule
	index   int
	cmdline *regexp.Regexp
}

// Ruleset is an ordered list of compiled rules; the first match wins.
type Ruleset struct {
	rules []compiled
	need  int // process fields the rules look at (need* bits)
}

// Compile validates the rules against the safety section and compiles them.
func Compile(rules []config.TaskRule, s config.TaskSafety) (*Ruleset, error) {
	c := config.TaskSections{Tasks: rules, Safety: s}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rs := &Ruleset{}
	for i, r := range rules {
		cr := compiled{TaskRule: r, index: i}
		if r.Cmdline != "" {
			cr.cmdline = regexp.MustCompile(r.Cmdline) // validated above
		}
		rs.rules = append(rs.rules, cr)
		if r.Exe != "" {
			rs.need |= needExe
		}
		if r.Cmdline != "" {
			rs.need |= needCmdline
		}
		if r.Cgroup != "" {
			rs.need |= needCgroup
		}
		if r.Parent != "" {
			rs.need |= needParent
		}
	}
	return rs, nil
}

// Len is the number of rules.
func (rs *Ruleset) Len() int { return len(rs.rules) }

// Match returns the rule to apply to p and the index of the first matching
// rule, or -1. The first match wins for each kind of action separately: the
// CPU treatment (policy, nice, cpus, cgroup) comes from the first matching
// rule that has one, the lane from the first matching rule that sets one —
// so a lane-only rule (e.g. from the policy's lane rules, appended after the
// task rules) still gives its lane to a process a task rule promotes.
func (rs *Ruleset) Match(p *ProcInfo) (config.TaskRule, int) {
	first, cpu, ln := -1, -1, -1
	for i, r := range rs.rules {
		if (cpu >= 0 || !hasCPU(r.TaskRule)) && (ln >= 0 || r.Lane == lane.Unset) && first >= 0 {
			continue // could not contribute anything new
		}
		if !r.matches(p) {
			continue
		}
		if first < 0 {
			first = i
		}
		if cpu < 0 && hasCPU(r.TaskRule) {
			cpu = i
		}
		if ln < 0 && r.Lane != lane.Unset {
			ln = i
		}
	}
	if first < 0 {
		return config.TaskRule{}, -1
	}
	eff := rs.rules[first].TaskRule
	if cpu >= 0 && cpu != first {
		l := eff.Lane
		eff = rs.rules[cpu].TaskRule
		eff.Lane = l
	}
	if ln >= 0 && eff.Lane == lane.Unset {
		eff.Lane = rs.rules[ln].Lane
		if eff.Name != "" && rs.rules[ln].Name != "" && ln != cpu {
			eff.Name += "+" + rs.rules[ln].Name
		}
	}
	return eff, first
}

// hasCPU says whether the rule sets any CPU treatment.
func hasCPU(r config.TaskRule) bool {
	return r.Policy != "" || r.Nice != nil || len(r.CPUs) > 0 || r.CPUWeight != 0 || r.CPUIdle
}

// NeedsParent says whether any rule matches on the parent (fork events of
// processes that never exec matter then).
func (rs *Ruleset) NeedsParent() bool {
	for _, r := range rs.rules {
		if r.Parent != "" {
			return true
		}
	}
	return false
}

func (r compiled) matches(p *ProcInfo) bool {
	if r.Exe != "" {
		if p.Exe == "" {
			return false
		}
		target := p.Exe
		if !strings.Contains(r.Exe, "/") {
			target = filepath.Base(p.Exe)
		}
		if !glob(r.Exe, target) {
			return false
		}
	}
	if r.Comm != "" && !glob(r.Comm, p.Comm) {
		return false
	}
	if r.cmdline != nil && !r.cmdline.MatchString(p.Cmdline) {
		return false
	}
	if r.UID != nil && uint32(*r.UID) != p.UID {
		return false
	}
	if r.Cgroup != "" && !cgroupMatch(r.Cgroup, p.Cgroups) {
		return false
	}
	if r.Parent != "" && !glob(r.Parent, p.ParentComm) {
		return false
	}
	return true
}

func glob(pattern, s string) bool {
	ok, err := filepath.Match(pattern, s)
	return err == nil && ok
}

// cgroupMatch: the rule's path is a prefix of one of the process's cgroup
// paths, on a path-component boundary ("/a" matches "/a" and "/a/b", not "/ab").
func cgroupMatch(prefix string, paths []string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	for _, p := range paths {
		if prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}
