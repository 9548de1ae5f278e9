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
// learns the client's period P (a running average of the gaps between its
// requests) and the grid its requests keep to (the earliest arrivals: a
// request comes at its grid point plus the client's own wake-up lateness),
// and once the period has been regular for pollRegular gaps it sleeps
// (ppoll on the socket, so an early request still wakes it) only until W
// before the next grid point, then polls the socket without blocking for up
// to 2 W. Its own timer's lateness then falls before the request, not on
// its path. Bounds:
//   - it polls only for periods of at least pollMinPeriod W (so at most
//     ~2/pollMinPeriod of a CPU per periodic client, typically W/P) and at
//     most pollMaxPeriod;
//   - at most 2 W per request, never more: a request that does not come
//     in the window is waited for in a blocking recvmsg as without W;
//   - after pollMaxMisses windows in a row without a request it stops
//     polling until the period is regular again.
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
	pollMaxMisses = 3       // windows in a row without a request: stop until regular again
	pollRegular   = 3       // regular gaps in a row before polling
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
	window  int64 // ns; 0 = off
	last    int64 // arrival of the last request (ns)
	period  int64 // average gap (ns), 0 = unknown
	grid    int64 // the last request's grid point (ns)
	regular int   // gaps in a row within a quarter period of the average
	misses  int   // windows in a row without a request
	ctr     *pollCounters
	raw     bool // the blocking read is a raw system call (rawread.go)
	pollFd  [1]unix.PollFd
	timeout unix.Timespec
}

func newPoller(windowUS int, ctr *pollCounters, fd int, raw bool) *poller {
	return &poller{window: int64(windowUS) * 1000, ctr: ctr, raw: raw, pollFd: [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}}
}

// steady reports whether the client's period is regular and in the range
// worth polling for.
func (p *poller) steady() bool {
	return p.window > 0 && p.regular >= pollRegular && p.period >= pollMinPeriod*p.window && p.period <= pollMaxPeriod
}

// recv reads the next request from fd: in the window around its expected
// arrival by polling, otherwise (or if it does not come in the window) in
// a blocking recvmsg. It records the arrival for the next prediction.
func (p *poller) recv(fd int, buf []byte) (n, flags int, err error) {
	got := false
	if p.steady() {
		n, flags, err, got = p.anticipate(fd, buf)
	}
	for !got {
		if p.raw {
			n, flags, err = rawRecv(fd, buf)
			got = err != unix.EINTR && err != unix.EAGAIN
		} else {
			n, flags, err = blockingRecv(fd, buf)
			got = err != unix.EINTR
		}
	}
	p.arrived(Monotonic())
	return n, flags, err
}

// anticipate sleeps until the window opens (or a request wakes it) and
// polls until the request comes or the window closes; got says whether it
// read something (a request, or an error or end of stream to return).
func (p *poller) anticipate(fd int, buf []byte) (n, flags int, err error, got bool) {
	open := p.grid + p.period - p.window
	for {
		d := open - Monotonic()
		if d <= 0 {
			break
		}
		p.timeout = unix.NsecToTimespec(d)
		k, perr := unix.Ppoll(p.pollFd[:], &p.timeout, nil)
		if k > 0 {
			// Came (or hung up) before the window: read it at once.
			n, _, flags, _, err = unix.Recvmsg(fd, buf, nil, unix.MSG_DONTWAIT)
			if err != unix.EAGAIN && err != unix.EINTR {
				if err == nil && n > 0 {
					p.ctr.early.Add(1)
				}
				return n, flags, err, true
			}
		}
		if perr != nil && perr != unix.EINTR {
			return 0, 0, nil, false // the blocking read reports what is wrong
		}
		// A signal (Go's preemption) or a spurious readiness: sleep on
		// until the window, so polling never starts early.
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
		p.ctr.misses.Add(1)
		if p.misses++; p.misses >= pollMaxMisses {
			p.misses, p.regular = 0, 0 // off until the period is regular again
		}
		return 0, 0, nil, false
	}
	p.misses = 0
	if err == nil && n > 0 {
		p.ctr.hits.Add(1)
	}
	return n, flags, err, true
}

// arrived records a request's arrival time t: the period's average, how
// regular it is, and the grid point of this request (the next one is due
// at grid + period). The grid follows the earliest arrivals at once and
// later ones slowly, so the client's wake-up lateness does not shift it.
func (p *poller) arrived(t int64) {
	if p.last == 0 {
		p.last, p.grid = t, t
		return
	}
	gap := t - p.last
	p.last = t
	if p.period > 0 && gap > p.period*3/4 && gap < p.period*5/4 {
		p.period += (gap - p.period) / 8
		p.regular++
		g := p.grid + p.period
		if t < g {
			g = t
		} else {
			g += (t - g) / 16
		}
		p.grid = g
		return
	}
	// First gap, or a new rhythm (a skipped period, a burst): start over.
	p.period, p.grid, p.regular = gap, t, 0
}
