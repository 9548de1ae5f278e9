// cpu.go: CPU time of processes and threads from /proc (utime+stime).
package emu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clkTck is USER_HZ, 100 on every Linux architecture lanes targets.
const clkTck = 100

// ProcCPU returns user+system CPU time of a process (all its threads).
func ProcCPU(pid int) time.Duration { return statCPU(fmt.Sprintf("/proc/%d/stat", pid)) }

// ThreadCPU returns user+system CPU time of one thread.
func ThreadCPU(pid, tid int) time.Duration {
	return statCPU(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
}

func statCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// fields after ")": state(0) ... utime is field 14 overall -> index 11 here.
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / clkTck
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
	return time.Duration(v) * time.Second / clkTck
}
