// kernel.go: what the kernel offers real-time tasks, for `lanes doctor` and
// `lanes tune preempt`: the preemption model (PREEMPT_DYNAMIC mode through
// debugfs, mounted if needed), HZ, and RT throttling.
//
// Sources, in order: /sys/kernel/debug/sched/preempt (the live dynamic mode,
// "none voluntary (full) lazy"); the build config (/proc/config.gz or
// /boot/config-<release>); the preempt= boot parameter; uname -v. debugfs
// may be unreadable (kernel lockdown), in which case the mode is inferred
// from the config default and the command line, and says so.
package sched

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// KernelRT is the kernel's real-time picture.
type KernelRT struct {
	Release        string   `json:"release"`
	PreemptModel   string   `json:"preempt_model"`   // none, voluntary, full, lazy, rt
	PreemptSource  string   `json:"preempt_source"`  // debugfs, cmdline, config, uname
	PreemptDynamic bool     `json:"preempt_dynamic"` // can be switched at run time
	PreemptModes   []string `json:"preempt_modes,omitempty"`
	PreemptNote    string   `json:"preempt_note,omitempty"`
	HZ             int      `json:"hz"`
	HZSource       string   `json:"hz_source"` // config or measured
	RTRuntimeUS    int64    `json:"rt_runtime_us"`
	RTPeriodUS     int64    `json:"rt_period_us"`
	RTGroupSched   bool     `json:"rt_group_sched"`
	ProcConnector  bool     `json:"proc_connector"`
}

// RTThrottle describes the RT throttling settings in words.
func (k KernelRT) RTThrottle() string {
	if k.RTRuntimeUS < 0 {
		return "off (sched_rt_runtime_us = -1: RT tasks may starve everything)"
	}
	return fmt.Sprintf("RT tasks get at most %d us of every %d us (%.0f%%)", k.RTRuntimeUS, k.RTPeriodUS,
		100*float64(k.RTRuntimeUS)/float64(max(1, k.RTPeriodUS)))
}

const preemptFile = "/sys/kernel/debug/sched/preempt"

// ReadKernelRT gathers the information; it never fails, it notes what it
// could not read.
func ReadKernelRT() KernelRT {
	var k KernelRT
	var u unix.Utsname
	_ = unix.Uname(&u)
	k.Release = kernelRelease()
	version := unix.ByteSliceToString(u.Version[:])
	cfg := kernelConfig(k.Release)
	k.PreemptDynamic = cfg["CONFIG_PREEMPT_DYNAMIC"] == "y" || strings.Contains(version, "PREEMPT_DYNAMIC")
	k.RTGroupSched = cfg["CONFIG_RT_GROUP_SCHED"] == "y"
	k.ProcConnector = cfg["CONFIG_PROC_EVENTS"] == "y"

	if modes, cur, err := readPreemptDebugfs(); err == nil {
		k.PreemptModel, k.PreemptModes, k.PreemptSource = cur, modes, "debugfs"
	} else {
		k.PreemptNote = err.Error()
		k.PreemptModel, k.PreemptSource = inferPreempt(cfg, version)
	}

	if hz, err := strconv.Atoi(cfg["CONFIG_HZ"]); err == nil && hz > 0 {
		k.HZ, k.HZSource = hz, "config"
	} else {
		k.HZ, k.HZSource = measureHZ(), "measured"
	}
	k.RTRuntimeUS = readInt("/proc/sys/kernel/sched_rt_runtime_us")
	k.RTPeriodUS = readInt("/proc/sys/kernel/sched_rt_period_us")
	return k
}

// readPreemptDebugfs reads the live dynamic mode, mounting debugfs if it
// is not mounted. The file reads like "none voluntary (full) lazy".
func readPreemptDebugfs() (modes []string, cur string, err error) {
	if err := ensureDebugfs(); err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(preemptFile)
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, "", fmt.Errorf("%s not readable (kernel lockdown restricts debugfs): %w", preemptFile, err)
		}
		return nil, "", fmt.Errorf("%s: %w", preemptFile, err)
	}
	modes, cur = ParsePreemptModes(string(b))
	if cur == "" {
		return nil, "", fmt.Errorf("%s: no current mode in %q", preemptFile, strings.TrimSpace(string(b)))
	}
	return modes, cur, nil
}

