// cpu.go: CPU time of processes and threads from /proc: the scheduler's
// run time in ns (schedstat) where the kernel keeps it, else utime+stime,
// whose 10 ms steps (USER_HZ) are as large as a 400 KB transfer's CPU.
package emu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/procstat"
)

// ProcCPU returns the CPU time of a process: the sum of its live threads'
// run time (a thread that exits between two reads takes its time with it;
// the lab's processes keep theirs), else user+system in USER_HZ steps.
func ProcCPU(pid int) time.Duration {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		d, ok := schedstatCPU(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if !ok {
			st, _ := procstat.Read(pid)
			return st.CPU()
		}
		sum += d
	}
	return sum
}

// ThreadCPU returns the CPU time of one thread (as ProcCPU).
func ThreadCPU(pid, tid int) time.Duration {
	if d, ok := schedstatCPU(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid)); ok {
		return d
	}
	st, _ := procstat.ReadTask(pid, tid)
	return st.CPU()
}

// schedstatCPU reads a task's time on the CPU in ns, the first field of
// its schedstat (CONFIG_SCHED_INFO); false where the file is missing.
func schedstatCPU(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, false
	}
	ns, err := strconv.ParseUint(f[0], 10, 64)
	return time.Duration(ns), err == nil
}

// SoftirqTime returns the machine's total softirq CPU time (/proc/stat).
func SoftirqTime() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line := strings.SplitN(string(b), "\n", 2)[0]
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	v, _ := strconv.ParseUint(f[7], 10, 64)
	return time.Duration(v) * time.Second / procstat.UserHZ
}
