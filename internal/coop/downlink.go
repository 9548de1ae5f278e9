// downlink.go: cooperative caps on the downlink — each receiving host limits
// the window its downloads advertise, so the senders behind the access point
// (whatever their congestion control) keep at most the host's share of the
// AP's downlink in flight. The same arithmetic as the uplink (caps.go), with:
//
//   - N = the hosts with active downloads (data received within the last
//     interval), announced in each host's downlink section (announce.go);
//   - the rate: ap_downlink_rate, or the group's measured downlink goodput
//     (the best over 30 s, times 1.25 so the group can grow past it);
//   - demand: a receiver cannot see the sender's backlog, only what
//     arrives. A download using at least downBulkUse (90 %) of its cap is
//     window-limited (the sender would send more) and counts as bulk
//     (demand 1) until it uses less than downAppUse (50 %): a class with
//     hysteresis, because a window-limited sender dips below its window
//     after a loss (CUBIC to 70 %), and an application-limited one sits at
//     1/1.25 = 80 % of the cap its demand gives it (seen at N = 16 in the
//     lab: with one threshold at 80 % half the hosts read as
//     application-limited after the start's losses, gave their share to
//     the others, and the AP's queue grew to 1.47x the RTT).
//     An application-limited download's need is the window it used over the last interval
//     (receive rate x RTT, the RTT being the receiver's own estimate from
//     arriving data when larger than the min RTT: a window-limited flow
//     behind a queue delivers cap/RTT, not cap/min RTT), with the uplink's
//     margins. An uncapped download counts as bulk until it has a cap to be
//     compared with, and a growing one (its first interval, or a receive
//     rate at least downGrowth times the last interval's) counts as bulk
//     too: a sender in slow start is window-limited by its own cwnd, not
//     the application, and at 256 ms it needs about three RTTs to reach its
//     cap (seen in the lab: a joining download read as application-limited
//     in its first full interval got 8 segments instead of 70 for a second).
//     A download's demand is the largest of its last
//     demandHold intervals: what arrives is noisy (the receiver's RTT
//     estimate, delayed ACKs, the application's reads), and a demand read
//     low for one interval would take the share away and give it back the
//     next (caps flapping); a real drop is given away after the hold;
//   - the RTT a download's cap is sized for is the smaller of its min RTT
//     and the smallest receive-side RTT estimate seen: a receiver's min RTT
//     comes from its few own round trips (handshake, request), and one
//     taken behind a full AP queue stays inflated for the flow's life (seen
//     at N = 8 in the lab: one host's cap 1.45x the others');
//   - a flow's cap = floor(target segments) x MSS bytes, through the same
//     hysteresis filter as the uplink's caps (stable.go);
//   - applied as TCP_WINDOW_CLAMP by sock_ops (datapath SetSocketRwndCap).
//
// The safety fallback (safety.go) watches the downlink too, with its own
// state: the RTT signal over this host's downloads' receive-side RTT, and
// the drain signal of the downlink's estimate. Where the uplink compares
// the group's windows with the rate, the downlink asks whether caps held
// the downloads: a receive-window clamp holds the sender to it, so capped
// windows fit the rate by construction, and a queue that stands then is
// someone else's downloads. (Without it, downlink caps would stay on
// whatever the AP's queue held.)
package coop

