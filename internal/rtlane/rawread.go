// rawread.go: the granted reader's blocking read as a raw system call
// (Config.RawRead), and what that costs the rest of the daemon.
//
// Go's ordinary system call path (syscall.Syscall: entersyscall, the call,
// exitsyscall) leaves the P with the thread while it blocks (Go 1.26 has no
// _Psyscall state: the P stays _Prunning). sysmon takes it away (retake in
// runtime/proc.go) when no other P is idle, or when the P's schedtick has
// not moved for 10 ms (forcePreemptNS), which for a locked goroutine that
// only ever blocks in system calls is every 10 ms. The woken reader then
// needs a P in exitsyscall: its old one if still idle, else any idle one
// (exitsyscallTryGetP: sched.lock), else it queues itself on the global run
// queue and parks (exitsyscallNoP, stoplockedm) until another thread, at
// normal priority, picks the goroutine up and hands it a P back
// (startlockedm): two futex wake-ups and a wait for a normal-priority thread
// on the realtime path. procs.go keeps idle Ps so that last case stays rare.
//
// A raw system call (syscall.RawSyscall6) tells the runtime nothing: the
// goroutine stays _Grunning on its P while it blocks, so the woken thread
// needs nothing from the scheduler. The consequences, all bounded here:
//   - the P is held for as long as the reader waits: procs.go counts one P
//     per reader on top of the spare ones, and only procsMaxReaders readers
//     read raw (more would starve the rest of the daemon of Ps: with 3 raw
//     readers on 2 Ps a collection took 250 ms instead of 0.6 ms);
//   - a stop-the-world (GC start and end, GOMAXPROCS changes) and the GC's
//     stack scan must preempt the reader: the runtime signals the thread
//     (SIGURG, again every 100 µs while it waits); a socket with a receive
//     timeout returns EINTR on a signal instead of restarting, so the read
//     returns to Go code and the next call's stack check yields. Without
//     the signals (GODEBUG=asyncpreemptoff=1) the timeout itself
//     (rawReadBound) bounds the wait: the reader never holds a GC up longer;
//   - sysmon asks a goroutine that ran 10 ms on one schedtick to yield, the
//     same way; a locked goroutine yields through a normal-priority thread
//     and back (the hand-off above), now every 10 ms, but while the reader
//     waits, not after a request (unless one comes during the hand-off).
//
// docs/realtime.md has the measurements (wake-up, stop-the-world pauses).
package rtlane

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawReadBound is the receive timeout of a raw reader's socket: the
// longest a stop-the-world waits for it when no preemption signal reaches
// it, and how often an idle client's reader wakes for nothing.
const rawReadBound = 2_000_000 // ns

// setRawReadBound gives fd the receive timeout a raw reader needs.
func setRawReadBound(fd int) error {
	tv := unix.NsecToTimeval(rawReadBound)
	return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
}

// takeRawReader reports whether a new granted connection's reader may
// block in raw reads (and counts it if so): raw_read is on, fewer than
// procsMaxReaders readers do (each holds a P of its own, counted by
// procs.go; more would take the Ps the rest of the daemon needs), and its
// socket has the receive timeout.
func (l *Lane) takeRawReader(fd int) bool {
	if !l.cfg.RawRead {
		return false
	}
	if l.rawReaders.Add(1) > procsMaxReaders || setRawReadBound(fd) != nil {
		l.rawReaders.Add(-1)
		return false
	}
	return true
}

// rawRecv makes one attempt to read a message from fd (blocking, with the
// receive timeout of setRawReadBound) without telling the runtime; flags
// is MSG_TRUNC when the message was longer than buf. EINTR (a signal:
// a stop-the-world or sysmon wants the thread) and EAGAIN (the timeout)
// are returned for the caller to call again: that call's stack check is
// where a pending preemption takes effect, so rawRecv is never inlined
// (and is no leaf, so the compiler keeps its check).
//
//go:noinline
func rawRecv(fd int, buf []byte) (n, flags int, err error) {
	r, _, e := syscall.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		unix.MSG_TRUNC, 0, 0)
	return recvResult(r, e, len(buf))
}
