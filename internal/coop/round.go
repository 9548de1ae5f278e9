// round.go: one recomputation of the caps (a round): the group's state
// gathered once (newRound), the safety fallback's observation of the
// group's windows and RTTs, the decision to cap, and the cooperative caps
// of this host's flows; apply.go applies the plan.
package coop

import (
	"sort"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// recomputeAndApply derives every cap and applies them: between ticks,
// on an event (a peer or a flow joined or left, a cap's dwell ended).
func (c *Controller) recomputeAndApply() {
	c.mu.Lock()
	p := c.recompute(c.newRound())
	c.mu.Unlock()
	c.applier.apply(p)
}

// judgeAndApply is recomputeAndApply at a tick: the uplink's interval is
// judged first (the safety signals and the estimate count intervals, not
// events).
func (c *Controller) judgeAndApply() {
	c.mu.Lock()
	r := c.newRound()
	c.observe(r)
	p := c.recompute(r)
	c.mu.Unlock()
	c.applier.apply(p)
}

// capPlan is what one recompute wants applied.
type capPlan struct {
	up, down map[uint64]uint32 // by socket cookie: segments, bytes
	lanes    map[lane.Lane]uint32
}

// recompute derives every local flow's caps, both ways, and the lanes'
// default caps. Caller holds mu.
func (c *Controller) recompute(r *round) capPlan {
	capping, reason := upCapDecision(c.cfg, &c.up, r)
	selfShare := c.setCoopCaps(r, capping)
	sockets, fst := c.ruleCaps(r)
	lanes, laneNames := c.laneCaps(r, capping, selfShare)
	c.fillStatus(r, capping, reason, selfShare, fst, laneNames)
	down := c.recomputeDown(c.now(), c.peers.table.Peers(), c.st.Flows)
	return capPlan{up: sockets, down: down, lanes: lanes}
}

// round is the group as one recompute sees it: the rate, this host's
// active flows, the hosts counted in N (this host first when it sends)
// and their shares and per-flow targets.
type round struct {
	now            time.Time
	peers          []Peer
	rate           uint64
	src            string
	p              CapParams
	self           HostLoad
	selfStates     []*flowState // this host's active flows, as in self
	hosts          []HostLoad
	selfIdx        int            // this host in hosts, -1 when it does not send
	peerIdx        map[uint64]int // counted peers in hosts
	realtimeActive bool           // a realtime-lane flow here or at a peer
	uncounted      int
	shares         []float64
	groupTargets   [][]float64
}

// newRound gathers the group: this host's active flows and the counted
// active peers, and computes the shares and per-flow targets.
func (c *Controller) newRound() *round {
	r := &round{now: c.now(), peers: c.peers.table.Peers(), selfIdx: -1, peerIdx: map[uint64]int{}}
	r.rate, r.src = c.up.rate(r.now)
	r.p = CapParams{RateBits: r.rate, HeadroomBits: uint64(c.cfg.Headroom), MinSegments: c.cfg.MinSegments,
		DemandAware: c.cfg.DemandAware, QueueAllowance: c.cfg.QueueAllowance}
	r.self = HostLoad{ID: c.hostID}
	for _, fs := range sortedFlows(c.flows) {
		if fs.active {
			f := fs.f
			r.self.Flows = append(r.self.Flows, FlowLoad{Cookie: f.Cookie, MSS: f.MSS, MinRTT: f.MinRTT, Queued: f.NotSent + f.InFlight})
			r.selfStates = append(r.selfStates, fs)
			if f.Lane == lane.Realtime {
				r.realtimeActive = true
			}
		}
	}
	if len(r.self.Flows) > 0 {
		r.selfIdx = 0
		r.hosts = append(r.hosts, r.self)
	}
	r.uncounted = c.peers.count(r.peers, r.now)
	for i := range r.peers {
		pp := &r.peers[i]
		if pp.Last.LaneMix[0] > 0 {
			r.realtimeActive = true
		}
		if pp.Active() && c.peers.counts(pp.ID) {
			r.peerIdx[pp.ID] = len(r.hosts)
			r.hosts = append(r.hosts, peerLoad(pp))
		}
	}
	r.shares = r.p.HostShares(r.hosts)
	r.groupTargets = r.p.GroupTargets(r.hosts, r.shares)
	return r
}

// observe judges one interval of the uplink: its rate estimator and
// safety fallback, and a peer's fallback followed.
func (c *Controller) observe(r *round) {
	obs, groupMinRTT := c.observation(r)
	peer, stopped := c.peers.stoppedPeer(r.peers, false)
	upGroup, upGroupJudged := c.up.groupGoodputs()
	c.up.judge(r.now, groupSample{goodput: upGroup, judged: upGroupJudged, inflation: obs.inflation,
		minRTT: groupMinRTT, windows: groupWindows(r)}, obs, peer, stopped)
}

// observation is the safety fallback's view of the group's flows: their
// median RTT inflation and queueing delay, whether the windows caps hold
// fit the rate, this host's promised share and whether its flows sit at
// their caps; and the group's median min RTT.
func (c *Controller) observation(r *round) (observation, time.Duration) {
	obs := observation{goodput: c.up.ownGoodputBits()}
	var infl, qd, minRTTs []float64
	var windowRate float64
	addFlow := func(srtt, minRTT time.Duration, cwnd, mss uint32, ours bool) {
		if srtt <= 0 || minRTT <= 0 {
			return
		}
		obs.flows++
		infl = append(infl, float64(srtt)/float64(minRTT))
		qd = append(qd, float64(srtt-minRTT))
		minRTTs = append(minRTTs, float64(minRTT))
		if ours {
			windowRate += windowBits(cwnd, mss, minRTT)
		}
	}
	for _, fs := range r.selfStates {
		addFlow(fs.f.SRTT, fs.f.MinRTT, fs.f.Cwnd, fs.f.MSS, true)
	}
	for _, pp := range r.peers {
		pi, counted := r.peerIdx[pp.ID]
		for j, f := range pp.Last.Flows {
			held := true
			if counted && r.rate > 0 && j < len(r.groupTargets[pi]) {
				held = !uncapped(float64(f.Cwnd), r.groupTargets[pi][j], c.cfg.MinSegments)
			}
			addFlow(f.SRTT, f.MinRTT, uint32(f.Cwnd), uint32(f.MSS), held)
		}
	}
	obs.inflation = median(infl)
	obs.queueDelay = time.Duration(median(qd))
	obs.inflightLow = r.rate > 0 && windowRate <= float64(r.rate)*(1+c.cfg.QueueAllowance)
	if r.selfIdx >= 0 && c.cfg.APRate > 0 {
		obs.promised = r.shares[r.selfIdx] * float64(c.cfg.APRate.Bits())
		obs.rate = float64(c.cfg.APRate.Bits())
	}
	obs.group = c.up.ownGoodputBits()
	for i := range r.peers {
		if _, counted := r.peerIdx[r.peers[i].ID]; counted {
			obs.group += float64(r.peers[i].Last.GoodputKbit) * 1000
		}
	}
	for _, fs := range r.selfStates {
		if fs.coop > 0 && fs.f.Cwnd+1 >= fs.coop {
			obs.atCap = true
		}
	}
	return obs, time.Duration(median(minRTTs))
}

// groupWindows is what the group's windows carry in an interval at their
// current RTT: the sum of cwnd x MSS / srtt over this host's active flows
// and the counted peers' announced ones (the goodput's hosts), bit/s (0:
// none known). An interval can deliver more only by a loss's catch-up
// (estimate.go: recorded).
func groupWindows(r *round) float64 {
	w := 0.0
	add := func(cwnd, mss uint32, srtt time.Duration) {
		if srtt > 0 {
			w += windowBits(cwnd, mss, srtt)
		}
	}
	for _, fs := range r.selfStates {
		add(fs.f.Cwnd, fs.f.MSS, fs.f.SRTT)
	}
	for _, pp := range r.peers {
		if _, counted := r.peerIdx[pp.ID]; counted {
			for _, f := range pp.Last.Flows {
				add(uint32(f.Cwnd), uint32(f.MSS), f.SRTT)
			}
		}
	}
	return w
}

// windowBits is what a window of cwnd segments of mss bytes carries in
// one rtt, bit/s.
func windowBits(cwnd, mss uint32, rtt time.Duration) float64 {
	return float64(cwnd) * float64(mss) * 8 / rtt.Seconds()
}

// upCapDecision says whether cooperative caps apply to the uploads, and if
// not, why.
func upCapDecision(cfg config.Coop, up *direction, r *round) (bool, string) {
	capping, reason := up.capsAllowed(), up.capsRefusedBecause()
	if capping && r.rate == 0 { // the fallback's reason stands (its hold restarts the estimate)
		capping, reason = false, "AP rate unknown (not configured, no goodput measured yet)"
	}
	if !cfg.Cooperative {
		capping, reason = false, "cooperative caps off by policy (rule caps only)"
	}
	if capping && len(r.hosts) == 0 {
		reason = "no active senders"
	}
	return capping, reason
}

// setCoopCaps sets the cooperative caps of this host's active flows,
// through the hysteresis filter that follows at once when the group
// changed, or clears every flow's when not capping; it returns this host's
// share.
func (c *Controller) setCoopCaps(r *round, capping bool) float64 {
	changed := c.up.groupChanged(r.hosts, capping, r.now, c.peers.expired)
	selfShare := 0.0
	if r.selfIdx >= 0 {
		selfShare = r.shares[r.selfIdx]
		targets := r.groupTargets[r.selfIdx]
		dwell := capDwell(c.cfg.Interval.D())
		for i, fs := range r.selfStates {
			if capping {
				fs.coop = fs.filt.next(targets[i], r.now, changed, dwell)
			}
		}
	}
	if !capping {
		for _, fs := range c.flows {
			fs.coop = 0
			fs.filt.set(0)
		}
	}
	return selfShare
}

// capsRaising reports whether some flow's cap, either way, waits to grow.
// Caller holds mu.
func capsRaising(flows map[uint64]*flowState) bool {
	for _, fs := range flows {
		if fs.filt.raising() || fs.dn.filt.raising() {
			return true
		}
	}
	return false
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
