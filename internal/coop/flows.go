// flows.go: this host's flows as the controller keeps them (flowState: the
// sampled Flow, whether it is active, its cap per direction with the
// changes), sampled from the FlowSource at each interval and five times
// within it, so that a flow that starts sending is announced at once.
package coop

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// flowState is one local flow: its upload side here (the cwnd cap, in
// segments), its download side in dn (the window cap, in bytes).
type flowState struct {
	f            Flow
	active       bool
	lastProgress time.Time
	flowCap
	rule string    // rule that set the cap, if any
	dn   downState // the downlink side (downlink.go)
}

// flowCap is one direction's cap of a flow: the cooperative cap (kept
// while the flow is idle), its hysteresis, and the cap applied with its
// changes.
type flowCap struct {
	coop    uint32 // cooperative cap, segments
	filt    capFilter
	cap     uint32      // applied: segments up, bytes down
	changes uint64      // changes of cap
	history []CapChange // latest changes of cap
}

// setCap records the flow's applied cap, counting and remembering changes.
func (fc *flowCap) setCap(v uint32, now time.Time) bool {
	if v == fc.cap {
		return false
	}
	fc.cap = v
	fc.changes++
	fc.history = append(fc.history, CapChange{At: now, Cap: v})
	if len(fc.history) > capHistoryLen {
		fc.history = fc.history[len(fc.history)-capHistoryLen:]
	}
	return true
}

// sampleFlows takes a flow sample between ticks; it reports whether a
// local flow started sending.
func (c *Controller) sampleFlows(ctx context.Context) bool {
	flows, err := c.flowsrc.UplinkFlows(ctx)
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.st.LastError = fmt.Sprintf("flow source: %v", err)
		return false
	}
	return c.merge(flows, now)
}

// sampleInterval takes a tick's sample, the flows and the interface's
// counters (a flow source that fails reads as no flows), and closes the
// interval's measurements.
func (c *Controller) sampleInterval(ctx context.Context) {
	flows, err := c.flowsrc.UplinkFlows(ctx)
	var rx, tx uint64
	var ierr error
	if c.iface != nil {
		rx, tx, ierr = c.iface.InterfaceBytes()
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.iface != nil {
		c.down.countInterfaceBytes(rx, ierr)
		c.up.countInterfaceBytes(tx, ierr)
	}
	if err != nil {
		c.st.LastError = fmt.Sprintf("flow source: %v", err)
		flows = nil
	}
	c.merge(flows, now)
	c.closeInterval(now)
}

// merge takes a new flow sample. A flow is active while it has data
// waiting or made progress within the last interval. It reports whether a
// flow became active. Caller holds mu.
func (c *Controller) merge(flows []Flow, now time.Time) bool {
	iv := c.cfg.Interval.D()
	joined := false
	seen := make(map[uint64]bool, len(flows))
	for _, f := range flows {
		seen[f.Cookie] = true
		fs, ok := c.flows[f.Cookie]
		var prev Flow
		if ok {
			prev = fs.f
		}
		if ok && f.BytesAcked > fs.f.BytesAcked {
			c.up.addDelivered(float64(f.BytesAcked - fs.f.BytesAcked))
			fs.lastProgress = now
		}
		if !ok {
			fs = &flowState{}
			c.flows[f.Cookie] = fs
		}
		fs.f = f
		was := fs.active
		fs.active = f.NotSent+f.InFlight > 0 || (!fs.lastProgress.IsZero() && now.Sub(fs.lastProgress) < iv)
		if fs.active && !was {
			joined = true
		}
		recv, started := fs.sampleDown(prev, ok, now, iv)
		c.down.addDelivered(recv)
		if ackLane(f.Lane) {
			c.ack.recv += uint64(recv)
		}
		if started {
			joined = true
		}
	}
	for ck := range c.flows {
		if !seen[ck] {
			delete(c.flows, ck)
			c.up.forgetFlow(ck)
			c.down.forgetFlow(ck)
		}
	}
	return joined
}

// sortedFlows are the flows by socket cookie.
func sortedFlows(flows map[uint64]*flowState) []*flowState {
	out := make([]*flowState, 0, len(flows))
	for _, fs := range flows {
		out = append(out, fs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].f.Cookie < out[j].f.Cookie })
	return out
}
