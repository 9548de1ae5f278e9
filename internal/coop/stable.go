// stable.go: hysteresis for cooperative caps, so that a connection's cap
// does not flip between neighbouring values while the group is steady (each
// change rewrites the socket's clamp and ssthresh).
//
// A flow's cap follows its computed target (fractional segments):
//   - at once when the group changes: an active host or a local flow joins
//     or leaves, or capping turns on (the reaction to a join or leave is
//     not slowed);
//   - otherwise, down at once when the target falls below the band under
//     the cap (cap - band), and up only when the target has stayed at or
//     above cap + rise (a whole segment more, or 2 % of the cap if that is
//     more: capRise) for the dwell time, to the smallest target seen
//     during it (a min filter: a short upward blip is never applied);
//   - between the two the cap stays.
//
// The band is half a segment or 5 % of the cap, whichever is larger, so a
// held cap is at most that far above its target: the sum of caps exceeds
// the shared window by at most 5 % (or half a segment per flow). The band is
// only below the cap: with it above as well (up at cap + 1 + band), a cap
// that had come from below stayed up to 1 + 2 x band segments under its
// target (26 for a target of 27.8 at 16 uploads in the lab: the group's
// window 6 % short of the medium's, which idled 7 % of the time), while
// one that had come from above sat at the target's floor; the dwell and the
// min filter already keep a target that hovers across a boundary from
// raising the cap.
//
// The rise is relative for large caps: a whole segment is 3.5 % of a cap
// of 28 (16 hosts in the lab) but 0.4 % of one of 230 (2 hosts), where
// every creep of the estimate (the trim giving back half a step, the best
// rising by a per cent) raised the cap: 7.7 changes a minute per download
// at 2 hosts against 0-1.6 at 4-16. A cap at most 2 % under
// its target still keeps the group's window above the medium's BDP with
// the default queue allowance (1.05 x 0.98 = 1.03).
package coop

import (
	"math"
	"time"
)

// maxDwell bounds the dwell of a cap increase; it is two announcement
// intervals when that is shorter.
const maxDwell = 400 * time.Millisecond

// capDwell is how long a target must stay above the band before the cap
// grows.
func capDwell(interval time.Duration) time.Duration { return min(2*interval, maxDwell) }

// capBand is the hysteresis band around a cap, in segments.
func capBand(c uint32) float64 { return math.Max(0.5, 0.05*float64(c)) }

// capRiseFrac is the smallest rise of a large cap, as a fraction of it.
const capRiseFrac = 0.02

// capRise is how far above the cap a target must stay for the dwell
// before the cap grows, in segments: one, or capRiseFrac of the cap.
func capRise(c uint32) float64 { return math.Max(1, capRiseFrac*float64(c)) }

// capFilter is one flow's hysteresis state.
type capFilter struct {
	cap     uint32    // cap in force (0: none yet)
	upSince time.Time // target above the band since (zero: not)
	upMin   float64   // smallest target seen since upSince
}

// next returns the cap for a new target (segments, 0 = no cap); reset
// follows the target at once (the group changed).
func (f *capFilter) next(target float64, now time.Time, reset bool, dwell time.Duration) uint32 {
	want := segments(target, 1)
	if reset || f.cap == 0 || want == 0 {
		f.set(want)
		return f.cap
	}
	c, h := float64(f.cap), capBand(f.cap)
	switch {
	case target < c-h:
		f.set(want)
	case target >= c+capRise(f.cap):
		if f.upSince.IsZero() {
			f.upSince, f.upMin = now, target
		}
		f.upMin = math.Min(f.upMin, target)
		if now.Sub(f.upSince) >= dwell {
			f.set(segments(f.upMin, 1))
		}
	default:
		f.upSince = time.Time{}
	}
	return f.cap
}

func (f *capFilter) set(v uint32) { f.cap, f.upSince = v, time.Time{} }

// raising reports whether an increase is waiting for its dwell to end.
func (f *capFilter) raising() bool { return !f.upSince.IsZero() }
