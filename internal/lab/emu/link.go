// link.go: one direction of an emulated link, with mahimahi's semantics.
//
// A Link is a device queue in front of a serialiser and a delay line:
//
//		Enqueue -> [device queue: drop-tail, bytes or packets] -> serialiser -> [delay line] -> Out
//		           (random loss on entry)                       (fixed rate or trace)
//
//	  - Enqueue drops the packet with probability Loss, or when the device queue
//	    would exceed its limit (drop-tail); otherwise it appends it.
//	  - The serialiser takes the head packet: at a fixed rate it leaves
//	    size*8/rate after it started; with a trace every opportunity lets
//	    OpportunityBytes through (a packet bigger than what is left of an
//	    opportunity carries the rest over to the next, as mahimahi does, and
//	    an opportunity nobody uses is lost).
//	  - The delay line holds each packet for the one-way Delay after it has
//	    been serialised, then calls Out.
//	  - WaitRoom blocks a reader while the device queue is full, so a reader
//	    that calls it before taking a packet from its source leaves the queue
//	    beyond the device in the source (back-pressure).
//	  - With Air, the link is one transmit queue of an 802.11 medium
//	    (dcf.go): the medium's contention, not a serialiser, decides when
//	    its head leaves, and it has no delay line.
//
// Note: one goroutine per link works on absolute times: every packet keeps
// its arrival time and every opportunity its scheduled time, so a late timer
// wake-up delays the callbacks but never changes which opportunity a packet
// used or its computed departure.
package emu

import (
	"context"
	"math/rand"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fineSleep is the stretch before an event that the link sleeps with
// nanosleep instead of a Go timer.
const fineSleep = 2 * time.Millisecond

// LinkConfig describes one direction of a link.
type LinkConfig struct {
	Rate         float64       // bits/s; 0 with no Trace = unlimited
	Trace        *Trace        // mahimahi trace; overrides Rate
	Delay        time.Duration // one-way propagation delay
	QueueBytes   int           // device queue limit in bytes (0 = no byte limit)
	QueuePackets int           // device queue limit in packets (0 = no packet limit)
	Loss         float64       // random loss probability on entry, 0..1
	Seed         int64         // loss RNG seed (0 = time based)
	// Air makes the link a contender of that 802.11 medium instead of a
	// serialiser of its own (Rate and Trace are then unused; Delay must
	// be 0).
	Air *DCF
}

// Unlimited reports whether the link has no serialiser (rate 0, no trace).
func (c LinkConfig) Unlimited() bool { return c.Rate <= 0 && c.Trace == nil && c.Air == nil }

// LinkStats are a link's counters.
type LinkStats struct {
	EnqPackets, EnqBytes     uint64 // accepted into the queue
	DropTail, DropLoss       uint64 // dropped at entry (queue full / random)
	DropRetry                uint64 // Air: dropped at the 802.11 retry limit
	OutPackets, OutBytes     uint64 // delivered after the delay
	MaxQueueBytes, MaxQueueP uint64 // peak device-queue occupancy
	// Idle is how long a fixed-rate link's serialiser had nothing to send
	// (a sender that did not keep it busy, not the emulator).
	Idle              time.Duration
	Opportunities     uint64 // trace opportunities elapsed while busy or idle
	UsedOpportunities uint64 // opportunities that carried at least one byte
	// Lateness of deliveries (the link's goroutine ran after a packet's
	// delivery time): the largest, and packets StallLate or more late, in
	// StallEvents separate stretches (the emulator stalled).
	MaxLate     time.Duration
	LatePackets uint64
	StallEvents uint64
	// StallsAt are the first stalls' times since the link started (up to
	// maxStallsAt), to line them up with what the hosts saw.
	StallsAt []time.Duration `json:",omitempty"`
}

const maxStallsAt = 64

// StallLate is the delivery lateness counted as an emulator stall: far
// beyond a timer's slack (the link sleeps its last 2 ms on its own thread),
// a quarter of TCP's 200 ms minimum retransmission timeout and of the lab's
// 200 ms measurement step. Measured at load 10-12 on 2 cores: at most
// 33 ms with the emulator at real-time priority, up to 245 ms without.
const StallLate = 50 * time.Millisecond

type pkt struct {
	data      []byte
	arrival   time.Time
	remaining int       // bytes still to serialise (trace mode)
	depart    time.Time // fixed rate: computed when it reaches the head
	deliverAt time.Time
	meta      any
}

// Link is one direction of an emulated link.
type Link struct {
	cfg LinkConfig
	out func(data []byte, meta any)

	mu        sync.Mutex
	queue     []*pkt
	qBytes    int
	delay     []*pkt
	busyUntil time.Time // fixed rate: when the serialiser frees up
	base      time.Time // trace: time of offset 0
	nextOpp   uint64    // trace: index of the next opportunity
	rng       *rand.Rand
	stats     LinkStats
	stalled   bool // the last delivery was late

	wake chan struct{}
	room chan struct{}
	done chan struct{}
}

// NewLink creates a link that calls out for every delivered packet (from the
// link's goroutine; out must not block for long). Start it with Run.
func NewLink(cfg LinkConfig, out func(data []byte, meta any)) *Link {
	seed := cfg.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	l := &Link{cfg: cfg, out: out, rng: rand.New(rand.NewSource(seed)),
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), done: make(chan struct{})}
	if cfg.Air != nil {
		if cfg.Delay != 0 {
			panic("emu: a link on an 802.11 medium has no delay line")
		}
		cfg.Air.attach(l)
	}
	return l
}

