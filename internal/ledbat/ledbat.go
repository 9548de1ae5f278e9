// Package ledbat is the reference model of LEDBAT++
// (draft-irtf-iccrg-ledbat-plus-plus), the background lane's congestion
// control: the rules of the draft in plain Go, with the integer conventions
// of the BPF implementation (internal/bpf/ledbat, ledbat_core.h) so that
// tests compare the two step by step, and so that the daemon and the lab
// can explain what a background flow's window is doing.
//
// Units: delays are round-trip times in microseconds, times the low 32 bits
// of a microsecond clock (compared wrap-safe), cwnd in packets with a signed
// fraction Acc in 1/Scale packets.
//   - base delay: minimum RTT over BaseBuckets one-minute buckets;
//   - current delay: minimum RTT over the last Filter time slots, a slot
//     lasting at least (base + SOther)/SlotDiv and holding at least one
//     sample (so about one round trip of the flow's ACK clock when ACKs are
//     dense, the last Filter samples when they are sparse; behind the other
//     direction's standing queue data comes in bursts a round trip apart,
//     and a filter of one base RTT reads its own burst as queue): the bursty delivery of a cellular link swings the
//     per-ACK RTT by several ms with no standing queue, and a filter over
//     a few samples (well under a millisecond of ACKs) passes that on;
//   - gain = 1 / min(16, ceil(2 * target / base)) per round trip;
//   - beside a present foreground, a round trip inflated by a queue not
//     its own (the other direction's, SOther) scales the window, so the
//     rate stays where its own queue put it (KeepRate; FlagRateUnkept: the
//     growth scaled instead, the receiver's rule);
//   - slow start (initial, or after a slowdown): cwnd += gain per acked
//     packet; it ends when the queuing delay exceeds 3/4 of the target or
//     cwnd reaches ssthresh;
//   - congestion avoidance, per RTT: cwnd += gain below the target,
//     cwnd += max(gain - cwnd * (qd/target - 1), -cwnd/2) above it;
//   - periodic slowdown: 2 RTTs after the initial slow start, then 9x the
//     previous slowdown's length after it ended: cwnd held at 2 for 2 RTTs,
//     then slow start back to the window before it (ended early only above
//     the target itself);
//   - loss: ssthresh = max(cwnd/2, 2);
//   - a new background flow on the host: the others slow down at once
//     (SlowdownNow), so the latecomer sees the true base delay, and come
//     back to half their window whatever the delay.
package ledbat

import "github.com/lanes-net/lanes/internal/config"

// Constants shared with ledbat_core.h.
const (
	ScaleShift        = 16
	Scale             = 1 << ScaleShift
	MinCwnd           = 2
	GainMaxDiv        = 16
	GrowthMax         = 16 // a round trip counts at most 16 currents (KeepRate)
	Filter            = 4  // current delay: minimum over 4 slots
	SlotDiv           = 3  // a slot lasts at least (base + SOther) / 3: the 4 slots span 1 to 4/3 round trips
	BaseBuckets       = 10
	BucketUS          = 60_000_000
	HoldRTTs          = 2
	FirstSlowdownRTTs = 2
	SlowdownSpacing   = 9
	FlagScheduled     = 1
	FlagJoin          = 2  // the coming slowdown makes room for a new flow
	FlagShareSlope    = 4  // sharing: the decrease's slope is that of ShareSlope x the target
	FlagShareDefer    = 8  // sharing: a periodic slowdown due waits until sharing ends
	FlagShareGrow     = 32 // sharing: the growth below the target in proportion to the distance to it
	FlagShare         = FlagShareSlope | FlagShareDefer | FlagShareGrow
	FlagShareSettled  = 16                          // sharing, the queue came down to the share target once
	FlagDrained       = 64                          // sharing, the queue came down to a quarter of the target since the slowdown was scheduled
	ShareSlope        = 4                           // the share target is a quarter of the flow's own
	ShareGrowSlope    = 2                           // with FlagShareGrow the decrease halves again
	DefaultTargetUS   = config.DefaultTargetDelayUS // the policy's default target_delay
	SsthreshInfinite  = 0x7fffffff                  // the kernel's TCP_INFINITE_SSTHRESH
	WinMax            = 65535                       // an ssthresh above is none (infinite)
	// FlagRateUnkept, set by the caller at New (the receiver, whose
	// offered window is never retracted; the sender by a lab switch, the
	// rule KeepRate replaced there): no KeepRate, SOther smoothed 1/8 a
	// sample and the growth per round trip scaled by m^2 (growth)
	FlagRateUnkept = 128
)