import (
	"math"
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

// A download whose used window reaches downBulkUse of its cap is
// window-limited (bulk); one below downAppUse is application-limited; in
// between it keeps its class.
const (
	downBulkUse = 0.9
	downAppUse  = 0.5
)

// downGrowth is the rise of a download's receive rate from one interval to
// the next that marks it as growing (slow start), hence window-limited.
const downGrowth = 1.5

// demandHold is how many intervals a download's demand is held at its peak.
const demandHold = 4

// DownlinkSetter applies downlink caps: per-socket receive window caps
// (bytes; 0 removes) while SetDownlinkCaps is on. The daemon backs it
// with internal/datapath.
type DownlinkSetter interface {
	SetDownlinkCaps(on bool) error
	SetSocketRwndCap(cookie uint64, bytes uint32) error
}

// DownFlow is one download as the downlink cap computation sees it.
type DownFlow struct {
	MSS      uint32
	MinRTT   time.Duration
	RcvRTT   time.Duration // receive-side RTT estimate (0: none)
	RecvBits float64       // receive rate over the last interval, bits/s
	CapBytes uint32        // downlink cap in force (0: none)
	// AppLimited is the download's class so far (false: window-limited)
	AppLimited bool
	// Growing: its first interval, or its receive rate rose by downGrowth
	// or more since the last (slow start): window-limited
	Growing bool
}

// DownDemand is a download's window need in bytes (the Queued of its
// FlowLoad) and its class now: math.MaxUint32 when it is window-limited
// or growing or has no cap yet, else the window it used (receive rate x max(min RTT,
// receive-side RTT)).
func DownDemand(f DownFlow) (demand uint64, appLimited bool) {
	used := f.RecvBits * max(f.MinRTT, f.RcvRTT).Seconds() / 8
	appLimited = f.AppLimited
	switch {
	case f.CapBytes == 0 || f.Growing || used >= downBulkUse*float64(f.CapBytes):
		appLimited = false
	case used < downAppUse*float64(f.CapBytes):
		appLimited = true
	}
	if !appLimited {
		return math.MaxUint32, false
	}
	return uint64(used), true
}

// RwndBytes turns a cap target in (fractional) segments into the window
// clamp in bytes: whole segments (0: no cap).
func RwndBytes(segs uint32, mss uint32) uint32 {
	if segs == 0 {
		return 0
	}
	return uint32(min(uint64(segs)*uint64(max(mss, 536)), math.MaxUint32))
}

// downState is one local flow's downlink side.
type downState struct {
	active       bool
	lastProgress time.Time
	acc          float64            // bytes received since the last tick
	rate         float64            // bits/s over the last tick
	growing      bool               // first tick, or rate >= downGrowth x the tick before
	appLimited   bool               // class (DownDemand), updated each tick
	minRcvRTT    time.Duration      // smallest receive-side RTT estimate seen
	demands      [demandHold]uint64 // demand of the last ticks (ring)
	ndemand      int
	flowCap      // the window cap, bytes
}

// downLoad is the FlowLoad of a local download: its demand is the peak of
// the last demandHold ticks (bulk before its first tick).
func (fs *flowState) downLoad() FlowLoad {
	f := fs.f
	q := uint64(0)
	for _, d := range fs.dn.demands[:min(fs.dn.ndemand, demandHold)] {
		q = max(q, d)
	}
	if fs.dn.ndemand == 0 {
		q = math.MaxUint32
	}
	return FlowLoad{Cookie: f.Cookie, MSS: f.MSS, MinRTT: fs.downRTT(), Queued: q}
}

// downRTT is the RTT a download's cap is sized for: min(min RTT, smallest
// receive-side RTT estimate).
func (fs *flowState) downRTT() time.Duration {
	r := fs.f.MinRTT
	if m := fs.dn.minRcvRTT; m > 0 && (r <= 0 || m < r) {
		r = m
	}
	return r
}

// tickDemand classifies the download by the last tick's rate and
// returns its demand.
func (fs *flowState) tickDemand() uint64 {
	f := fs.f
	d, app := DownDemand(DownFlow{MSS: f.MSS, MinRTT: f.MinRTT, RcvRTT: f.RcvRTT, RecvBits: fs.dn.rate,
		CapBytes: fs.dn.cap, AppLimited: fs.dn.appLimited, Growing: fs.dn.growing})
	fs.dn.appLimited = app
	return d
}

// peerDownLoad turns a peer's downlink section into a HostLoad.
func peerDownLoad(p *Peer) HostLoad {
	h := HostLoad{ID: p.ID}
	for _, f := range p.Last.Down {
		h.Flows = append(h.Flows, FlowLoad{MSS: uint32(f.MSS), MinRTT: f.MinRTT, Queued: uint64(f.Demand)})
	}
	if len(h.Flows) == 0 {
		h.Flows = []FlowLoad{{MSS: 1448, Queued: math.MaxUint32}}
	}
	return h
}

// sampleDown merges the flow's received bytes since prev (known: prev is
// a sample) into its downlink state; it returns the bytes and reports
// whether the flow started receiving within the interval iv.
func (fs *flowState) sampleDown(prev Flow, known bool, now time.Time, iv time.Duration) (recv float64, started bool) {
	if r := fs.f.RcvRTT; r > 0 && (fs.dn.minRcvRTT == 0 || r < fs.dn.minRcvRTT) {
		fs.dn.minRcvRTT = r
	}
	if known && fs.f.BytesRecv > prev.BytesRecv {
		recv = float64(fs.f.BytesRecv - prev.BytesRecv)
		fs.dn.acc += recv
		fs.dn.lastProgress = now
	}
	was := fs.dn.active
	fs.dn.active = !fs.dn.lastProgress.IsZero() && now.Sub(fs.dn.lastProgress) < iv
	return recv, fs.dn.active && !was
}

// tickDown closes an interval of the downlink measurements: each flow's
// receive rate, the host's downlink goodput, and the group's, which the
// downlink's estimate and fallback judge. Caller holds mu.
func (c *Controller) tickDown(now time.Time, dt float64) {
	if dt > 0 {
		for _, fs := range c.flows {
			fs.tickDownRate(dt)
		}
	}
	c.down.closeInterval(dt)
	for _, fs := range c.flows {
		fs.dn.acc = 0
	}
	g, gj := c.peers.goodput(&c.down, func(p *Peer) (float64, float64, uint8) {
		announced := float64(p.Last.DownGoodputKbit) * 1000
		return math.Min(announced, float64(c.cfg.MaxAPRate.Bits())), announced, p.Last.DownGoodputOver
	})
	infl, base := downInflation(c.flows)
	obs := downObservation(c.flows, infl, c.st.Down.Capping)
	peer, stopped := c.peers.stoppedPeer(c.peers.table.Peers(), true)
	c.down.judge(now, groupSample{goodput: g, judged: gj, inflation: infl, minRTT: base}, obs, peer, stopped)
}

// tickDownRate closes a download's interval of dt seconds: its receive
// rate, whether it grows, and its demand (held over demandHold ticks).
func (fs *flowState) tickDownRate(dt float64) {
	prev := fs.dn.rate
	fs.dn.rate = fs.dn.acc * 8 / dt
	if fs.dn.active {
		fs.dn.growing = fs.dn.ndemand == 0 || fs.dn.rate >= downGrowth*prev
		fs.dn.demands[fs.dn.ndemand%demandHold] = fs.tickDemand()
		fs.dn.ndemand++
	} else {
		fs.dn.ndemand, fs.dn.appLimited = 0, false
	}
}

// downObservation is the downlink's safety observation (see the file
// comment) over the flows' downloads, capped: whether caps held them; the
// direction adds the drain signal (judge).
func downObservation(flows map[uint64]*flowState, infl float64, capped bool) observation {
	var qd []float64
	for _, fs := range flows {
		if fs.dn.active && fs.f.RcvRTT > 0 && fs.dn.minRcvRTT > 0 {
			qd = append(qd, float64(fs.f.RcvRTT-fs.dn.minRcvRTT))
		}
	}
	return observation{flows: len(qd), inflation: infl, queueDelay: time.Duration(median(qd)), inflightLow: capped}
}

// downInflation is the median receive-side RTT ÷ its minimum over this
// host's active downloads, and the median minimum (0, 0: none measured).
// Peers do not announce their downloads' current RTT, but every download
// through the AP waits in the same downlink queue.
func downInflation(flows map[uint64]*flowState) (float64, time.Duration) {
	var infl, base []float64
	for _, fs := range flows {
		if fs.dn.active && fs.f.RcvRTT > 0 && fs.dn.minRcvRTT > 0 {
			infl = append(infl, float64(fs.f.RcvRTT)/float64(fs.dn.minRcvRTT))
			base = append(base, float64(fs.dn.minRcvRTT))
		}
	}
	return median(infl), time.Duration(median(base))
}

// ownDown fills the announcement's downlink section. Caller holds mu.
func (c *Controller) ownDown(a *Announcement) {
	if !c.cfg.DownlinkCaps {
		return
	}
	own, judged := c.down.ownGoodput()
	a.DownGoodputKbit = uint32(min(own/1000, math.MaxUint32))
	a.DownGoodputOver = overOf(own, judged)
	for _, fs := range sortedFlows(c.flows) {
		if !fs.dn.active {
			continue
		}
		a.DownFlows++
		l := fs.downLoad()
		a.Down = append(a.Down, DownSummary{MSS: uint16(min(l.MSS, math.MaxUint16)), MinRTT: l.MinRTT,
			Demand: uint32(min(l.Queued, math.MaxUint32))})
	}
}

// DownStatus is the downlink side of Status.
type DownStatus struct {
	Enabled    bool   `json:"enabled"`
	N          int    `json:"n"` // hosts with active downloads, this one included
	SelfActive bool   `json:"self_active"`
	RateBits   uint64 `json:"rate_bits"`
	RateSource string `json:"rate_source"`
	// Estimate: the estimator's state, when the downlink rate is not configured
	Estimate  *EstimateStatus `json:"estimate,omitempty"`
	Capping   bool            `json:"capping"`
	Reason    string          `json:"reason,omitempty"`
	SelfShare float64         `json:"self_share"`
	Goodput   uint64          `json:"goodput_bits"`
	// AckClass: the rate of the class that spaces the downloads' ACKs (ackclass.go)
	AckClass *AckClassStatus `json:"ack_class,omitempty"`
}

// recomputeDown derives every local download's cap (bytes); the flows'
// status rows get their downlink fields. Caller holds mu.
func (c *Controller) recomputeDown(now time.Time, peers []Peer, fst []FlowStatus) map[uint64]uint32 {
	ds := DownStatus{Enabled: c.cfg.DownlinkCaps, Goodput: uint64(c.down.ownGoodputBits())}
	rate, src := c.down.rate(c.now())
	ds.RateBits, ds.RateSource = rate, src
	if c.down.estimated() {
		ds.Estimate = c.down.estimateStatus()
	}
	p := CapParams{RateBits: rate, HeadroomBits: uint64(c.cfg.Headroom), MinSegments: c.cfg.MinSegments,
		DemandAware: c.cfg.DemandAware, QueueAllowance: c.cfg.QueueAllowance}

	hosts, selfStates, selfIdx := c.downHosts(peers)
	capping, reason := downCapping(c.cfg, &c.down, rate, len(hosts))
	shares := p.HostShares(hosts)
	changed := c.down.groupChanged(hosts, capping, now, nil)
	if selfIdx >= 0 {
		ds.SelfShare = shares[selfIdx]
		targets := p.GroupTargets(hosts, shares)[selfIdx]
		dwell := capDwell(c.cfg.Interval.D())
		for i, fs := range selfStates {
			if capping {
				fs.dn.coop = fs.dn.filt.next(targets[i], now, changed, dwell)
			}
		}
	}
	caps, changes := downCaps(c.flows, now, capping)
	c.cnt.DownCapChanges += changes
	for i := range fst {
		if fs, ok := c.flows[fst[i].Cookie]; ok {
			d := &fs.dn
			fst[i].DownActive, fst[i].RecvBits, fst[i].DownCap = d.active, uint64(d.rate), d.cap
			fst[i].DownCapChanges, fst[i].DownCapHistory = d.changes, append([]CapChange(nil), d.history...)
		}
	}
	ds.N, ds.SelfActive = len(hosts), selfIdx >= 0
	ds.Capping, ds.Reason = capping && len(hosts) > 0, reason
	if c.cfg.DownlinkCaps {
		ds.AckClass = c.ack.status()
	}
	c.st.Down = ds
	return caps
}

// downHosts is the downlink group: this host (first, when it has active
// downloads: selfIdx 0, else -1) and every counted peer with active
// downloads; selfStates are this host's active downloads in the order of
// its load's flows. Caller holds mu.
func (c *Controller) downHosts(peers []Peer) (hosts []HostLoad, selfStates []*flowState, selfIdx int) {
	self := HostLoad{ID: c.hostID}
	for _, fs := range sortedFlows(c.flows) {
		if fs.dn.active {
			self.Flows = append(self.Flows, fs.downLoad())
			selfStates = append(selfStates, fs)
		}
	}
	selfIdx = -1
	if len(self.Flows) > 0 {
		selfIdx = 0
		hosts = append(hosts, self)
	}
	for i := range peers {
		pp := &peers[i]
		if pp.DownActive() && c.peers.counts(pp.ID) {
			hosts = append(hosts, peerDownLoad(pp))
		}
	}
	return hosts, selfStates, selfIdx
}

// downCapping says whether the downlink is capped, and why not (or why
// there is nothing to cap). Caller holds mu.
func downCapping(cfg config.Coop, down *direction, rate uint64, hosts int) (bool, string) {
	switch {
	case !cfg.DownlinkCaps:
		return false, "downlink caps off by policy"
	case !cfg.Cooperative:
		return false, "cooperative caps off by policy"
	case down.switchRefusal() != "":
		return false, "the datapath cannot apply them: " + down.switchRefusal()
	case !down.capsAllowed():
		return false, down.capsRefusedBecause()
	case rate == 0:
		return false, "AP downlink rate unknown (not configured, no downlink goodput measured yet)"
	case hosts == 0:
		return true, "no active downloads"
	}
	return true, ""
}

// downCaps sets every download's receive-window cap from its cooperative
// window (none when not capping) and returns the caps by cookie and how
// many changed.
func downCaps(flows map[uint64]*flowState, now time.Time, capping bool) (map[uint64]uint32, uint64) {
	caps := map[uint64]uint32{}
	changes := uint64(0)
	for _, fs := range flows {
		if !capping {
			fs.dn.coop = 0
			fs.dn.filt.set(0)
		}
		if fs.dn.setCap(RwndBytes(fs.dn.coop, fs.f.MSS), now) {
			changes++
		}
		caps[fs.f.Cookie] = fs.dn.cap
	}
	return caps, changes
}
