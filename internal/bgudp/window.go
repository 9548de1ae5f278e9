// window.go: the last steps the link estimate reads (rule.go), and the
// least queue each step's end stood at, bounded by the samples around it.

package bgudp

import "time"

// winStep is one step's part of the link estimate.
type winStep struct {
	bytes   float64       // passed (or arrived) in the step
	all     float64       // the interface's bytes in the step and direction, every lane's (0: not known)
	backlog uint64        // the shaper's bytes waiting at its end
	offered float64       // offered to the policer in the step
	rate    float64       // what the policer's rate allowed in the step (0: not policed)
	dt      time.Duration // its length
	raw     time.Duration // the queueing delay at its end
	age     time.Duration // how long before its end raw's probe left (Input.Age)
	ok      bool          // raw is a sample
	// least is the queueing delay at its end at least (window.add). A
	// probe waits behind a standing queue, so the steps with no sample
	// come exactly when the queue is long: at 0.2 Mbit/s, 400-480 ms, 2
	// steps in 5 had none, no window of 5 was all samples, and the first
	// estimate came 1.1 s after the queue stood, the floor the whole link
	// until then
	least time.Duration
}

// window is the last estimateSteps+1 steps, oldest first.
type window []winStep

// add appends a step, drops the oldest beyond estimateSteps+1, and
// bounds the steps' least queue: the new step's is its sample's, or with
// none the step before's less its length (a queue drains no faster than
// its own delay); a sample that waited raw raises the earlier steps'
// (raiseBefore).
func (w *window) add(st winStep) {
	*w = append(*w, st)
	if len(*w) > estimateSteps+1 {
		*w = (*w)[1:]
	}
	n := len(*w) - 1
	s := &(*w)[n]
	s.least = s.raw
	if !s.ok && n > 0 {
		s.least = max(0, (*w)[n-1].least-s.dt)
	}
	if s.ok {
		w.raiseBefore(s.raw)
	}
}

// raiseBefore raises the earlier steps' least queue by a sample that waited
// raw: the probe stood in the queue for raw before now, with at least
// the time left of its wait ahead of it, so a step that ended x before
// now (x <= raw) had at least x of queue.
func (w window) raiseBefore(raw time.Duration) {
	var x time.Duration
	for i := len(w) - 1; i > 0; i-- {
		x += w[i].dt
		if x > raw {
			return
		}
		w[i-1].least = max(w[i-1].least, x)
	}
}

// rate is the class's bytes/s over the window: what passed, or arrived
// for downloads.
func (w window) rate() uint64 {
	var bytes float64
	var dt time.Duration
	for _, s := range w {
		bytes, dt = bytes+s.bytes, dt+s.dt
	}
	if dt <= 0 {
		return 0
	}
	return uint64(bytes / dt.Seconds())
}

// others is the other lanes' bytes/s over the window (every lane's less
// the class's).
func (w window) others() float64 {
	var o float64
	var dt time.Duration
	for _, s := range w {
		o, dt = o+max(0, s.all-s.bytes), dt+s.dt
	}
	if dt <= 0 {
		return 0
	}
	return o / dt.Seconds()
}

// sentSteps is how many steps the sent log keeps: enough to reach back
// past the longest queue a sample waited in (a 0.2 Mbit/s link's 500 ms
// of buffer) and the window before it.
const sentSteps = 100

// sentStep is one step's bytes and length.
type sentStep struct {
	bytes float64
	dt    time.Duration
}

// sentLog is the class's bytes over the last sentSteps steps, oldest
// first: what left for the bottleneck when a sample's probe stood in its
// queue, a queueing delay before the sample came back.
type sentLog []sentStep

// add appends a step and drops the oldest beyond sentSteps.
func (l *sentLog) add(bytes float64, dt time.Duration) {
	*l = append(*l, sentStep{bytes, dt})
	if len(*l) > sentSteps {
		*l = (*l)[1:]
	}
}

// between is the bytes sent from from to to before the newest step's
// end (from > to), a step's bytes taken as spread over its length; false
// where the log does not reach back to from.
func (l sentLog) between(from, to time.Duration) (float64, bool) {
	var bytes float64
	var end time.Duration // how long before the newest step's end step i ended
	for i := len(l) - 1; i >= 0; i-- {
		s := l[i]
		start := end + s.dt
		if lo, hi := max(end, to), min(start, from); hi > lo && s.dt > 0 {
			bytes += s.bytes * float64(hi-lo) / float64(s.dt)
		}
		if start >= from {
			return bytes, true
		}
		end = start
	}
	return 0, false
}