// Phase is where the controller is.
type Phase uint32

const (
	SlowStart Phase = iota // initial slow start
	Avoid                  // congestion avoidance
	Hold                   // slowdown: cwnd held at MinCwnd
	Restart                // slow start back to ssthresh after a slowdown
)

func (p Phase) String() string {
	switch p {
	case SlowStart:
		return "slow-start"
	case Avoid:
		return "avoid"
	case Hold:
		return "slowdown"
	case Restart:
		return "restart"
	}
	return "?"
}

// State is one socket's controller state (struct ledbat).
type State struct {
	Base      [BaseBuckets]uint32
	Cur       [Filter]uint32
	Bucket    uint32
	Samples   uint32
	Acc       int32
	Phase     Phase
	Flags     uint32
	TargetUS  uint32
	THoldEnd  uint32
	TSlowdown uint32
	TNext     uint32
	TSlot     uint32 // Cur[0]'s slot began (us)
	SOther    uint32 // the last sample's round trip's part not its own (us; smoothed 1/8 with FlagRateUnkept)
}

// Window is the socket's cwnd and ssthresh, in packets.
type Window struct {
	Cwnd, Ssthresh uint32
}

func after(now, t uint32) bool { return int32(now-t) >= 0 }

// New returns a fresh state with the given target at time nowUS.
func New(targetUS uint32, nowUS uint64) State {
	return State{TargetUS: targetUS, Bucket: uint32(nowUS / BucketUS), Phase: SlowStart, TSlot: uint32(nowUS)}
}

// RTT records one RTT sample taken at nowUS (the delay is the round trip).
func (s *State) RTT(rttUS uint32, nowUS uint64) { s.Delay(rttUS, 0, nowUS) }

// Delay records one delay sample rttUS taken at nowUS and otherUS, the part
// of its round trip that is not the flow's (the other direction's queue).
func (s *State) Delay(rttUS, otherUS uint32, nowUS uint64) {
	if rttUS == 0 {
		return
	}
	minute := uint32(nowUS / BucketUS)
	shift := minute - s.Bucket
	for i := uint32(0); i < BaseBuckets && i < shift; i++ {
		copy(s.Base[1:], s.Base[:BaseBuckets-1])
		s.Base[0] = 0
	}
	s.Bucket = minute
	s.Base[0] = minNonZero([]uint32{s.Base[0], rttUS})
	s.Samples++
	switch {
	case s.Flags&FlagRateUnkept == 0:
		s.SOther = otherUS
	case otherUS > s.SOther:
		s.SOther += (otherUS - s.SOther) >> 3
	default:
		s.SOther -= (s.SOther - otherUS) >> 3
	}
	// the current slot ends at the first sample (base + SOther) / SlotDiv
	// after it began: the filter spans the round trip the flow's clock runs at
	now := uint32(nowUS)
	if s.Cur[0] == 0 || after(now, s.TSlot+(s.BaseDelay()+s.SOther)/SlotDiv) {
		copy(s.Cur[1:], s.Cur[:Filter-1])
		s.Cur[0], s.TSlot = rttUS, now
		return
	}
	s.Cur[0] = minNonZero([]uint32{s.Cur[0], rttUS})
}

func minNonZero(v []uint32) uint32 {
	var m uint32
	for _, x := range v {
		if x != 0 && (m == 0 || x < m) {
			m = x
		}
	}
	return m
}

// BaseDelay is the minimum RTT of the last BaseBuckets minutes (0 = none).
func (s *State) BaseDelay() uint32 { return minNonZero(s.Base[:]) }

// CurrentDelay is the minimum RTT of the last Filter slots (0 = none).
func (s *State) CurrentDelay() uint32 { return minNonZero(s.Cur[:]) }

// QueuingDelay is current minus base delay.
func (s *State) QueuingDelay() uint32 {
	b, c := s.BaseDelay(), s.CurrentDelay()
	if c > b {
		return c - b
	}
	return 0
}

// GainDiv returns 1/gain = min(16, ceil(2*target/base)), at least 1.
func GainDiv(targetUS, baseUS uint32) uint32 {
	if baseUS == 0 {
		return GainMaxDiv
	}
	d := (2*uint64(targetUS) + uint64(baseUS) - 1) / uint64(baseUS)
	return uint32(min(max(d, 1), GainMaxDiv))
}

