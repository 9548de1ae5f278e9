// proc.go: what the rules can match on, read from /proc/PID, and the /proc
// helpers the engine needs (process list, thread list, ownership checks).
package sched

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ProcInfo is one process as the rules see it.
type ProcInfo struct {
	PID        int
	PPID       int
	UID        uint32
	Comm       string
	Exe        string   // resolved /proc/PID/exe ("" for kernel threads or when unreadable)
	Cmdline    string   // arguments joined by spaces
	Cgroups    []string // one path per hierarchy line of /proc/PID/cgroup, v2 ("0::") first
	ParentComm string
}

// procRoot is /proc; tests never change it, it only keeps paths in one place.
const procRoot = "/proc"

// Fields a rule set needs beyond comm, uid and ppid (see readProc).
const (
	needExe = 1 << iota
	needCmdline
	needCgroup
	needParent
	needAll = needExe | needCmdline | needCgroup | needParent
)

// ReadProc reads a process's match attributes. A process that exits while
// being read gives an error wrapping fs.ErrNotExist (or ESRCH).
func ReadProc(pid int) (*ProcInfo, error) { return readProc(pid, needAll) }

// readProc reads only what need asks for: /proc/PID/cmdline in particular
// takes the target's mmap lock and can stall behind a busy process, so the
// scan should not read it when no rule matches on the command line.
func readProc(pid int, need int) (*ProcInfo, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	p := &ProcInfo{PID: pid}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Name":
			p.Comm = v
		case "PPid":
			p.PPID, _ = strconv.Atoi(v)
		case "Uid":
			if f := strings.Fields(v); len(f) > 0 {
				u, _ := strconv.ParseUint(f[0], 10, 32)
				p.UID = uint32(u)
			}
		}
	}
	// comm in status is escaped; the comm file has it raw.
	if c, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
		p.Comm = strings.TrimSuffix(string(c), "\n")
	}
	if need&needExe != 0 {
		if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil {
			p.Exe = strings.TrimSuffix(exe, " (deleted)")
		}
	}
	if need&needCmdline != 0 {
		if cl, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
			p.Cmdline = string(bytes.TrimRight(bytes.ReplaceAll(cl, []byte{0}, []byte{' '}), " "))
		}
	}
	if need&needCgroup != 0 {
		if cg, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
			p.Cgroups = parseCgroups(string(cg))
		}
	}
	if p.PPID > 0 && need&needParent != 0 {
		if c, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(p.PPID), "comm")); err == nil {
			p.ParentComm = strings.TrimSuffix(string(c), "\n")
		}
	}
	return p, nil
}

// parseCgroups returns the paths of /proc/PID/cgroup, the v2 ("0::") one first.
func parseCgroups(s string) []string {
	var v2, v1 []string
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" && f[1] == "" {
			v2 = append(v2, f[2])
		} else {
			v1 = append(v1, f[2])
		}
	}
	return append(v2, v1...)
}

// listPIDs returns every process id in /proc.
func listPIDs() ([]int, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// threads returns the thread ids of a process.
func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(procRoot, strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	return tids, nil
}

// isGone reports errors that mean the process has exited meanwhile.
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
