// caps.go: the cap computation — the paper's ideal congestion window per
// connection, and demand-aware shares of the access point among hosts and,
// within a host, among its flows.
//
// The paper (docs/papers.md §001) caps every connection at
//
//	ideal cwnd = floor((rate x RTT - headroom) / (MSS x N))
//
// with one RTT for everyone and N the number of active senders. Here:
//   - RTT is each connection's own minimum RTT (open problem 1), so every
//     connection gets its share of the medium as a window for its own path;
//   - shares are demand-aware (open problem 2): each host's demand is the data
//     it has waiting (unsent + in flight) as a fraction of its shared window;
//     shares are max-min fair (water-filling): a host that needs less than an
//     equal share gets what it needs, the rest split the remainder equally.
//     The same is done among one host's flows with the host's share;
//   - with every host backlogged and one flow each, shares are 1/N and the
//     cap is exactly the paper's formula.
//
// Note: demand is inflated by demandMargin and demandSlack segments so that
// an application-limited flow sitting at its cap still has room to grow; a
// growing flow shows more unsent data next interval and gets a larger share.
package coop

import (
	"math"
	"sort"
	"time"
)

// Demand margins: a flow's window need is (queued x demandMargin +
// demandSlack x MSS) bytes.
const (
	demandMargin = 1.25
	demandSlack  = 2
)

// SharedWindow is rate x rtt - headroom in bytes (>= 0): the window of one
// connection with round-trip time rtt if it had the access point alone.
func SharedWindow(rateBits uint64, rtt time.Duration, headroomBits uint64) float64 {
	w := (float64(rateBits)*rtt.Seconds() - float64(headroomBits)) / 8
	if w < 0 || math.IsNaN(w) {
		return 0
	}
	return w
}

// IdealCwnd is the paper's formula: floor((rate x rtt - headroom) / (mss x n))
// segments, 0 when nothing is left after the headroom.
func IdealCwnd(rateBits uint64, rtt time.Duration, headroomBits uint64, mss uint32, n int) uint32 {
	if mss == 0 || n <= 0 {
		return 0
	}
	return segments(SharedWindow(rateBits, rtt, headroomBits)/float64(n), mss)
}

// segments turns a window in bytes into whole segments, rounding down
// (with a tolerance for float error at exact integers).
func segments(window float64, mss uint32) uint32 {
	s := math.Floor(window/float64(mss) + 1e-9)
	if s < 0 {
		return 0
	}
	if s > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(s)
}

// WaterFill shares capacity among claimants with the given demands (same
// unit as capacity), max-min fair: claimants demanding less than an equal
// share get their demand, the others split the rest equally. Whatever is
// left when every demand is met is spread equally over all, so the shares
// always add up to capacity (for at least one claimant).
func WaterFill(demands []float64, capacity float64) []float64 {
	n := len(demands)
	shares := make([]float64, n)
	if n == 0 || capacity <= 0 {
		return shares
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return demands[idx[a]] < demands[idx[b]] })
	left := capacity
	for k, i := range idx {
		d := demands[i]
		if d < 0 || math.IsNaN(d) {
			d = 0
		}
		fair := left / float64(n-k)
		if d >= fair {
			for _, j := range idx[k:] {
				shares[j] = fair
			}
			return shares
		}
		shares[i] = d
		left -= d
	}
	for i := range shares { // everyone satisfied: spread the leftover
		shares[i] += left / float64(n)
	}
	return shares
}

// FlowLoad is one local uplink flow as the cap computation sees it.
type FlowLoad struct {
	Cookie uint64
	MSS    uint32
	MinRTT time.Duration
	Queued uint64 // bytes waiting: unsent + in flight
}

// HostLoad is one host's flows (own flows or a peer's announced summaries).
type HostLoad struct {
	ID    uint64
	Flows []FlowLoad
}

// CapParams are the inputs shared by all hosts.
type CapParams struct {
	RateBits     uint64
	HeadroomBits uint64
	MinSegments  uint32
	DemandAware  bool
	// QueueAllowance lets the group's windows exceed the path's BDP by this
	// fraction (0: the paper's formula): a small standing queue at the AP
	// that keeps the medium busy when the path's RTT without a queue is
	// above its minimum (jitter, the hosts' own processing).
	QueueAllowance float64
}

