// schedmove.go: `lanes move` gives a process the lane's CPU treatment, as
// `lanes run` does (docs/background.md, the LW-LBE paper's task side):
//
//   - into background: every thread runs SCHED_OTHER at nice 19; what each
//     had (policy, nice, realtime priority) is kept, by thread id, with the
//     process's start time, so a reused pid is never "restored";
//   - out of background: every thread that is still there gets back what
//     it had; threads started after the move keep what they inherited;
//   - --keep-sched (the request's keep_sched; `lanes run`, which sets its
//     own, and the task engine, whose rules say their own): unchanged.
//
// Note: the saved state of a process that exits is dropped at its next
// move's lookup or the registration sweep, whichever comes first.
package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/procstat"
)

// backgroundNice is the nice value of the background lane (`lanes run`'s).
const backgroundNice = 19

// savedSched is what a process's threads ran before it went to background.
type savedSched struct {
	start   string // /proc/PID/stat start time: the same process
	threads map[int]unix.SchedAttr
}

// laneSched applies lane l's CPU treatment to pid and says what it did.
func (m *moves) laneSched(pid int, l lane.Lane) (string, error) {
	start, err := procStart(pid)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	saved, had := m.sched[pid]
	if had && saved.start != start {
		delete(m.sched, pid) // a new process under a reused pid
		had = false
	}
	m.mu.Unlock()
	if l != lane.Background {
		if !had {
			return "unchanged", nil
		}
		err := restoreSched(saved)
		m.mu.Lock()
		delete(m.sched, pid)
		m.mu.Unlock()
		return "restored", err
	}
	tids, err := threadIDs(pid)
	if err != nil {
		return "", err
	}
	if !had {
		saved = savedSched{start: start, threads: map[int]unix.SchedAttr{}}
	}
	var errs []error
	for _, tid := range tids {
		if _, ok := saved.threads[tid]; !ok {
			if a, err := unix.SchedGetAttr(tid, 0); err == nil {
				saved.threads[tid] = *a
			}
		}
		a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: backgroundNice}
		if err := unix.SchedSetAttr(tid, &a, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("thread %d: %w", tid, err))
		}
	}
	m.mu.Lock()
	m.sched[pid] = saved
	m.sweep.kickSweep()
	m.mu.Unlock()
	return fmt.Sprintf("nice %d", backgroundNice), errors.Join(errs...)
}

// restoreSched gives each saved thread what it had.
func restoreSched(s savedSched) error {
	var errs []error
	for tid, a := range s.threads {
		a.Size = unix.SizeofSchedAttr
		if err := unix.SchedSetAttr(tid, &a, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("thread %d: %w", tid, err))
		}
	}
	return errors.Join(errs...)
}

// pruneSched drops the saved state of processes that are gone.
func (m *moves) pruneSched() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, s := range m.sched {
		if st, err := procStart(pid); err != nil || st != s.start {
			delete(m.sched, pid)
		}
	}
}

// threadIDs lists a process's threads.
func threadIDs(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}

// procStart is a process's start time (field 22 of /proc/PID/stat), in
// clock ticks after boot.
func procStart(pid int) (string, error) {
	st, err := procstat.Read(pid)
	if err != nil {
		return "", err
	}
	return strconv.FormatUint(st.StartTime, 10), nil
}
