// keeprate.go: a window's rate kept through the other direction's queue
// (ledbat_core.h's ledbat_keep_rate), apart from the draft's rules on State.
package ledbat

// KeepRate scales w, the window of s's flow, beside a present foreground
// (the queue is then another flow's; alone it may be its own, as a Wi-Fi
// medium's airtime), by the change of the round trip's part not the flow's
// own, from was (SOther before the last sample) to SOther: the rate,
// window / (current + SOther), stays where its own queue put it (at most
// GrowthMax currents; ssthresh alike where it is a window; ledbat_core.h's
// ledbat_keep_rate).
func KeepRate(s *State, w *Window, was uint32, present bool) {
	cur := uint64(s.CurrentDelay())
	lim := (GrowthMax - 1) * cur
	from, to := cur+min(uint64(was), lim), cur+min(uint64(s.SOther), lim)
	if cur == 0 || from == to || !present || s.Flags&FlagRateUnkept != 0 {
		return
	}
	if to > from {
		s.apply(w, int64(s.Acc)+int64((uint64(w.Cwnd)*(to-from)<<ScaleShift)/from))
	} else {
		s.apply(w, int64(s.Acc)-int64((uint64(w.Cwnd)*(from-to)<<ScaleShift)/from))
	}
	if w.Ssthresh <= WinMax {
		w.Ssthresh = uint32(min(max(uint64(w.Ssthresh)*to/from, MinCwnd), WinMax))
	}
}