// window is a flow's shared window with the queue allowance:
// (rate x rtt) x (1 + allowance) - headroom, bytes.
func (p CapParams) window(rtt time.Duration) float64 {
	w := SharedWindow(p.RateBits, rtt, p.HeadroomBits)
	if w <= 0 {
		return 0
	}
	return w + float64(p.RateBits)*rtt.Seconds()/8*p.QueueAllowance
}

// demandFraction is a flow's need as a fraction of its shared window
// (>= 1: it would fill the access point alone).
func (p CapParams) demandFraction(f FlowLoad) float64 {
	if !p.DemandAware {
		return 1
	}
	w := p.window(f.MinRTT)
	need := float64(f.Queued)*demandMargin + demandSlack*float64(max(f.MSS, 536))
	if w <= 0 {
		return 1
	}
	return math.Min(1, need/w)
}

// hostFraction is a host's need as a fraction of the medium (at most 1).
func (p CapParams) hostFraction(h HostLoad) float64 {
	if !p.DemandAware {
		return 1
	}
	s := 0.0
	for _, f := range h.Flows {
		s += p.demandFraction(f)
	}
	return math.Min(1, s)
}

// HostShares returns each active host's share of the medium (adding up to 1).
func (p CapParams) HostShares(hosts []HostLoad) []float64 {
	d := make([]float64, len(hosts))
	for i, h := range hosts {
		d[i] = p.hostFraction(h)
	}
	return WaterFill(d, 1)
}

// FlowCaps splits a host's share among its flows and turns each flow's share
// into a cap in segments: floor(share x (rate x minRTT - headroom) / MSS),
// at least MinSegments. Flows without an RTT sample yet get no cap (0).
func (p CapParams) FlowCaps(h HostLoad, share float64) []uint32 {
	t := p.FlowTargets(h, share)
	caps := make([]uint32, len(t))
	for i, v := range t {
		caps[i] = segments(v, 1)
	}
	return caps
}

// FlowTargets is FlowCaps before rounding down: each flow's cap in
// (fractional) segments, at least MinSegments, 0 without an RTT sample.
func (p CapParams) FlowTargets(h HostLoad, share float64) []float64 {
	d := make([]float64, len(h.Flows))
	for i, f := range h.Flows {
		d[i] = math.Min(p.demandFraction(f), share)
	}
	fs := WaterFill(d, share)
	t := make([]float64, len(h.Flows))
	for i, f := range h.Flows {
		if f.MinRTT <= 0 || f.MSS == 0 {
			continue
		}
		t[i] = math.Max(p.window(f.MinRTT)*fs[i]/float64(f.MSS), float64(p.MinSegments))
	}
	return t
}

// GroupTargets is FlowTargets for every host of the group (shares from
// HostShares). Each cap is its target rounded down, as the paper's: the
// group's remainder handed out a segment each bought up to 0.9 % of
// goodput for a queue past the RTT goal (16 downloads at 1.12x against
// 1.09x) and split the caps unevenly through their hysteresis.
func (p CapParams) GroupTargets(hosts []HostLoad, shares []float64) [][]float64 {
	t := make([][]float64, len(hosts))
	for i, h := range hosts {
		t[i] = p.FlowTargets(h, shares[i])
	}
	return t
}

// CapRow is one line of the cap table (`lanes coop table`).
type CapRow struct {
	N       int     `json:"n"`
	Cap     uint32  `json:"cap_segments"`
	Window  float64 `json:"window_bytes"`  // cap x MSS
	PerHost float64 `json:"per_host_mbit"` // cap x MSS x 8 / RTT
}

// CapTable computes the paper's cap table for N in [from, to].
func CapTable(rateBits uint64, rtt time.Duration, headroomBits uint64, mss uint32, from, to int) []CapRow {
	var rows []CapRow
	for n := from; n <= to; n++ {
		c := IdealCwnd(rateBits, rtt, headroomBits, mss, n)
		w := float64(c) * float64(mss)
		rows = append(rows, CapRow{N: n, Cap: c, Window: w, PerHost: w * 8 / rtt.Seconds() / 1e6})
	}
	return rows
}
