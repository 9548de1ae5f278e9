// rulecaps.go: the policy's cap rules (`coop.rules`): which flows and
// lanes a rule matches, when it applies (always, or while a realtime
// uplink is active in the group), and the caps it sets beside the
// cooperative ones (a flow's cap is the smaller).
package coop

import (
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// ruleApplies says whether rule x is in force this round.
func (r *round) ruleApplies(x config.CoopRule) bool {
	return x.When != config.CoopWhenRealtimeActive || r.realtimeActive
}

// ruleCaps sets every flow's cap, the minimum of its cooperative cap and
// the rule caps that match it, and returns the caps by socket cookie and
// the flows' status.
func (c *Controller) ruleCaps(r *round) (map[uint64]uint32, []FlowStatus) {
	sockets := map[uint64]uint32{}
	var fst []FlowStatus
	for _, fs := range sortedFlows(c.flows) {
		f := fs.f
		v, rule := fs.coop, ""
		for _, x := range c.cfg.Rules {
			if !r.ruleApplies(x) || !ruleMatches(x, f) {
				continue
			}
			if v == 0 || x.Segments < v {
				v, rule = x.Segments, x.Name
			}
		}
		fs.rule = rule
		if fs.setCap(v, r.now) {
			c.cnt.CapChanges++
		}
		sockets[f.Cookie] = fs.cap
		fst = append(fst, FlowStatus{Cookie: f.Cookie, Lane: f.Lane.String(), App: f.App, Active: fs.active,
			MinRTT: float64(f.MinRTT.Microseconds()) / 1000, MSS: f.MSS, Cwnd: f.Cwnd,
			Waiting: f.NotSent + f.InFlight, Coop: fs.coop, Rule: fs.rule, Cap: fs.cap,
			CapChanges: fs.changes, CapHistory: append([]CapChange(nil), fs.history...)})
	}
	return sockets, fst
}

// laneCaps are the lanes' default caps for connections established before
// the next sample: one more flow's part of this host's share (or of a new
// bulk host's, when it does not send), and the lanes' rule caps.
func (c *Controller) laneCaps(r *round, capping bool, selfShare float64) (map[lane.Lane]uint32, map[string]uint32) {
	lanes := map[lane.Lane]uint32{}
	laneNames := map[string]uint32{}
	var newCap uint32
	if capping && r.rate > 0 {
		rtt, mss := referencePath(r.self, r.hosts)
		if rtt > 0 {
			nf := float64(len(r.self.Flows) + 1)
			share := selfShare
			if r.selfIdx < 0 { // we would join as one more bulk host
				share = 1 / float64(len(r.hosts)+1)
			}
			newCap = max(segments(r.p.window(rtt)*share/nf, mss), r.p.MinSegments)
		}
	}
	for _, l := range lane.All {
		v := newCap
		for _, x := range c.cfg.Rules {
			if x.App == "" && r.ruleApplies(x) && ruleLaneMatches(x, l) && (v == 0 || x.Segments < v) {
				v = x.Segments
			}
		}
		lanes[l] = v
		laneNames[l.String()] = v
	}
	return lanes, laneNames
}

func ruleLaneMatches(r config.CoopRule, l lane.Lane) bool {
	if r.Lane == "" {
		return true
	}
	rl, err := lane.Parse(r.Lane)
	return err == nil && rl == l
}

func ruleMatches(r config.CoopRule, f Flow) bool {
	fl := f.Lane
	if fl == lane.Unset {
		fl = lane.Interactive
	}
	return ruleLaneMatches(r, fl) && (r.App == "" || r.App == f.App)
}
