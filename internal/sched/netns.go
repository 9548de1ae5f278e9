// netns.go: the engine's scope, the processes of one network namespace
// (Options.Netns). Two daemons in two namespaces (a device with
// containers, the tests) each act on their own namespace's processes
// only: another namespace's are not moved, listed or counted. The BPF
// event source reports only the namespace's tasks (procevents.c); the
// proc connector reports every process, so its exec and comm events are
// checked here before the pacer counts them, and every process the engine
// considers is checked when it is read (a process may enter another
// namespace between its event and that read: ip netns exec).
package sched

import (
	"strconv"
	"syscall"
)

// netnsInode is a process's network namespace inode (/proc/PID/ns/net).
func netnsInode(pid int) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(procRoot+"/"+strconv.Itoa(pid)+"/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// elsewhere: pid lives in another network namespace than the engine's;
// never when the engine has no namespace of its own. A process gone is
// not (reading it says so), nor one whose namespace cannot be read (a
// security policy without the nsfs getattr Android's sepolicy lacks):
// the rules act on it as before, said once in the log.
func (e *Engine) elsewhere(pid int) bool {
	if e.opt.Netns == 0 {
		return false
	}
	ino, err := netnsInode(pid)
	if err != nil {
		if !isGone(err) {
			e.unreadNetns.Do(func() {
				e.log.Warn("a process's network namespace is unreadable: rules act on such processes whatever their namespace", "pid", pid, "err", err)
			})
		}
		return false
	}
	return ino != e.opt.Netns
}

// foreignEvent: an exec or rename from the proc connector (which reports
// every namespace's processes) of a process elsewhere; the BPF source
// sends none of those.
func (e *Engine) foreignEvent(ev Event) bool {
	if e.scoped || ev.What != procEventExec && (ev.What != procEventComm || ev.PID != ev.TGID) {
		return false
	}
	return e.elsewhere(ev.TGID)
}

// leftLocked forgets a tracked process found in another namespace (it
// moved there by setns), putting it back as it was (e.mu held).
func (e *Engine) leftLocked(pid int) {
	t := e.procs[pid]
	if t == nil {
		return
	}
	if err := e.revertLocked(pid, t); err != nil && !isGone(err) {
		e.log.Warn("revert a process that left the namespace", "pid", pid, "err", err)
	}
	delete(e.procs, pid)
}
