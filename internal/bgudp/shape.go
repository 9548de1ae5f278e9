// shape.go: the controlled upload's rate as the interface's shaper's
// (datapath.SetBgShape) instead of the policer's. The class's egress then
// waits in the shaper's queue above the rate instead of being dropped: a
// loss-based sender (quic-go's CUBIC) meets no drop at a lowering of the
// rate and keeps the bottleneck busy through its own window cuts from
// that local queue, where a policer leaves it only the bottleneck's queue
// to do so (docs/background.md, "Background QUIC and UDP"). Where the
// interface has no tree with a shaper, or the rule's Off.Shape asks, the
// policer holds the upload as before.
package bgudp

import (
	"log/slog"
	"time"
)

// shaper is one episode's use of its interface's shaper.
type shaper struct {
	failed bool   // the interface has no shaper: the policer holds the upload
	rate   uint64 // the shaper's rate (0: the class's egress is not shaped)
	sent   uint64 // the shaper's bytes sent at the last read
}

// usable says whether the upload's rate goes to the shaper.
func (s *shaper) usable(r Rule) bool { return !r.Off.Shape && !s.failed }

// passed reads what the shaper sent since the last read, in bytes/s over
// dt; ok is false when the class's egress was not shaped over the step.
func (s *shaper) passed(dp Datapath, ifindex int, dt time.Duration) (rate uint64, ok bool) {
	if s.rate == 0 {
		return 0, false
	}
	st, err := dp.BgShapeStats(ifindex)
	if err != nil {
		return 0, false
	}
	sent := st.Bytes - min(st.Bytes, s.sent)
	s.sent = st.Bytes
	return uint64(float64(sent) / max(dt.Seconds(), 1e-3)), true
}

// set puts the upload's rate on the shaper (0: not shaped); it returns
// false, and stops using the shaper, where the interface has none (the
// caller polices instead).
func (s *shaper) set(dp Datapath, ifindex int, rate uint64, log *slog.Logger) bool {
	if rate == s.rate {
		return true
	}
	if err := dp.SetBgShape(ifindex, rate); err != nil {
		if rate != 0 {
			log.Info("bgudp: no shaper, the upload is policed", "ifindex", ifindex, "err", err)
			s.failed = true
			_ = dp.SetBgShape(ifindex, 0)
		}
		s.rate = 0
		return false
	}
	if s.rate == 0 { // the shaper's count from here
		if st, err := dp.BgShapeStats(ifindex); err == nil {
			s.sent = st.Bytes
		}
	}
	s.rate = rate
	return true
}
