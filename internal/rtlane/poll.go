// poll.go: anticipatory polling of a granted client's socket
// (Config.PollWindowUS), to take the reader thread's wake-up off the path.
//
// A request wakes the reader thread blocked in recvmsg. On this project's
// 2-core VM that wake-up is the largest part of the daemon path: the
// kernel's RT placement (select_task_rq_rt) never puts the woken reader on
// the CPU of the client that woke it while that client, at a higher
// priority, is still running there, so the wake-up crosses CPUs (an IPI,
// in a VM a vCPU kick): 12-25 µs at p50 and 80-200 µs at p99, against
// 5-8 µs and 11-22 µs when both run on one CPU (docs/realtime.md).
//
// Most realtime clients are periodic. With a window W > 0 the reader
// learns the client's period from the gap between its last two requests
// and, when the period is steady, sleeps (ppoll on the socket, so an early
// request still wakes it) only until W before the next request is due,
// then polls the socket without blocking for up to 2 W. The timer's own
// wake-up lateness then falls before the request, not on its path. Bounds:
//   - it polls only for periods of at least pollMinPeriod W (so at most
//     ~2/pollMinPeriod of a CPU per periodic client, typically W/period)
//     and at most pollMaxPeriod;
//   - at most 2 W per request, never more: a request that does not come
//     in the window is waited for in a blocking recvmsg as without W;
//   - after pollMaxMisses windows in a row without a request it stops
//     polling until the period is seen steady again.
//
// The time spent polling, hits and misses are counted (Stats: poll_*).
package rtlane

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

const (
	pollMinPeriod = 10      // poll only for periods >= this many windows
	pollMaxPeriod = 1e9     // ns: and at most 1 s
	pollMaxMisses = 3       // windows in a row without a request: stop until steady again
	pollMaxWindow = 100_000 // µs: upper bound of Config.PollWindowUS
)

// pollCounters are the lane's totals over all connections: requests read
// while polling (hits), that came before the window opened (early: the
// wake-up was on their path), windows that closed without one (misses),
// and the time spent polling.
type pollCounters struct {
	hits, early, misses, spinNs atomic.Uint64
}

// poller is one granted connection's state (its reader thread's only).
type poller struct {
	window      int64 // ns; 0 = off
	last, gap   int64 // arrival of the last request, gap before it (ns)
	prevGap     int64
	misses      int
	ctr         *pollCounters
	pollFd      [1]unix.PollFd
	wakeTimeout unix.Timespec
}

func newPoller(windowUS int, ctr *pollCounters, fd int) *poller {
	return &poller{window: int64(windowUS) * 1000, ctr: ctr, pollFd: [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}}
}

// steady reports whether the last two gaps agree within the window and
// the period is in the range worth polling for.
func (p *poller) steady() bool {
	if p.window <= 0 || p.misses >= pollMaxMisses || p.gap < pollMinPeriod*p.window || p.gap > pollMaxPeriod {
		return false
	}
	d := p.gap - p.prevGap
	return d <= p.window/2 && d >= -p.window/2
}

// recv reads the next request from fd: in the window around its expected
// arrival by polling, otherwise (or if it does not come in the window) in
// a blocking recvmsg. It records the arrival for the next prediction.
func (p *poller) recv(fd int, buf []byte) (n, flags int, err error) {
	got := false
	if p.steady() {
		n, flags, err, got = p.anticipate(fd, buf)
	}
	if !got {
		for {
			n, _, flags, _, err = unix.Recvmsg(fd, buf, nil, 0)
			if err != unix.EINTR {
				break
			}
		}
	}
	p.arrived(Monotonic())
	return n, flags, err
}

// anticipate sleeps until the window opens (or a request wakes it) and
// polls until the request comes or the window closes; got says whether it
// read something (a request, or an error or end of stream to return).
func (p *poller) anticipate(fd int, buf []byte) (n, flags int, err error, got bool) {
	due := p.last + p.gap
	open := due - p.window
	if d := open - Monotonic(); d > 0 {
		p.wakeTimeout = unix.NsecToTimespec(d)
		if k, _ := unix.Ppoll(p.pollFd[:], &p.wakeTimeout, nil); k > 0 {
			// Came (or hung up) before the window: read it at once.
			n, _, flags, _, err = unix.Recvmsg(fd, buf, nil, unix.MSG_DONTWAIT)
			if err != unix.EAGAIN && err != unix.EINTR {
				if err == nil && n > 0 {
					p.ctr.early.Add(1)
				}
				return n, flags, err, true
			}
		}
	}
	start := Monotonic()
	end := max(start, open) + 2*p.window
	now := start
	for {
		n, _, flags, _, err = unix.Recvmsg(fd, buf, nil, unix.MSG_DONTWAIT)
		if err != unix.EAGAIN && err != unix.EINTR {
			break
		}
		if now = Monotonic(); now >= end {
			break
		}
	}
	p.ctr.spinNs.Add(uint64(now - start))
	if err == unix.EAGAIN || err == unix.EINTR {
		p.misses++
		p.ctr.misses.Add(1)
		return 0, 0, nil, false
	}
	p.misses = 0
	if err == nil && n > 0 {
		p.ctr.hits.Add(1)
	}
	return n, flags, err, true
}

// arrived records a request's arrival time.
func (p *poller) arrived(t int64) {
	if p.last != 0 {
		p.prevGap, p.gap = p.gap, t-p.last
		if !p.steady() && p.misses >= pollMaxMisses {
			// Stay off until two gaps agree again.
			if d := p.gap - p.prevGap; d <= p.window/2 && d >= -p.window/2 {
				p.misses = 0
			}
		}
	}
	p.last = t
}
