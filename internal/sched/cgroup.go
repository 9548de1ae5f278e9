// cgroup.go: the cpu controller, wherever this machine has it. cgroup v2
// (cpu.weight, cpu.idle) is used when the unified hierarchy offers "cpu";
// otherwise the v1 cpu hierarchy (cpu.shares, cpu.idle). Rule groups live
// under <mount>/lanes.tasks/<rule name>.
//
// Note: with CONFIG_RT_GROUP_SCHED a v1 cpu group starts with
// cpu.rt_runtime_us = 0, so RT tasks cannot run in it; rules therefore never
// combine an RT policy with cpu_weight/cpu_idle (Rule.Validate refuses it).
package sched

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const cgroupParent = "lanes.tasks"

// CPUCgroup is the detected cpu controller.
type CPUCgroup struct {
	Version int    // 1 or 2; 0 if none
	Mount   string // mount point of the hierarchy holding cpu
	HasIdle bool   // cpu.idle exists (5.15+)
}

// DetectCPUCgroup finds the cpu controller: v2 if the unified hierarchy has
// it, else v1.
func DetectCPUCgroup() CPUCgroup {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return CPUCgroup{}
	}
	defer f.Close()
	var v1, v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts ... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			if v2 == "" {
				v2 = pf[4]
			}
		case "cgroup":
			for _, o := range strings.Split(qf[2], ",") {
				if o == "cpu" && v1 == "" {
					v1 = pf[4]
				}
			}
		}
	}
	if v2 != "" {
		if b, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers")); err == nil {
			for _, c := range strings.Fields(string(b)) {
				if c == "cpu" {
					return CPUCgroup{Version: 2, Mount: v2, HasIdle: v2HasIdle(v2)}
				}
			}
		}
	}
	if v1 != "" {
		return CPUCgroup{Version: 1, Mount: v1, HasIdle: exists(filepath.Join(v1, "cpu.idle"))}
	}
	return CPUCgroup{}
}

func (c CPUCgroup) String() string {
	if c.Version == 0 {
		return "none"
	}
	return fmt.Sprintf("v%d at %s (idle: %v)", c.Version, c.Mount, c.HasIdle)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// v2HasIdle says whether the kernel has cgroup v2 cpu.idle (5.15+). The
// root cgroup has no cpu interface files at all (cpu.stat is in every
// cgroup, whatever the kernel), so it looks at the child cgroups the cpu
// controller is enabled in (those with cpu.weight).
func v2HasIdle(mount string) bool {
	dirs, _ := os.ReadDir(mount)
	for _, d := range dirs {
		if d.IsDir() && exists(filepath.Join(mount, d.Name(), "cpu.weight")) {
			return exists(filepath.Join(mount, d.Name(), "cpu.idle"))
		}
	}
	return false
}

// group returns (creating it) the cgroup directory of a rule, with weight
// or idle set.
func (c CPUCgroup) group(name string, weight int, idle bool) (string, error) {
	if c.Version == 0 {
		return "", errors.New("no cpu cgroup controller on this machine")
	}
	parent := filepath.Join(c.Mount, cgroupParent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("cgroup %s: %w", parent, err)
	}
	if c.Version == 2 {
		for _, d := range []string{c.Mount, parent} {
			if err := writeFile(filepath.Join(d, "cgroup.subtree_control"), "+cpu"); err != nil {
				return "", err
			}
		}
	}
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("cgroup %s: %w", dir, err)
	}
	hasIdle := c.HasIdle
	if c.Version == 2 {
		// the rule's own group, cpu enabled above it, says for certain
		hasIdle = exists(filepath.Join(dir, "cpu.idle"))
	}
	switch {
	case idle && hasIdle:
		if err := writeFile(filepath.Join(dir, "cpu.idle"), "1"); err != nil {
			return "", err
		}
	case idle:
		// No cpu.idle: the lowest weight is the closest treatment.
		weight = 1
		fallthrough
	case weight > 0:
		if c.Version == 2 {
			if err := writeFile(filepath.Join(dir, "cpu.weight"), strconv.Itoa(weight)); err != nil {
				return "", err
			}
		} else {
			// v2 weight 100 = v1 shares 1024; v1 minimum is 2.
			if err := writeFile(filepath.Join(dir, "cpu.shares"), strconv.Itoa(max(2, weight*1024/100))); err != nil {
				return "", err
			}
		}
	}
	return dir, nil
}

// moveTo puts a whole process into a cgroup directory.
func moveTo(dir string, pid int) error {
	return writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
}

// cgroupOf returns the process's path in the hierarchy of c.
func (c CPUCgroup) cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if c.Version == 2 && f[0] == "0" && f[1] == "" {
			return f[2], nil
		}
		if c.Version == 1 {
			for _, ctl := range strings.Split(f[1], ",") {
				if ctl == "cpu" {
					return f[2], nil
				}
			}
		}
	}
	return "", fmt.Errorf("pid %d: no cpu cgroup line", pid)
}

// removeGroups deletes the rule groups and their parent (empty ones only).
func (c CPUCgroup) removeGroups() error {
	if c.Version == 0 {
		return nil
	}
	parent := filepath.Join(c.Mount, cgroupParent)
	ents, err := os.ReadDir(parent)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			if err := os.Remove(filepath.Join(parent, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.Remove(parent); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func writeFile(p, v string) error {
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", v, p, err)
	}
	return nil
}
