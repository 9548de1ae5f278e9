// shape.go: the controlled direction's rate as the interface's shaper's
// (datapath.SetBgShape: the tree's 1:15 for the upload, the IFB's class
// for the arrivals) instead of the policer's. The class's packets then
// wait in the shaper's queue above the rate instead of being dropped: a
// loss-based sender (quic-go's CUBIC) meets no drop at a lowering of the
// rate and keeps the bottleneck busy through its own window cuts from
// that local queue, where a policer leaves it only the bottleneck's queue
// to do so (docs/background.md, "Background QUIC and UDP"). Where the
// interface has no shaper in that direction (no tree, no IFB), or the
// rule's Off.Shape (upload) or Off.Ifb (arrivals) asks, the policer
// holds the direction as before.
package bgudp

import (
	"errors"
	"log/slog"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
)

// shaper is one episode's use of its interface's shaper in one direction.
type shaper struct {
	failed bool   // the interface has no shaper: the policer holds the direction
	rate   uint64 // the shaper's rate (0: the direction is not shaped)
	sent   uint64 // the shaper's bytes sent at the last read
	drops  uint64 // the shaper's drops at the last read
}

// usable says whether the direction's rate goes to the shaper.
func (s *shaper) usable(r Rule, d datapath.Direction) bool {
	off := r.Off.Shape
	if d == datapath.Download {
		off = r.Off.Ifb
	}
	return !off && !s.failed
}

// passed reads what the shaper sent since the last read, in bytes/s over
// dt, the bytes waiting in it now and whether it dropped any packet
// since; ok is false when the direction was not shaped over the step. A
// shaper the kernel refuses to deliver from (datapath.ErrIfbRefuses) is
// given up: the policer holds the direction.
func (s *shaper) passed(dp Datapath, ifindex int, d datapath.Direction, dt time.Duration) (rate, backlog uint64, dropped, ok bool) {
	if s.rate == 0 {
		return 0, 0, false, false
	}
	st, err := dp.BgShapeStats(ifindex, d)
	if errors.Is(err, datapath.ErrIfbRefuses) { // the policer holds the direction from here
		s.failed, s.rate = true, 0
		_ = dp.SetBgShape(ifindex, d, 0)
	}
	if err != nil {
		return 0, 0, false, false
	}
	sent := st.Bytes - min(st.Bytes, s.sent)
	dropped = st.Drops > s.drops
	s.sent, s.drops = st.Bytes, st.Drops
	return uint64(float64(sent) / max(dt.Seconds(), 1e-3)), st.BacklogBytes, dropped, true
}

// set puts the direction's rate on its shaper (0: not shaped); it returns
// false, and stops using the shaper, where the interface has none (the
// caller polices instead).
func (s *shaper) set(dp Datapath, ifindex int, d datapath.Direction, rate uint64, log *slog.Logger) bool {
	if rate == s.rate {
		return true
	}
	if err := dp.SetBgShape(ifindex, d, rate); err != nil {
		if rate != 0 {
			log.Info("bgudp: no shaper, the class is policed", "ifindex", ifindex, "dir", d, "err", err)
			s.failed = true
			_ = dp.SetBgShape(ifindex, d, 0)
		}
		s.rate = 0
		return false
	}
	if s.rate == 0 { // the shaper's count from here
		if st, err := dp.BgShapeStats(ifindex, d); err == nil {
			s.sent, s.drops = st.Bytes, st.Drops
		}
	}
	s.rate = rate
	return true
}
