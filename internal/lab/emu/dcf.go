// dcf.go: an 802.11 DCF medium, the contention of a Wi-Fi BSS.
//
// A DCF is one half-duplex medium shared by several transmit queues: every
// station's uplink and the access point's downlink (the AP is one more
// contender, as in 802.11). Each queue is a Link whose LinkConfig.Air is the
// DCF (drop-tail at the Link's own limit); the DCF, not a rate or a trace,
// decides when its head frame leaves. Frames are the IP packets the links
// carry, one MPDU each (no A-MPDU aggregation, no RTS/CTS, no rate
// adaptation, no capture: a collision loses every frame in it).
//
// The model is the Distributed Coordination Function as Bianchi analysed it
// (G. Bianchi, "Performance Analysis of the IEEE 802.11 Distributed
// Coordination Function", IEEE JSAC 18(3), 2000), simulated per contention
// round at absolute times:
//
//   - A round starts when the medium frees (or, idle, at the first frame's
//     arrival). Its contenders are the queues with a frame at that instant.
//   - A contender without a backoff counter draws one uniformly from
//     [0, CW]; a contender that lost the previous round keeps what is left
//     of its counter (DCF freezes the countdown while the medium is busy).
//   - The smallest counter m wins: the round costs DIFS (EIFS after a
//     collision: the stations that heard it garbled wait that) + m slots,
//     and every contender's counter goes down by m.
//   - One queue at 0: success. The exchange costs the PHY preamble and
//     header + the frame (MAC header, LLC/SNAP, FCS, the PHY's service and
//     tail bits) at the PHY rate + SIFS + ACK; the frame leaves the queue,
//     CW returns to CWmin, and the queue draws a new counter for its next
//     frame.
//   - Several at 0: collision. The round costs the preamble + the longest
//     frame; each collider doubles CW (+1, up to CWmax) and redraws; a frame
//     that has used its RetryLimit attempts is dropped (LinkStats.DropRetry),
//     and its queue's CW returns to CWmin.
//
// Constants: the 802.11a/g OFDM PHY (IEEE 802.11-2016, 17.4.4 table 17-21;
// 10.3.2.3 for DIFS and EIFS; 10.3.3 for CW and the retry limit): slot
// 9 µs, SIFS 16 µs, DIFS = SIFS + 2 slots = 34 µs, CWmin 15, CWmax 1023,
// dot11ShortRetryLimit 7, preamble + SIGNAL 20 µs; the ACK (14 bytes) at
// 24 Mbit/s = 28 µs; EIFS = SIFS + DIFS + an ACK at 6 Mbit/s (44 µs) =
// 94 µs.
//
// The PHY rate is derived from DCFConfig.Rate so that one backlogged
// station sending 1500-byte IP packets alone gets exactly Rate of IP
// payload (its mean cycle: DIFS + CWmin/2 slots + preamble + frame + SIFS +
// ACK). An experiment's --rate keeps its meaning for a single sender; N
// backlogged contenders then get less in total, as Bianchi's analysis says
// (dcf_test.go checks the model against his fixed point).
//
// Note: the simulation works on absolute times, like a Link: a round's
// contenders and outcome depend only on the frames' arrival times and the
// seeded draws, never on when the medium's goroutine wakes up; a late
// wake-up delays deliveries (counted as the member links' lateness) but not
// the schedule. A frame that arrives during a round joins the next one (real
// DCF lets it join a countdown in progress); a queue draws its counter when
// it next contends (no post-backoff while empty).
package emu

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DCFPHY are a DCF's timing and backoff constants.
type DCFPHY struct {
	Slot, SIFS, DIFS, EIFS time.Duration
	Preamble               time.Duration // PHY preamble and header of every frame
	ACK                    time.Duration // an ACK frame's air time
	CWMin, CWMax           int
	RetryLimit             int // attempts per frame
	MACOverhead            int // bytes a data frame adds to the IP packet: MAC header 24, LLC/SNAP 8, FCS 4
	ServiceTailBits        int // OFDM SERVICE (16) and tail (6) bits
}

// OFDM are the 802.11a/g constants (IEEE 802.11-2016 table 17-21).
var OFDM = DCFPHY{
	Slot: 9 * time.Microsecond, SIFS: 16 * time.Microsecond, DIFS: 34 * time.Microsecond,
	EIFS:     94 * time.Microsecond,
	Preamble: 20 * time.Microsecond, ACK: 28 * time.Microsecond,
	CWMin: 15, CWMax: 1023, RetryLimit: 7,
	MACOverhead: 36, ServiceTailBits: 22,
}

// CalibrationPacket is the IP packet size (bytes) at which a single
// backlogged station gets DCFConfig.Rate.
const CalibrationPacket = 1500

// DCFConfig describes a medium.
type DCFConfig struct {
	// Rate is the IP payload rate (bit/s) one backlogged station gets
	// alone with 1500-byte packets; the PHY rate follows from it.
	Rate float64
	PHY  DCFPHY // zero: OFDM
	Seed int64  // backoff RNG seed (0: 1)
}