// apply moves whole packets of acc into cwnd, never below MinCwnd.
func (s *State) apply(w *Window, acc int64) {
	if acc >= 0 {
		w.Cwnd += uint32(uint64(acc) >> ScaleShift)
		s.Acc = int32(uint64(acc) & (Scale - 1))
	} else {
		mag := uint64(-acc)
		whole := mag >> ScaleShift
		if whole+MinCwnd < uint64(w.Cwnd) {
			w.Cwnd -= uint32(whole)
		} else {
			w.Cwnd = MinCwnd
		}
		s.Acc = -int32(mag & (Scale - 1))
	}
	w.Cwnd = max(w.Cwnd, MinCwnd)
}

// schedule ends a slow start at now and sets the next slowdown.
func (s *State) schedule(now, srttUS uint32) {
	if s.Phase == SlowStart {
		s.TNext = now + FirstSlowdownRTTs*srttUS
	} else {
		s.TNext = now + SlowdownSpacing*(now-s.TSlowdown)
	}
	s.Flags = (s.Flags | FlagScheduled) &^ (FlagJoin | FlagDrained)
	s.Phase = Avoid
	s.Acc = 0
}

// slowStartEnds says whether a slow start ends: the initial one when the
// queuing delay exceeds 3/4 of the target (the draft); a restart after a
// periodic slowdown only above the target itself, so that a flow returns to
// its window even where another flow keeps the queue near the target (at
// 3/4 the smaller of two flows would lose its share at every slowdown);
// a restart after a join slowdown on reaching ssthresh alone. All end at
// ssthresh.
func (s *State) slowStartEnds(qd uint32, w *Window) bool {
	if w.Cwnd >= w.Ssthresh {
		return true
	}
	switch {
	case s.Phase == SlowStart:
		return uint64(qd)*4 > uint64(s.TargetUS)*3
	case s.Flags&FlagJoin != 0:
		return false
	}
	return qd > s.TargetUS
}

// slowStartStep is the growth of slow start: gain per acked packet.
func (s *State) slowStartStep(w *Window, acked, gdiv uint32) {
	s.apply(w, int64(s.Acc)+int64((uint64(acked)<<ScaleShift)/uint64(gdiv)))
}

// Ack handles acked packets acknowledged at now with smoothed RTT srttUS;
// limited says the sender is cwnd-limited (growth allowed).
func (s *State) Ack(w *Window, acked, now, srttUS uint32, limited bool) {
	qd, target := s.QueuingDelay(), s.TargetUS
	gdiv := GainDiv(target, s.BaseDelay())
	if acked == 0 {
		return
	}
	if s.Phase == Hold {
		if !after(now, s.THoldEnd) {
			w.Cwnd = MinCwnd
			return
		}
		s.Phase, s.Acc = Restart, 0
	}
	aboveSSExit := uint64(qd)*4 > uint64(target)*3
	if s.Phase == SlowStart || s.Phase == Restart {
		if s.slowStartEnds(qd, w) {
			w.Ssthresh = min(w.Ssthresh, w.Cwnd)
			s.schedule(now, srttUS)
			return
		}
		if limited {
			s.slowStartStep(w, acked, gdiv)
		}
		return
	}
	if s.Flags&FlagShareDefer != 0 && uint64(qd)*4 <= uint64(target) {
		s.Flags |= FlagDrained
	}
	// the base was seen while sharing since the slowdown was scheduled:
	// none needed for it (ledbat_core.h)
	if s.Flags&FlagScheduled != 0 && after(now, s.TNext) && s.Flags&(FlagDrained|FlagJoin) == FlagDrained {
		s.TNext = now + SlowdownSpacing*HoldRTTs*srttUS
		s.Flags &^= FlagDrained
	}
	if s.Flags&FlagScheduled != 0 && after(now, s.TNext) && (s.Flags&FlagShareDefer == 0 || s.Flags&FlagJoin != 0) {
		w.Ssthresh, w.Cwnd = w.Cwnd, MinCwnd
		if s.Flags&FlagJoin != 0 {
			w.Ssthresh = max(w.Ssthresh/2, MinCwnd)
		}
		s.Phase, s.TSlowdown, s.THoldEnd = Hold, now, now+HoldRTTs*srttUS
		s.Flags &^= FlagScheduled
		s.Acc = 0
		return
	}
	if w.Cwnd < w.Ssthresh && !aboveSSExit {
		if limited {
			s.slowStartStep(w, acked, gdiv)
		}
		return
	}
	inc := s.growth(gdiv, w.Cwnd, qd)
	var dec uint64
	if qd > target {
		dec = (uint64(qd-target) << ScaleShift) / uint64(target)
	}
	if s.Flags&(FlagShareSlope|FlagShareGrow) != 0 && qd <= target {
		s.Flags |= FlagShareSettled
	}
	if s.Flags&FlagShareSlope != 0 && s.Flags&FlagShareSettled != 0 {
		dec /= ShareSlope
	}
	// the gain scaled by (target - qd) / target and the decrease halved
	// again (ledbat_core.h)
	if s.Flags&FlagShareGrow != 0 && s.Flags&FlagShareSettled != 0 {
		inc = shareGrowth(inc, qd, target)
		dec /= ShareGrowSlope
	}
	switch {
	case dec > inc:
		// a decrease is a congestion response: ssthresh follows it down,
		// or the rule above would slow-start straight back up
		d := min(dec-inc, Scale/2)
		s.apply(w, int64(s.Acc)-int64(d*uint64(acked)))
		w.Ssthresh = min(w.Ssthresh, w.Cwnd)
	case limited:
		s.apply(w, int64(s.Acc)+int64((inc-dec)*uint64(acked)))
	}
}

