// status.go: the controller's state for `lanes status` and the API
// (Status: peers, flows and their caps with their recent changes, the
// announcement counters), filled at the end of each recomputation.
package coop

import (
	"fmt"
	"time"
)

// Counters count announcements by fate.
type Counters struct {
	Sent            uint64 `json:"sent"`
	SendErrors      uint64 `json:"send_errors"`
	Received        uint64 `json:"received"`
	Accepted        uint64 `json:"accepted"`
	Own             uint64 `json:"own"`
	Malformed       uint64 `json:"malformed"`
	Oversized       uint64 `json:"oversized"`
	BadVersion      uint64 `json:"bad_version"`
	Unauthenticated uint64 `json:"unauthenticated"`
	Forged          uint64 `json:"forged"`
	Replayed        uint64 `json:"replayed"`
	Stale           uint64 `json:"stale"`
	TableFull       uint64 `json:"table_full"`
	PeerRate        uint64 `json:"peer_rate_limited"`
	AddrConflict    uint64 `json:"addr_conflict"`
	Duplicates      uint64 `json:"duplicates"`       // second copies (IPv4 and IPv6), not drops
	Late            uint64 `json:"late"`             // older than the latest, never seen (reordered across families): not applied, not drops
	NotPeer         uint64 `json:"goodbye_not_peer"` // goodbyes naming no peer, or not believed without a key
	SeqJumps        uint64 `json:"seq_jump_held"`    // keyless: more than maxSeqGap past the host's latest, held (peers.go)
	ApplyErrors     uint64 `json:"apply_errors"`
	CapChanges      uint64 `json:"cap_changes"`      // changes of any flow's applied cap
	DownCapChanges  uint64 `json:"down_cap_changes"` // changes of any flow's downlink cap
}

// Dropped is the total of announcements refused.
func (c Counters) Dropped() uint64 {
	return c.Malformed + c.Oversized + c.BadVersion + c.Unauthenticated + c.Forged + c.Replayed + c.Stale +
		c.TableFull + c.PeerRate + c.AddrConflict + c.NotPeer + c.SeqJumps
}