// DCFStats are a medium's counters; the times are of the medium's own
// (simulated) schedule since it started.
type DCFStats struct {
	Contenders int           // queues attached
	PHYRate    float64       // bit/s, derived from Rate
	Rounds     uint64        // contention rounds
	Successes  uint64        // frames delivered
	Collisions uint64        // rounds with two or more frames at once
	Collided   uint64        // frames in collisions (each attempt)
	RetryDrops uint64        // frames dropped at the retry limit
	Elapsed    time.Duration // end of the last round since the start
	Idle       time.Duration // no queue had a frame
	Backoff    time.Duration // DIFS/EIFS and backoff slots
	AirOK      time.Duration // successful exchanges (preamble, frame, SIFS, ACK)
	AirLost    time.Duration // collisions (preamble, longest frame)
}

// dcfState is one contender's backoff state.
type dcfState struct {
	cw      int
	counter int // -1: none drawn
	retry   int // failed attempts of the head frame
}

// dcfCore is the contention model without time or queues: given the head
// frame of every contender (0: empty), one round's outcome.
type dcfCore struct {
	phy      DCFPHY
	phyRate  float64
	rng      *rand.Rand
	st       []dcfState
	lastLost bool // the previous round was a collision (EIFS)
	stats    DCFStats
	scratch  []int // the round's contenders at 0
}

// dcfRound is a round's outcome: its length, the winner (-1: none), and the
// contenders whose head frame is dropped at the retry limit.
type dcfRound struct {
	dur     time.Duration
	winner  int
	dropped []int
}

func newDCFCore(cfg DCFConfig) (*dcfCore, error) {
	phy := cfg.PHY
	if phy == (DCFPHY{}) {
		phy = OFDM
	}
	if cfg.Rate <= 0 {
		return nil, fmt.Errorf("dcf: rate %v: want > 0", cfg.Rate)
	}
	r, err := phyRate(phy, cfg.Rate)
	if err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	c := &dcfCore{phy: phy, phyRate: r, rng: rand.New(rand.NewSource(seed))}
	c.stats.PHYRate = r
	return c, nil
}

// phyRate is the PHY rate at which one station alone gets rate of IP
// payload with CalibrationPacket-byte packets:
//
//	CalibrationPacket*8/rate = DIFS + CWmin/2*slot + preamble + bits/phy + SIFS + ACK
func phyRate(p DCFPHY, rate float64) (float64, error) {
	fixed := p.DIFS + p.Preamble + p.SIFS + p.ACK
	cycle := float64(CalibrationPacket*8) / rate
	frame := cycle - fixed.Seconds() - float64(p.CWMin)/2*p.Slot.Seconds()
	if frame <= 0 {
		return 0, fmt.Errorf("dcf: %.1f Mbit/s is beyond what DCF's overhead allows one station with %d-byte packets (< %.1f Mbit/s)",
			rate/1e6, CalibrationPacket, float64(CalibrationPacket*8)/(cycle-frame)/1e6)
	}
	return float64(frameBits(p, CalibrationPacket)) / frame, nil
}

func frameBits(p DCFPHY, size int) int { return 8*(size+p.MACOverhead) + p.ServiceTailBits }

// frameAir is a data frame's air time: preamble and header, then the frame.
func (c *dcfCore) frameAir(size int) time.Duration {
	return c.phy.Preamble + time.Duration(float64(frameBits(c.phy, size))/c.phyRate*1e9)
}

// add makes room for one more contender.
func (c *dcfCore) add() int {
	c.st = append(c.st, dcfState{cw: c.phy.CWMin, counter: -1})
	c.stats.Contenders = len(c.st)
	return len(c.st) - 1
}

// round runs one contention round among the contenders with a head frame
// (heads[i] > 0: its size in bytes). At least one must have one.
func (c *dcfCore) round(heads []int) dcfRound {
	m := -1
	for i, h := range heads {
		if h <= 0 {
			continue
		}
		s := &c.st[i]
		if s.counter < 0 {
			s.counter = c.rng.Intn(s.cw + 1)
		}
		if m < 0 || s.counter < m {
			m = s.counter
		}
	}
	wait := c.phy.DIFS
	if c.lastLost {
		wait = c.phy.EIFS
	}
	wait += time.Duration(m) * c.phy.Slot
	zero := c.scratch[:0]
	longest := 0
	for i, h := range heads {
		if h <= 0 {
			continue
		}
		c.st[i].counter -= m
		if c.st[i].counter == 0 {
			zero = append(zero, i)
			longest = max(longest, h)
		}
	}
	c.scratch = zero
	c.stats.Rounds++
	c.stats.Backoff += wait
	r := dcfRound{winner: -1}
	if len(zero) == 1 {
		w := zero[0]
		air := c.frameAir(heads[w]) + c.phy.SIFS + c.phy.ACK
		c.st[w] = dcfState{cw: c.phy.CWMin, counter: -1}
		c.stats.Successes++
		c.stats.AirOK += air
		c.lastLost = false
		r.winner, r.dur = w, wait+air
		c.stats.Elapsed += r.dur
		return r
	}
	air := c.frameAir(longest)
	for _, i := range zero {
		s := &c.st[i]
		s.retry++
		if s.retry >= c.phy.RetryLimit {
			*s = dcfState{cw: c.phy.CWMin, counter: -1}
			r.dropped = append(r.dropped, i)
			continue
		}
		s.cw = min(2*s.cw+1, c.phy.CWMax)
		s.counter = c.rng.Intn(s.cw + 1)
	}
	c.stats.Collisions++
	c.stats.Collided += uint64(len(zero))
	c.stats.RetryDrops += uint64(len(r.dropped))
	c.stats.AirLost += air
	c.lastLost = true
	r.dur = wait + air
	c.stats.Elapsed += r.dur
	return r
}

