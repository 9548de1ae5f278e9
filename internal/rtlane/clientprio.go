// clientprio.go: lanes-rtd runs just above its clients.
//
// A thread below the client that wakes it is woken on another CPU, or
// waits for the client to block (docs/realtime.md, "The lane above its
// clients": the daemon path's added p99 fell from 46-49 to 22-33 µs with
// the lane at 21 above clients at 20). Realtime applications choose their
// own priorities, and usually raise them after connecting, so a fixed
// release_priority is either below them or needlessly high. With
// follow_client_priority (default), lanes-rtd runs at max(release_priority,
// the highest SCHED_FIFO/RR thread priority of its granted clients + 1), at
// most maxReaderPriority: the priority-inheritance rule of a lock, for work
// it does on the clients' behalf. A follower looks at every granted client
// once a second (its threads in /proc/PID/task, one sched_getattr each) and
// moves lanes-rtd (sched_setattr of its one thread) when that changed or
// when lanes-rtd is not where it should be (anyone changed it); it runs at
// normal priority, off the realtime path. Clients in the daemon's
// own process (the lab's, tests) are not followed: the lane's own threads
// would count as the client's.
package rtlane

import (
	"context"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// maxReaderPriority caps a reader that follows its client: 99 stays the
// kernel's (watchdog, migration threads).
const maxReaderPriority = 98

// followEvery is how often the follower looks at the clients.
const followEvery = time.Second

// clientPriority is the highest SCHED_FIFO or SCHED_RR priority among the
// threads of process pid (0: none, or the process is gone).
func clientPriority(pid int32) int {
	if pid <= 0 {
		return 0
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(int(pid)) + "/task")
	if err != nil {
		return 0
	}
	best := 0
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil || (a.Policy != unix.SCHED_FIFO && a.Policy != unix.SCHED_RR) {
			continue
		}
		best = max(best, int(a.Priority))
	}
	return best
}

// priorityRule is the rule of lanes-rtd's priority, from the lane's
// configuration: release_priority, follow_client_priority.
type priorityRule struct {
	release int  // Config.ReleasePriority: 0 or below, normal scheduling
	follow  bool // Config.FollowClientPriority
}

// readerPriority is the SCHED_FIFO priority lanes-rtd should have for a
// granted client when its client's highest priority is clientPrio (0: normal
// scheduling).
func (r priorityRule) readerPriority(clientPrio int) int {
	base := r.release
	if base <= 0 {
		return 0 // the user asked for normal scheduling
	}
	if !r.follow || clientPrio <= 0 {
		return base
	}
	return max(base, min(clientPrio+1, maxReaderPriority))
}

// follows reports whether c's reader follows its client's priority.
func (r priorityRule) follows(c *conn) bool {
	return r.follow && r.release > 0 && c.pid > 0 && int(c.pid) != os.Getpid()
}

// setThreadFIFO sets thread tid (0: the calling thread) to SCHED_FIFO at
// prio, with SCHED_FLAG_RESET_ON_FORK as the task engine gives the
// programs it promotes (internal/sched): a process the daemon starts from
// one of the lane's threads begins at normal priority.
func setThreadFIFO(tid, prio int) error {
	a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio),
		Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	return unix.SchedSetAttr(tid, &a, 0)
}

// followClients moves lanes-rtd to its clients' priority + 1 (or keeps it
// at release_priority when it does not follow them), every followEvery,
// until ctx ends.
func (l *Lane) followClients(ctx context.Context) {
	if l.cfg.ReleasePriority <= 0 {
		return
	}
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.prio.follow(l.rtd.cmd.Process.Pid, &l.clients)
	}
}
