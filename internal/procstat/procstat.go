// Package procstat parses /proc/PID/stat and /proc/PID/task/TID/stat (proc(5)),
// the one parser of that format in lanes: a process's parent, state, CPU
// time and start time.
//
// Note: the command name, field 2, is in parentheses and may itself hold
// spaces and parentheses, so the fields are counted from the last ')'.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// UserHZ is the unit of the time fields (USER_HZ, 100 on every Linux ABI).
const UserHZ = 100

// Stat is the part of a stat line lanes reads.
type Stat struct {
	PID       int
	Comm      string // the command name, without its parentheses
	State     byte   // R, S, D, Z, T, ...
	PPID      int
	UTime     uint64 // user time, clock ticks (UserHZ)
	STime     uint64 // system time, clock ticks
	StartTime uint64 // start after boot, clock ticks
}

// CPU is the user plus system time.
func (s Stat) CPU() time.Duration { return time.Duration(s.UTime+s.STime) * time.Second / UserHZ }

// Start is the start time after boot (CLOCK_BOOTTIME).
func (s Stat) Start() time.Duration { return time.Duration(s.StartTime) * time.Second / UserHZ }

// Read parses /proc/PID/stat.
func Read(pid int) (Stat, error) { return readFile(fmt.Sprintf("/proc/%d/stat", pid)) }

// ReadTask parses /proc/PID/task/TID/stat, one thread's line.
func ReadTask(pid, tid int) (Stat, error) {
	return readFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
}

func readFile(path string) (Stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, err
	}
	s, err := Parse(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse parses one stat line.
func Parse(b []byte) (Stat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return Stat{}, errors.New("no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("pid: %w", err)
	}
	// after ")": state(3) ppid(4) ... utime(14) stime(15) ... starttime(22)
	f := bytes.Fields(b[end+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%d fields after the command name, want 20 or more", len(f))
	}
	s := Stat{PID: pid, Comm: string(b[open+1 : end]), State: f[0][0]}
	if s.PPID, err = strconv.Atoi(string(f[1])); err != nil {
		return Stat{}, fmt.Errorf("ppid: %w", err)
	}
	for _, u := range []struct {
		dst *uint64
		i   int
	}{{&s.UTime, 11}, {&s.STime, 12}, {&s.StartTime, 19}} {
		if *u.dst, err = strconv.ParseUint(string(f[u.i]), 10, 64); err != nil {
			return Stat{}, fmt.Errorf("field %d: %w", u.i+3, err)
		}
	}
	return s, nil
}