// idle records a stretch with no frame to send.
func (c *dcfCore) idle(d time.Duration) {
	c.stats.Idle += d
	c.stats.Elapsed += d
}

// DCF is a shared 802.11 medium; its contenders are the Links configured
// with it (LinkConfig.Air; attach them all before the emulator runs). The
// goroutine of the first member link's Run serves the medium: contention,
// then each frame's delivery (the link's Out) at the end of its exchange;
// the other members' Run only wait.
type DCF struct {
	mu       sync.Mutex
	core     *dcfCore
	links    []*Link
	serving  bool
	idleFrom time.Time // the medium is idle since (zero: a frame waits)
	wake     chan struct{}
}

// NewDCF returns a medium with no contenders.
func NewDCF(cfg DCFConfig) (*DCF, error) {
	c, err := newDCFCore(cfg)
	if err != nil {
		return nil, err
	}
	return &DCF{core: c, wake: make(chan struct{}, 1)}, nil
}

// Stats returns a snapshot of the medium's counters (an idle stretch in
// progress counted up to now).
func (m *DCF) Stats() DCFStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.core.stats
	if !m.idleFrom.IsZero() {
		d := max(time.Since(m.idleFrom), 0)
		s.Idle += d
		s.Elapsed += d
	}
	return s
}

// PHYRate is the PHY rate the medium derived from its Rate, bit/s.
func (m *DCF) PHYRate() float64 { return m.core.phyRate }

// attach makes l a contender.
func (m *DCF) attach(l *Link) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.core.add()
	m.links = append(m.links, l)
}

// kick tells the medium a frame arrived.
func (m *DCF) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// serve is a member link's Run: the first one serves the medium until ctx
// ends, the others wait for that.
func (m *DCF) serve(ctx context.Context) {
	m.mu.Lock()
	first := !m.serving
	m.serving = true
	m.mu.Unlock()
	if first {
		m.run(ctx)
	} else {
		<-ctx.Done()
	}
}

// run simulates round after round at absolute times: a round starts when
// the medium frees (or at the first arrival after an idle stretch), with the
// queues that have a frame then; its outcome is applied when it ends.
func (m *DCF) run(ctx context.Context) {
	m.mu.Lock()
	links := append([]*Link(nil), m.links...)
	m.mu.Unlock()
	heads := make([]int, len(links))
	arrivals := make([]time.Time, len(links))
	free := time.Now()
	for ctx.Err() == nil {
		var first time.Time
		for i, l := range links {
			arrivals[i], heads[i] = l.airHead()
			if heads[i] > 0 && (first.IsZero() || arrivals[i].Before(first)) {
				first = arrivals[i]
			}
		}
		if first.IsZero() {
			m.mu.Lock()
			m.idleFrom = free
			m.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-m.wake:
			}
			continue
		}
		m.mu.Lock()
		m.idleFrom = time.Time{}
		if first.After(free) {
			m.core.idle(first.Sub(free))
			free = first
		}
		for i := range heads {
			if arrivals[i].After(free) {
				heads[i] = 0 // arrived after the round began: the next one
			}
		}
		r := m.core.round(heads)
		m.mu.Unlock()
		free = free.Add(r.dur)
		if !sleepUntil(ctx, free) {
			return
		}
		if r.winner >= 0 {
			if p := links[r.winner].airPop(free, true); p != nil {
				links[r.winner].out(p.data, p.meta)
			}
		}
		for _, i := range r.dropped {
			links[i].airPop(free, false)
		}
	}
}

// sleepUntil sleeps until t (the last fineSleep on this thread, as a Link
// does); false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	wait := time.Until(t)
	if wait > fineSleep {
		timer := time.NewTimer(wait - fineSleep)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
		wait = time.Until(t)
	}
	if wait > 0 {
		ts := unix.NsecToTimespec(int64(wait))
		_ = unix.Nanosleep(&ts, nil)
	}
	return ctx.Err() == nil
}
