// group.go: the group as this host sees it: its own announcement and its
// sending, the peers' loads, the group's goodput per direction at the
// close of an interval, and the reference path the lanes' caps are sized
// for. The peers themselves are peergroup.go's.
package coop

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// announce sends this host's announcement now.
func (c *Controller) announce() {
	if missing, ok := c.ann.reopened(c.log); ok {
		c.mu.Lock()
		c.st.TransportMissing = missing
		c.mu.Unlock()
	}
	c.mu.Lock()
	now := c.now()
	c.ann.step(now)
	a := c.ownAnnouncement(now)
	c.mu.Unlock()
	err := c.ann.send(&a)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.cnt.SendErrors++
		c.st.LastError = fmt.Sprintf("send announcement: %v", err)
		return
	}
	c.cnt.Sent++
}

// closeInterval computes the goodput of the interval since the last tick,
// this host's and the group's, each way; the downlink's interval is
// judged here (tickDown), the uplink's after the announcement (observe).
// Caller holds mu.
func (c *Controller) closeInterval(now time.Time) {
	dt := 0.0
	if !c.lastSample.IsZero() {
		dt = now.Sub(c.lastSample).Seconds()
	}
	c.up.closeInterval(dt)
	c.tickDown(now, dt)
	c.lastSample = now
	// the group's goodput feeds the AP rate estimate
	c.up.setGroupGoodput(c.peers.goodput(&c.up, func(p *Peer) (float64, float64, uint8) {
		return peerGoodput(p, c.cfg.MaxAPRate), float64(p.Last.GoodputKbit) * 1000, p.Last.GoodputOver
	}))
}

// peerGoodput is a peer's announced goodput, bounded by what its announced
// windows could carry (cwnd x MSS / min RTT per flow, x2 for the sampling)
// and by max_ap_rate (limit).
func peerGoodput(p *Peer, limit config.Rate) float64 {
	g := float64(p.Last.GoodputKbit) * 1000
	var w float64
	for _, f := range p.Last.Flows {
		rtt := max(f.MinRTT, 100*time.Microsecond)
		w += windowBits(uint32(f.Cwnd), min(uint32(f.MSS), 9000), rtt)
	}
	return math.Min(math.Min(g, 2*w), float64(limit.Bits()))
}

// ownAnnouncement builds this interval's announcement. Caller holds mu.
func (c *Controller) ownAnnouncement(now time.Time) Announcement {
	upOwn, upJudged := c.up.ownGoodput()
	a := c.ann.header(now)
	a.GoodputKbit, a.GoodputOver = uint32(min(upOwn/1000, math.MaxUint32)), overOf(upOwn, upJudged)
	for _, fs := range sortedFlows(c.flows) {
		if !fs.active {
			continue
		}
		f := fs.f
		a.ActiveFlows++
		q := f.NotSent + f.InFlight
		a.BytesWaiting += q
		if f.Lane >= lane.Realtime && f.Lane <= lane.Background {
			a.LaneMix[f.Lane-1]++
		} else {
			a.LaneMix[lane.Interactive-1]++
		}
		a.Flows = append(a.Flows, FlowSummary{Lane: f.Lane, CAState: f.CAState,
			Cwnd: uint16(min(f.Cwnd, math.MaxUint16)), MSS: uint16(min(f.MSS, math.MaxUint16)),
			SRTT: f.SRTT, MinRTT: f.MinRTT, Queued: uint32(min(q, math.MaxUint32))})
	}
	c.ownDown(&a)
	a.UpStopped, a.DownStopped = c.up.fallbackStopped(now), c.down.fallbackStopped(now)
	return a
}

// peerLoad turns a peer's announcement into a HostLoad; queued data beyond
// the flow records is added as one more flow at the host's smallest RTT.
func peerLoad(p *Peer) HostLoad {
	h := HostLoad{ID: p.ID}
	var sum uint64
	minRTT := time.Duration(0)
	for _, f := range p.Last.Flows {
		h.Flows = append(h.Flows, FlowLoad{MSS: uint32(f.MSS), MinRTT: f.MinRTT, Queued: uint64(f.Queued)})
		sum += uint64(f.Queued)
		if f.MinRTT > 0 && (minRTT == 0 || f.MinRTT < minRTT) {
			minRTT = f.MinRTT
		}
	}
	if p.Last.BytesWaiting > sum && len(h.Flows) > 0 {
		h.Flows = append(h.Flows, FlowLoad{MSS: 1448, MinRTT: minRTT, Queued: p.Last.BytesWaiting - sum})
	}
	if len(h.Flows) == 0 { // active but no records: assume one bulk flow
		h.Flows = []FlowLoad{{MSS: 1448, Queued: math.MaxUint32}}
	}
	return h
}

// groupKey names the group's make-up: which hosts are active with how many
// flows each (ordered as hosts is) and whether capping is on.
func groupKey(hosts []HostLoad, capping bool) string {
	b := make([]byte, 0, 12*len(hosts)+1)
	for _, h := range hosts {
		b = binary.BigEndian.AppendUint64(b, h.ID)
		b = binary.BigEndian.AppendUint32(b, uint32(len(h.Flows)))
	}
	if capping {
		b = append(b, 1)
	}
	return string(b)
}

// referencePath is the min RTT and MSS a new connection is assumed to have:
// this host's smallest min RTT, else the group's.
func referencePath(self HostLoad, hosts []HostLoad) (time.Duration, uint32) {
	pick := func(fl []FlowLoad) (time.Duration, uint32) {
		var rtt time.Duration
		var mss uint32 = 1448
		for _, f := range fl {
			if f.MinRTT > 0 && (rtt == 0 || f.MinRTT < rtt) {
				rtt = f.MinRTT
				if f.MSS > 0 {
					mss = f.MSS
				}
			}
		}
		return rtt, mss
	}
	if rtt, mss := pick(self.Flows); rtt > 0 {
		return rtt, mss
	}
	var all []FlowLoad
	for _, h := range hosts {
		all = append(all, h.Flows...)
	}
	return pick(all)
}