// PeerStatus is one peer in Status.
type PeerStatus struct {
	ID          string    `json:"id"`
	Addr        string    `json:"addr"`
	Active      bool      `json:"active"`
	Flows       int       `json:"flows"`
	Waiting     uint64    `json:"bytes_waiting"`
	GoodputBits uint64    `json:"goodput_bits"`
	LaneMix     [3]uint16 `json:"lane_mix"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	Share       float64   `json:"share"`
	// downlink: the peer's active downloads and downlink goodput
	DownFlows       int    `json:"down_flows"`
	DownGoodputBits uint64 `json:"down_goodput_bits"`
	// Counted: the peer counts in N (without a key, peers are admitted into
	// N one at a time and up to a bound).
	Counted bool `json:"counted"`
	// UpStopped, DownStopped: the peer announces that its fallback stopped
	// its upload / download caps (this host follows it).
	UpStopped   bool `json:"up_stopped,omitempty"`
	DownStopped bool `json:"down_stopped,omitempty"`
}

// FlowStatus is one local flow and its cap in Status.
type FlowStatus struct {
	Cookie  uint64  `json:"cookie"`
	Lane    string  `json:"lane"`
	App     string  `json:"app,omitempty"`
	Active  bool    `json:"active"`
	MinRTT  float64 `json:"min_rtt_ms"`
	MSS     uint32  `json:"mss"`
	Cwnd    uint32  `json:"cwnd"`
	Waiting uint64  `json:"bytes_waiting"`
	Coop    uint32  `json:"coop_cap"`
	Rule    string  `json:"rule,omitempty"`
	Cap     uint32  `json:"cap"` // applied: min(coop, rule), 0 = none
	// CapChanges counts changes of Cap since the flow was first seen;
	// CapHistory holds the latest ones (oldest first), so a reader can tell
	// which cap was in force at a given time.
	CapChanges uint64      `json:"cap_changes"`
	CapHistory []CapChange `json:"cap_history,omitempty"`
	// The downlink side: receiving now, receive rate, the window cap
	// (bytes, 0 = none) and its changes, as for the uplink cap.
	DownActive     bool        `json:"down_active"`
	RecvBits       uint64      `json:"recv_bits"`
	DownCap        uint32      `json:"down_cap_bytes"`
	DownCapChanges uint64      `json:"down_cap_changes"`
	DownCapHistory []CapChange `json:"down_cap_history,omitempty"`
}

// CapChange is one change of a flow's applied cap.
type CapChange struct {
	At  time.Time `json:"at"`
	Cap uint32    `json:"cap"`
}

// capHistoryLen is how many cap changes a flow's status keeps.
const capHistoryLen = 32

// Status is the controller's state for `lanes status` / the API.
type Status struct {
	Enabled       bool   `json:"enabled"`
	HostID        string `json:"host_id"`
	Authenticated bool   `json:"authenticated"`
	Trust         string `json:"trust"`                     // "authenticated" or "unauthenticated"
	Uncounted     int    `json:"uncounted_peers,omitempty"` // active peers not (yet) in N (keyless limit)
	Warning       string `json:"warning,omitempty"`
	// TransportMissing: a family (IPv4, IPv6) that could not be opened
	// and why; tried again each interval.
	TransportMissing string            `json:"transport_missing,omitempty"`
	N                int               `json:"n"` // active senders including this host
	SelfActive       bool              `json:"self_active"`
	Peers            []PeerStatus      `json:"peers"`
	RateBits         uint64            `json:"rate_bits"`
	RateSource       string            `json:"rate_source"`        // configured, estimated, unknown
	Estimate         *EstimateStatus   `json:"estimate,omitempty"` // the estimator's state, when not configured
	Capping          bool              `json:"capping"`
	Reason           string            `json:"reason,omitempty"` // why capping is off
	SelfShare        float64           `json:"self_share"`
	GoodputBits      uint64            `json:"goodput_bits"`
	Flows            []FlowStatus      `json:"flows"`
	Down             DownStatus        `json:"downlink"`
	LaneCaps         map[string]uint32 `json:"lane_caps"`
	Counters         Counters          `json:"counters"`
	LastError        string            `json:"last_error,omitempty"`
	Updated          time.Time         `json:"updated"`
}

// fillStatus writes the round into the uplink's status.
func (c *Controller) fillStatus(r *round, capping bool, reason string, selfShare float64, fst []FlowStatus, laneNames map[string]uint32) {
	st := &c.st
	st.N = len(r.hosts)
	st.Uncounted = r.uncounted
	st.SelfActive = r.selfIdx >= 0
	st.RateBits, st.RateSource = r.rate, r.src
	st.Estimate = nil
	if c.up.estimated() {
		st.Estimate = c.up.estimateStatus()
	}
	st.Capping, st.Reason = capping && len(r.hosts) > 0, reason
	if st.Capping {
		st.Reason = ""
	}
	st.SelfShare = selfShare
	st.GoodputBits = uint64(c.up.ownGoodputBits())
	st.Flows = fst
	st.LaneCaps = laneNames
	st.Peers = st.Peers[:0]
	for _, pp := range r.peers {
		ps := PeerStatus{ID: fmt.Sprintf("%016x", pp.ID), Addr: pp.Addr.String(), Active: pp.Active(),
			Flows: int(pp.Last.ActiveFlows), Waiting: pp.Last.BytesWaiting, GoodputBits: uint64(pp.Last.GoodputKbit) * 1000,
			LaneMix: pp.Last.LaneMix, FirstSeen: pp.FirstSeen, LastSeen: pp.LastSeen, Counted: c.peers.counts(pp.ID),
			DownFlows: int(pp.Last.DownFlows), DownGoodputBits: uint64(pp.Last.DownGoodputKbit) * 1000,
			UpStopped: pp.Last.UpStopped, DownStopped: pp.Last.DownStopped}
		if i, ok := r.peerIdx[pp.ID]; ok {
			ps.Share = r.shares[i]
		}
		st.Peers = append(st.Peers, ps)
	}
	st.Updated = r.now
}

// Status returns a snapshot of the controller's state.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.st
	s.Counters = c.cnt
	s.Peers = append([]PeerStatus(nil), c.st.Peers...)
	s.Flows = append([]FlowStatus(nil), c.st.Flows...)
	s.LaneCaps = make(map[string]uint32, len(c.st.LaneCaps))
	for k, v := range c.st.LaneCaps {
		s.LaneCaps[k] = v
	}
	return s
}
