// pin.go: the realtime threads' hot path out of reach of Go's scheduler.
//
// A granted reader and the releaser are locked goroutines that only ever
// block in system calls, so they never pass through Go's scheduler and
// their P's schedtick never moves. Every 10 ms of that (forcePreemptNS in
// runtime/proc.go) sysmon asks the goroutine to yield: a signal, or the
// next stack check. A locked goroutine yields through a hand-off: it puts
// itself on the global run queue, its thread sleeps, another thread, at
// normal priority, runs the scheduler, finds it and wakes its thread again
// (stoplockedm/startlockedm). When the request lands while the thread is
// between reading a request and sending its datagram, that hand-off (two
// futex wake-ups and a normal-priority thread, tens of µs on an idle
// machine, milliseconds on a busy one) is on the datagram's path.
//
// The hot section, from a request read to its reply written, and the
// releaser's pop-and-send, therefore run pinned: runtime.procPin (what
// sync.Pool does; m.locks > 0), so that neither a preemption signal nor a
// stack check preempts them; a request to yield stays pending and takes
// effect at the first stack check after procUnpin, which is where the
// thread has finished with the datagram and goes back to wait. While
// pinned a thread must not park in Go's runtime: it takes no Go mutex and
// sends on no channel that can block, and trace hooks and drop notices,
// which may, run after procUnpin (after). Its short system calls (the
// reply with MSG_DONTWAIT, the eventfd kick, the SpinLock's sleep) are
// raw. The UDP send is an ordinary one (sendto.go): during it the
// goroutine is in _Gsyscall, which sysmon never signals (a signal's IPI in
// the middle of a raw send showed in the path's tail); if sysmon takes the
// P meanwhile, the exit finds an idle one (procs.go) or, for a locked
// goroutine, waits for one in stoplockedm, never in schedule(), which is
// what must not run pinned. Anything else that shares a lock with a pinned
// thread pins itself while holding it (SpinLock), so a holder is never
// stopped by the runtime while a pinned thread waits for it.
//
// Pinning declines the preemption, but the signal that asks for it still
// interrupts the thread: traced, sysmon woken by the reader's own return
// from its read (its P taken meanwhile for the stale schedtick) signals it
// at once, and the tgkill's IPI held the reader 25-35 µs between read and
// send in this VM. The hot section therefore also blocks SIGURG, the
// runtime's preemption signal, on its thread (pinHot); a signal sent
// meanwhile stays pending, without an IPI, and is taken at unpinHot, where
// the thread is done with the datagram.
//
// What the runtime still gets: the blocking wait (recvmsg, ppoll) is an
// ordinary system call, so the thread's P is free for the rest of the
// process and a stop-the-world never waits for a thread that waits for a
// client; it waits at most for one pinned section, a few µs.
package rtlane

import (
	"syscall"
	"unsafe" // also for go:linkname

	"golang.org/x/sys/unix"
)

//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// urgMask is the signal set {SIGURG}, the runtime's preemption signal.
var urgMask = uint64(1) << (unix.SIGURG - 1)

// pinHot starts a realtime thread's hot section: pinned, SIGURG blocked.
func pinHot() {
	procPin()
	sigURG(unix.SIG_BLOCK)
}

// unpinHot ends it: a preemption signal that came meanwhile is taken here,
// and a preemption it asked for at the next stack check.
func unpinHot() {
	sigURG(unix.SIG_UNBLOCK)
	procUnpin()
}

// sigURG blocks or unblocks SIGURG on the calling thread, raw.
func sigURG(how int) {
	_, _, _ = syscall.RawSyscall6(unix.SYS_RT_SIGPROCMASK, uintptr(how), uintptr(unsafe.Pointer(&urgMask)), 0, 8, 0, 0)
}

// after is what a pinned section leaves for its thread to do once it is
// unpinned: trace events, and a datagram popped but not sent (late or the
// send failed), to be reported to its client and recycled.
type after struct {
	ev   [3]Event
	nev  int
	drop popped
}

// trace records e for l.trace, if there is a hook.
func (a *after) trace(l *Lane, e Event) {
	if l.trace != nil && a.nev < len(a.ev) {
		a.ev[a.nev] = e
		a.nev++
	}
}

// afterwards does what a pinned section left; called unpinned.
func (l *Lane) afterwards(a *after) {
	for i := range a.nev {
		l.trace(a.ev[i])
	}
	a.nev = 0
	if a.drop.pk != nil {
		l.report(a.drop)
		a.drop = popped{}
	}
}

// rawSend writes b on the connected socket fd with flags, raw (for pinned
// sections: flags should hold MSG_DONTWAIT unless the socket has a send
// timeout), restarting after signals.
func rawSend(fd int, b []byte, flags int) error {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		_, _, e := syscall.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(b)), uintptr(flags|unix.MSG_NOSIGNAL), 0, 0)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

// rawWrite8 writes an eventfd's 8-byte counter increment, raw.
func rawWrite8(fd int, v uint64) {
	_, _, _ = syscall.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&v)), 8)
}

// rawSleep sleeps ns nanoseconds, raw (a signal may end it early).
func rawSleep(ns int64) {
	ts := unix.NsecToTimespec(ns)
	_, _, _ = syscall.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
}

// blockingRecv reads one message from fd in an ordinary (runtime) blocking
// system call, without the source address unix.Recvmsg decodes and
// allocates; flags is MSG_TRUNC when the message was longer than buf.
func blockingRecv(fd int, buf []byte) (n, flags int, err error) {
	r, _, e := syscall.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		unix.MSG_TRUNC, 0, 0)
	return recvResult(r, e, len(buf))
}

// recvResult turns recvfrom(MSG_TRUNC)'s return into the bytes in a
// buffer of size bufLen and MSG_TRUNC when the message was longer.
func recvResult(r uintptr, e syscall.Errno, bufLen int) (n, flags int, err error) {
	if e != 0 {
		return 0, 0, e
	}
	if n = int(r); n > bufLen {
		return bufLen, unix.MSG_TRUNC, nil
	}
	return n, 0, nil
}