// Share sets the target for the next acks and how the flow shares beside a
// present foreground (FlagShare* bits, 0: not sharing): with FlagShareSlope,
// once the queue has come down to the (share) target (FlagShareSettled),
// the decrease above it is as steep as above a target ShareSlope times
// larger, the flow's own; with FlagShareGrow, settled, the growth below the
// target scaled by its distance to it and the decrease halved again; with
// FlagShareDefer a periodic slowdown due waits for the first ack after
// sharing ends (a join slowdown does not wait).
// Not sharing forgets FlagShareSettled.
func (s *State) Share(targetUS, share uint32) {
	var settled uint32
	if share&FlagShare != 0 {
		settled = s.Flags & FlagShareSettled
	}
	s.TargetUS = targetUS
	s.Flags = s.Flags&^(FlagShare|FlagShareSettled) | share&FlagShare | settled
}

// LinkWindow raises w's ssthresh to win, the window the flow's link carries
// at its base delay (0: unknown, or a foreground sends there), while its
// queue is at most a quarter of targetUS (the flow's own target, not the
// share target): the link is idle, so the rule below ssthresh slow-starts
// back to it (ledbat_core.h's ledbat_link_window).
func (s *State) LinkWindow(w *Window, win, targetUS uint32) {
	if s.Phase == Avoid && uint64(s.QueuingDelay())*4 <= uint64(targetUS) && win > w.Ssthresh {
		w.Ssthresh = win
	}
}

// SlowdownNow brings the next slowdown forward to now when in congestion
// avoidance: when a new background flow starts on the host, the others make
// room at once so that it measures the true base delay (latecomer fairness
// within the host, beyond the draft's periodic slowdowns). That slowdown
// (FlagJoin) halves ssthresh and its restart climbs back to it whatever the
// delay: the newcomer's slow start, which began while this flow held, would
// otherwise fill the queue first and leave this one a few packets.
func (s *State) SlowdownNow(now uint32) {
	if s.Phase != Avoid {
		return
	}
	s.TNext = now
	s.Flags |= FlagScheduled | FlagJoin
}

// Loss returns the ssthresh after a loss at now; a slow start ends there.
func (s *State) Loss(cwnd, now, srttUS uint32) uint32 {
	if s.Phase == SlowStart || s.Phase == Restart {
		s.schedule(now, srttUS)
	}
	return max(cwnd/2, MinCwnd)
}

// growth is the increase per acked packet in congestion avoidance, in
// 1/Scale packets: a gain per round trip. With FlagRateUnkept a round trip
// m times longer (m = 1 + SOther / current, SOther a queue not its own)
// scaled the gain per round trip by m^2 (m at most GrowthMax), the part
// above the gain shrinking by (target - qd) / target (ledbat_core.h's
// ledbat_inc).
func (s *State) growth(gdiv, cwnd, qd uint32) uint64 {
	div := uint64(gdiv) * uint64(cwnd)
	cur, target := s.CurrentDelay(), s.TargetUS
	if cur == 0 || s.SOther == 0 || qd >= target || s.Flags&FlagRateUnkept == 0 {
		return Scale / div
	}
	x := min((uint64(s.SOther)<<ScaleShift)/uint64(cur), (GrowthMax-1)<<ScaleShift) // m - 1
	x = 2*x + (x*x)>>ScaleShift                                                     // m^2 - 1
	x = x * uint64(target-qd) / uint64(target)
	return (Scale + x) / div
}

// shareGrowth is the growth inc scaled by the distance of qd below the
// target, (target - qd) / target, none at or above it.
func shareGrowth(inc uint64, qd, target uint32) uint64 {
	if qd >= target {
		return 0
	}
	return inc * uint64(target-qd) / uint64(target)
}