// Base is the time the link started (offset 0 of its trace).
func (l *Link) Base() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.base
}

// Config returns the link's configuration.
func (l *Link) Config() LinkConfig { return l.cfg }

// Stats returns a snapshot of the counters.
func (l *Link) Stats() LinkStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.StallsAt = append([]time.Duration(nil), s.StallsAt...)
	return s
}

// QueueBytes returns the current device-queue occupancy in bytes.
func (l *Link) QueueBytes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.qBytes
}

func (l *Link) full(extra int) bool {
	if l.cfg.QueueBytes > 0 && l.qBytes+extra > l.cfg.QueueBytes {
		return true
	}
	if l.cfg.QueuePackets > 0 && len(l.queue)+1 > l.cfg.QueuePackets && extra > 0 {
		return true
	}
	return false
}

// hasRoom: like a driver that stops its queue when the backlog exceeds the
// threshold, the queue takes one more packet while it is below its limit.
func (l *Link) hasRoom() bool {
	if l.cfg.QueueBytes > 0 && l.qBytes >= l.cfg.QueueBytes {
		return false
	}
	if l.cfg.QueuePackets > 0 && len(l.queue) >= l.cfg.QueuePackets {
		return false
	}
	return true
}

// WaitRoom blocks until the device queue is below its limit or ctx ends.
func (l *Link) WaitRoom(ctx context.Context) error {
	for {
		l.mu.Lock()
		ok := l.hasRoom()
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-l.room:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Enqueue offers a packet to the link; it reports whether it was accepted.
// With an unlimited rate and no delay the packet is delivered at once.
// A reader using WaitRoom may overshoot the limit by one packet, as a driver
// that stops its queue only after the threshold was crossed; a plain
// Enqueue is strict drop-tail.
func (l *Link) Enqueue(data []byte, meta any) bool {
	return l.enqueue(data, meta, false)
}

// EnqueueAdmitted is Enqueue for a reader that waited in WaitRoom: it is
// accepted if the queue was below its limit, even if it ends above it.
func (l *Link) EnqueueAdmitted(data []byte, meta any) bool {
	return l.enqueue(data, meta, true)
}

func (l *Link) enqueue(data []byte, meta any, admitted bool) bool {
	now := time.Now()
	l.mu.Lock()
	if l.cfg.Loss > 0 && l.rng.Float64() < l.cfg.Loss {
		l.stats.DropLoss++
		l.mu.Unlock()
		return false
	}
	if admitted {
		if !l.hasRoom() {
			l.stats.DropTail++
			l.mu.Unlock()
			return false
		}
	} else if l.full(len(data)) {
		l.stats.DropTail++
		l.mu.Unlock()
		return false
	}
	l.stats.EnqPackets++
	l.stats.EnqBytes += uint64(len(data))
	if l.cfg.Unlimited() && l.cfg.Delay == 0 {
		l.stats.OutPackets++
		l.stats.OutBytes += uint64(len(data))
		l.mu.Unlock()
		l.out(data, meta)
		return true
	}
	p := &pkt{data: data, arrival: now, remaining: len(data), meta: meta}
	if l.cfg.Unlimited() {
		p.deliverAt = now.Add(l.cfg.Delay)
		l.delay = append(l.delay, p)
	} else {
		l.queue = append(l.queue, p)
		l.qBytes += len(data)
		if uint64(l.qBytes) > l.stats.MaxQueueBytes {
			l.stats.MaxQueueBytes = uint64(l.qBytes)
		}
		if uint64(len(l.queue)) > l.stats.MaxQueueP {
			l.stats.MaxQueueP = uint64(len(l.queue))
		}
	}
	l.mu.Unlock()
	if l.cfg.Air != nil {
		l.cfg.Air.kick()
		return true
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return true
}

// Run serves the link until ctx ends.
func (l *Link) Run(ctx context.Context) {
	defer close(l.done)
	l.mu.Lock()
	l.base = time.Now()
	l.busyUntil = l.base
	l.mu.Unlock()
	if l.cfg.Air != nil {
		l.cfg.Air.serve(ctx)
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var ready []*pkt
	for {
		now := time.Now()
		l.mu.Lock()
		freed := l.serialise(now)
		ready = ready[:0]
		for len(l.delay) > 0 && !l.delay[0].deliverAt.After(now) {
			p := l.delay[0]
			l.delay[0] = nil
			l.delay = l.delay[1:]
			l.late(now.Sub(p.deliverAt))
			l.stats.OutPackets++
			l.stats.OutBytes += uint64(len(p.data))
			ready = append(ready, p)
		}
		next := l.nextEvent()
		l.mu.Unlock()
		if freed {
			select {
			case l.room <- struct{}{}:
			default:
			}
		}
		for _, p := range ready {
			l.out(p.data, p.meta)
		}
		if len(ready) > 0 {
			continue // delivering took time: look again before sleeping
		}
		var wait time.Duration = time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
			if wait <= 0 {
				continue
			}
		}
		if wait <= fineSleep {
			// Go timers may fire up to a millisecond late (the poller
			// sleeps in whole ms); sleep the last stretch on this thread.
			// Packets arriving meanwhile keep their arrival times, so
			// only their callbacks wait, never their departures.
			ts := unix.NsecToTimespec(int64(wait))
			_ = unix.Nanosleep(&ts, nil)
			continue
		}
		if !next.IsZero() {
			wait -= fineSleep
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

// late records a delivery's lateness. Called with mu held.
func (l *Link) late(d time.Duration) {
	l.stats.MaxLate = max(l.stats.MaxLate, d)
	if d < StallLate {
		l.stalled = false
		return
	}
	l.stats.LatePackets++
	if !l.stalled {
		l.stats.StallEvents++
		l.stalled = true
		if len(l.stats.StallsAt) < maxStallsAt {
			l.stats.StallsAt = append(l.stats.StallsAt, time.Since(l.base)-d)
		}
	}
}

// serialise moves every packet whose serialisation ended by now into the
// delay line; it reports whether the queue shrank. Called with mu held.
func (l *Link) serialise(now time.Time) bool {
	freed := false
	if l.cfg.Trace == nil {
		rate := l.cfg.Rate
		for len(l.queue) > 0 {
			p := l.queue[0]
			if p.depart.IsZero() {
				start := p.arrival
				if l.busyUntil.After(start) {
					start = l.busyUntil
				} else {
					l.stats.Idle += start.Sub(l.busyUntil)
				}
				p.depart = start.Add(time.Duration(float64(len(p.data)*8) / rate * float64(time.Second)))
			}
			if p.depart.After(now) {
				break
			}
			l.busyUntil = p.depart
			l.pop(p.depart)
			freed = true
		}
		return freed
	}
	tr := l.cfg.Trace
	for {
		opp := l.base.Add(tr.at(l.nextOpp))
		if opp.After(now) {
			break
		}
		if len(l.queue) == 0 || l.queue[0].arrival.After(opp) {
			// Idle at this opportunity: it is lost. Skip straight to the
			// first opportunity after the head's arrival (or now).
			skipTo := now
			if len(l.queue) > 0 {
				skipTo = l.queue[0].arrival
			}
			j := tr.firstAtOrAfter(skipTo.Sub(l.base))
			if j <= l.nextOpp {
				j = l.nextOpp + 1
			}
			l.stats.Opportunities += j - l.nextOpp
			l.nextOpp = j
			continue
		}
		l.stats.Opportunities++
		l.stats.UsedOpportunities++
		l.nextOpp++
		credit := OpportunityBytes
		for credit > 0 && len(l.queue) > 0 && !l.queue[0].arrival.After(opp) {
			p := l.queue[0]
			if p.remaining <= credit {
				credit -= p.remaining
				p.remaining = 0
				l.pop(opp)
				freed = true
			} else {
				p.remaining -= credit
				credit = 0
			}
		}
	}
	return freed
}

func (l *Link) pop(departed time.Time) {
	p := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	l.qBytes -= len(p.data)
	p.deliverAt = departed.Add(l.cfg.Delay)
	l.delay = append(l.delay, p)
}

// nextEvent is the earliest time something changes (zero: nothing pending).
func (l *Link) nextEvent() time.Time {
	var next time.Time
	if len(l.delay) > 0 {
		next = l.delay[0].deliverAt
	}
	if len(l.queue) > 0 {
		var t time.Time
		if l.cfg.Trace == nil {
			t = l.queue[0].depart
			if t.IsZero() {
				t = time.Now()
			}
		} else {
			t = l.base.Add(l.cfg.Trace.at(l.nextOpp))
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// airHead is the head packet's arrival and size (0: the queue is empty),
// for the 802.11 medium.
func (l *Link) airHead() (time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		return time.Time{}, 0
	}
	return l.queue[0].arrival, len(l.queue[0].data)
}

// airPop takes the head packet off the queue when the medium's exchange
// ended at t: delivered (returned, for Out) or dropped at the retry limit.
func (l *Link) airPop(t time.Time, delivered bool) *pkt {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.mu.Unlock()
		return nil
	}
	p := l.queue[0]
	l.queue[0] = nil
	l.queue = l.queue[1:]
	l.qBytes -= len(p.data)
	if delivered {
		l.late(time.Since(t))
		l.stats.OutPackets++
		l.stats.OutBytes += uint64(len(p.data))
	} else {
		l.stats.DropRetry++
		p = nil
	}
	l.mu.Unlock()
	select {
	case l.room <- struct{}{}:
	default:
	}
	return p
}
