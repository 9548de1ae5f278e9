// account.go: what a step knows of the link the class shares with the
// other lanes: whether the link is read from every lane's bytes, what
// the others take, the room they leave, and where the growth is slowed.

package bgudp

// account is one step's account of the class's link (State.account).
type account struct {
	// every: the link is read from every lane's bytes (the interface's
	// counter), not the class's own
	every    bool
	others   float64 // the other lanes' bytes/s over the window (0 unless every)
	measured uint64  // the link's measurement of the last estimateKeep steps (0: none)
	known    uint64  // measured, or the last measurement however old (State.known)
}

// account reads the step's account from the state. The link is read from
// every lane's bytes for arrivals and for an upload beside a present
// foreground (its share target), so that the class is bounded by the
// room the other lanes leave. Alone, an upload's link stays its own
// bytes: read from every lane's, it read the link whole, the class ran
// at it, the queue never drained, and beside a peer silent to echo
// (samples 150 ms old) the probe's p50 stood at 47-60 ms. The others'
// bytes make the growth a share of the room they leave, not of the whole
// link: of the whole link, beside a UDP stream at 40 % the class's
// arrivals overshot that room and the probe's p95 rose by 5-8 ms.
func (s *State) account(in Input) account {
	a := account{every: !s.Rule.Off.OwnLink && (in.Arrived || s.Rule.shapedShare(in)), measured: s.measured, known: s.known()}
	if a.every {
		a.others = s.win.others()
	}
	return a
}

// room is the most a shaped class may take (bytes/s; 0: no bound but
// the headroom's, off with the lab's switch): the measured link less the
// other lanes' bytes over the window, either direction. Bounded only by
// 0.95 of the whole link, a quic-go download beside a UDP call at 40 %
// grew to 7.9 Mbit/s in a room of 6, and each probe of its window queued
// 20-34 ms at the bottleneck: the probe's p95 +24 to +27 ms over the call
// alone; an upload measured from its own bytes, +26 to +43 ms.
func (a account) room(shaped, off bool) uint64 {
	if !shaped || a.measured == 0 || off || !a.every {
		return 0
	}
	return uint64(max(1, float64(a.measured)-a.others))
}

// beyond says whether rate is above what the link as known leaves the
// class: the known link less the other lanes' bytes where every lane's
// are counted, else the known link itself; there the growth is slowed
// (beyondLink). Once the measurement bounding a shaped class by the room
// aged out, the class grew a twentieth of the link a step past it, and
// beside a UDP call the bottleneck's queue rose to 30 ms before the
// decrease (a quic-go download, every 2 s). A shaped upload's own
// measurement beside a foreground (ownShare: not every) is its own rate,
// not a bound to slow at (Rule.shapedShare).
func (a account) beyond(rate uint64, ownShare bool) bool {
	switch {
	case a.known == 0:
		return false
	case a.every:
		return float64(rate) >= float64(a.known)-a.others
	}
	return rate >= a.known && !ownShare
}