// ParsePreemptModes splits "none voluntary (full) lazy" into the modes and
// the current one (in parentheses).
func ParsePreemptModes(s string) (modes []string, cur string) {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "(") && strings.HasSuffix(f, ")") {
			f = strings.Trim(f, "()")
			cur = f
		}
		modes = append(modes, f)
	}
	return modes, cur
}

func ensureDebugfs() error {
	if _, err := os.Stat("/sys/kernel/debug/sched"); err == nil {
		return nil
	}
	if err := unix.Mount("debugfs", "/sys/kernel/debug", "debugfs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount debugfs: %w", err)
	}
	return nil
}

// inferPreempt derives the mode from preempt= on the command line, or the
// build's default model.
func inferPreempt(cfg map[string]string, version string) (string, string) {
	if b, err := os.ReadFile("/proc/cmdline"); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if v, ok := strings.CutPrefix(f, "preempt="); ok {
				return v, "cmdline"
			}
		}
	}
	switch {
	case cfg["CONFIG_PREEMPT_RT"] == "y":
		return "rt", "config"
	case cfg["CONFIG_PREEMPT"] == "y":
		return "full", "config"
	case cfg["CONFIG_PREEMPT_LAZY"] == "y":
		return "lazy", "config"
	case cfg["CONFIG_PREEMPT_VOLUNTARY"] == "y":
		return "voluntary", "config"
	case cfg["CONFIG_PREEMPT_NONE"] == "y":
		return "none", "config"
	}
	switch {
	case strings.Contains(version, "PREEMPT_RT"):
		return "rt", "uname"
	case strings.Contains(version, "PREEMPT "), strings.HasSuffix(version, "PREEMPT"):
		return "full", "uname"
	}
	return "unknown", "none"
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}

// kernelConfig reads the build config as a map (empty if unavailable).
func kernelConfig(release string) map[string]string {
	m := map[string]string{}
	var r io.Reader
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		if z, err := gzip.NewReader(f); err == nil {
			r = z
		}
	}
	if r == nil {
		b, err := os.ReadFile("/boot/config-" + release)
		if err != nil {
			return m
		}
		r = bytes.NewReader(b)
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			m[k] = strings.Trim(v, `"`)
		}
	}
	return m
}

// measureHZ estimates the tick rate from the jiffies-based field of
// /proc/timer_list; failing that, it returns 0.
func measureHZ() int {
	read := func() (int64, bool) {
		f, err := os.Open("/proc/timer_list")
		if err != nil {
			return 0, false
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "jiffies: "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				return n, err == nil
			}
		}
		return 0, false
	}
	j0, ok := read()
	if !ok {
		return 0
	}
	t0 := time.Now()
	time.Sleep(200 * time.Millisecond)
	j1, _ := read()
	return int(float64(j1-j0)/time.Since(t0).Seconds() + 0.5)
}

func readInt(p string) int64 {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// SetPreempt switches the dynamic preemption mode. It returns the previous
// mode so the caller can tell the user how to revert; when the kernel does
// not allow it (no PREEMPT_DYNAMIC, lockdown) the error says what to do.
func SetPreempt(mode string) (prev string, err error) {
	switch mode {
	case "none", "voluntary", "full", "lazy":
	default:
		return "", fmt.Errorf("unknown preemption mode %q (want none, voluntary, full or lazy)", mode)
	}
	k := ReadKernelRT()
	prev = k.PreemptModel
	if !k.PreemptDynamic {
		return prev, fmt.Errorf("kernel %s is not built with PREEMPT_DYNAMIC: the model (%s) is fixed at build time", k.Release, prev)
	}
	if len(k.PreemptModes) > 0 {
		found := false
		for _, m := range k.PreemptModes {
			found = found || m == mode
		}
		if !found {
			return prev, fmt.Errorf("this kernel offers %s, not %q (Linux 7.0+ offers only full and lazy where the architecture has lazy preemption)", strings.Join(k.PreemptModes, ", "), mode)
		}
	}
	if err := ensureDebugfs(); err != nil {
		return prev, fmt.Errorf("%w; boot with preempt=%s on the kernel command line instead", err, mode)
	}
	if err := os.WriteFile(preemptFile, []byte(mode), 0o644); err != nil {
		return prev, fmt.Errorf("write %s: %w; boot with preempt=%s on the kernel command line instead", preemptFile, err, mode)
	}
	if _, cur, err := readPreemptDebugfs(); err == nil && cur != mode {
		return prev, fmt.Errorf("wrote %q but the kernel reports %q", mode, cur)
	}
	return prev, nil
}
