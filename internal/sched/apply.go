// apply.go: giving one process (all its threads) a rule's treatment, and
// taking it back. Originals are saved per thread so Close and the watchdog
// can restore or demote.
//
//   - policy/priority/nice: sched_setattr on every thread; RT gets
//     SCHED_FLAG_RESET_ON_FORK unless the rule opts out
//   - RLIMIT_RTTIME (prlimit) on processes promoted to RT, never raised
//   - cpus: sched_setaffinity on every thread
//   - cpu_weight/cpu_idle: move the process into the rule's cpu cgroup
//   - lane: the daemon's MoveToLane hook
package sched

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
)

var policyNums = map[string]uint32{"other": unix.SCHED_NORMAL, "normal": unix.SCHED_NORMAL,
	"batch": unix.SCHED_BATCH, "idle": unix.SCHED_IDLE, "fifo": unix.SCHED_FIFO, "rr": unix.SCHED_RR}

// PolicyName is the name of a kernel policy number.
func PolicyName(p uint32) string {
	switch p &^ unix.SCHED_RESET_ON_FORK {
	case unix.SCHED_NORMAL:
		return "other"
	case unix.SCHED_BATCH:
		return "batch"
	case unix.SCHED_IDLE:
		return "idle"
	case unix.SCHED_FIFO:
		return "fifo"
	case unix.SCHED_RR:
		return "rr"
	case 6:
		return "deadline"
	}
	return fmt.Sprint(p)
}

// savedThread is a thread's scheduling state before we touched it.
type savedThread struct {
	attr    unix.SchedAttr
	cpus    unix.CPUSet
	changed bool // we set the policy/nice (else Close leaves it alone)
}

// attrFor computes the new sched_attr of a thread from its current one.
func attrFor(cur unix.SchedAttr, r config.TaskRule) (unix.SchedAttr, bool) {
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: cur.Policy, Nice: cur.Nice, Priority: cur.Priority}
	changed := false
	if r.Policy != "" {
		a.Policy = policyNums[r.Policy]
		changed = true
	}
	switch a.Policy {
	case unix.SCHED_FIFO, unix.SCHED_RR:
		a.Nice = 0
		if r.IsRT() {
			a.Priority = uint32(r.Priority)
			if r.ResetOnFork == nil || *r.ResetOnFork {
				a.Flags |= unix.SCHED_FLAG_RESET_ON_FORK
			}
		}
	default:
		a.Priority = 0
		if r.Nice != nil {
			a.Nice = int32(*r.Nice)
			changed = true
		}
	}
	return a, changed
}

// applyThread sets one thread's policy and affinity, returning what it had.
func applyThread(tid int, r config.TaskRule) (savedThread, error) {
	var s savedThread
	cur, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return s, fmt.Errorf("sched_getattr %d: %w", tid, err)
	}
	s.attr = *cur
	s.attr.Size = unix.SizeofSchedAttr
	if r.IsRT() && cur.Policy == policyNums[r.Policy] && cur.Priority == uint32(r.Priority) {
		// Already what the rule gives: most likely our own doing before a
		// restart (the daemon adopts its state). Restoring it would keep the
		// process RT after we stop, so remember normal scheduling instead.
		s.attr = unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	}
	if err := unix.SchedGetaffinity(tid, &s.cpus); err != nil {
		return s, fmt.Errorf("sched_getaffinity %d: %w", tid, err)
	}
	if a, changed := attrFor(*cur, r); changed {
		if err := unix.SchedSetAttr(tid, &a, 0); err != nil {
			return s, fmt.Errorf("sched_setattr %d %s prio %d nice %d: %w", tid, PolicyName(a.Policy), a.Priority, a.Nice, err)
		}
		s.changed = true
	}
	if len(r.CPUs) > 0 {
		var set unix.CPUSet
		for _, c := range r.CPUs {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return s, fmt.Errorf("sched_setaffinity %d %v: %w", tid, r.CPUs, err)
		}
	}
	return s, nil
}

// restoreThread puts back a thread's saved policy and affinity.
func restoreThread(tid int, s savedThread, affinity bool) error {
	a := s.attr
	a.Flags &= unix.SCHED_FLAG_RESET_ON_FORK
	var errs []error
	if s.changed {
		if err := unix.SchedSetAttr(tid, &a, 0); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("restore policy of %d: %w", tid, err))
		}
	}
	if affinity {
		if err := unix.SchedSetaffinity(tid, &s.cpus); err != nil && !isGone(err) {
			errs = append(errs, fmt.Errorf("restore affinity of %d: %w", tid, err))
		}
	}
	return errors.Join(errs...)
}

// demoteThread makes a thread SCHED_OTHER nice 0 (the watchdog's action).
func demoteThread(tid int) error {
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	if err := unix.SchedSetAttr(tid, &a, 0); err != nil && !isGone(err) {
		return fmt.Errorf("demote %d: %w", tid, err)
	}
	return nil
}

// limitRTTime sets RLIMIT_RTTIME of pid to at most us microseconds (soft;
// the hard limit is twice that), never raising an existing lower limit.
func limitRTTime(pid int, us uint64) error {
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_RTTIME, nil, &old); err != nil {
		return fmt.Errorf("prlimit get %d: %w", pid, err)
	}
	lim := unix.Rlimit{Cur: min(old.Cur, us), Max: min(old.Max, 2*us)}
	lim.Cur = min(lim.Cur, lim.Max)
	if lim == old {
		return nil
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_RTTIME, &lim, nil); err != nil {
		return fmt.Errorf("prlimit RLIMIT_RTTIME %d: %w", pid, err)
	}
	return nil
}
