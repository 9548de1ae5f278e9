// stats.go: the lane's counters, per flow (uid, client flow id) and in
// total: this process's (ungranted clients' refusals), lanes-rtd's (asked
// over the control socket) and their sum, the Snapshot that `lanes rt
// stats` and clients' STATS requests show.
package rtlane

import (
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/rtlane/wire"
)

// Counters are per flow and in total.
type Counters struct {
	Admitted    uint64 `json:"admitted"`
	Rejected    uint64 `json:"rejected"`
	Sent        uint64 `json:"sent"`
	SentBytes   uint64 `json:"sent_bytes"`
	DroppedLate uint64 `json:"dropped_late"`
	SendErrors  uint64 `json:"send_errors"`
	// MinMarginNs is the smallest deadline - (release + T) seen: how close
	// to its deadline any sent datagram was planned to finish.
	MinMarginNs int64 `json:"min_margin_ns"`
}

// FlowStats is one flow's counters; a flow is (uid, client flow id).
type FlowStats struct {
	UID  uint32 `json:"uid"`
	Flow uint32 `json:"flow"`
	Counters
	Rejects map[string]uint64 `json:"rejects,omitempty"`
}

// Snapshot is what `lanes rt stats` shows.
type Snapshot struct {
	RateBps   uint64      `json:"rate_bps"`
	Depth     int         `json:"depth"`
	BacklogNs int64       `json:"queued_ns"`
	Totals    Counters    `json:"totals"`
	Flows     []FlowStats `json:"flows"`
	// Truncated: flows left out so that the STATS reply fits.
	Truncated bool `json:"truncated,omitempty"`
	// DataPath: where the data path runs (Lane.DataPath).
	DataPath string `json:"data_path"`
	// Error: why the counters are incomplete (lanes-rtd did not answer).
	Error string `json:"error,omitempty"`
	// Helper: lanes-rtd's own figures (its memory, allocations, full
	// sockets); absent without it.
	Helper *HelperStats `json:"helper,omitempty"`
	connStats
}

// HelperStats are lanes-rtd's own figures.
type HelperStats struct {
	// PoolBytes is the payload pool (max_queue_bytes), allocated once;
	// PoolFree what of it no queued datagram holds.
	PoolBytes uint64 `json:"pool_bytes"`
	PoolFree  uint64 `json:"pool_free"`
	// Allocs counts lanes-rtd's allocations since it started: at start,
	// per connection and per STATS reply it could not send at once, never
	// per request.
	Allocs uint64 `json:"allocs"`
	// SendFull counts datagrams a full socket refused (EAGAIN): dropped
	// with send-error, never waited for.
	SendFull uint64 `json:"send_full"`
}

type flowKey struct{ uid, flow uint32 }

// Bounds of the per-flow counters, which any local user can make grow
// (rejected requests count too): beyond maxFlowsPerUID a uid's further flows
// share its flow ^0, beyond maxFlows every new flow shares (^0, ^0).
const (
	maxFlowsPerUID = 64
	maxFlows       = 4096
)

// ownCounters is this process's counters: ungranted clients' refusals,
// per flow (bounded) and in all.
type ownCounters struct {
	mu       sync.Mutex
	flows    map[flowKey]*FlowStats
	uidFlows map[uint32]int // flows entries per uid (bounded: flow)
	totals   Counters
}

func newOwnCounters() ownCounters {
	return ownCounters{flows: map[flowKey]*FlowStats{}, uidFlows: map[uint32]int{}, totals: Counters{MinMarginNs: 1<<63 - 1}}
}

// flow returns the flow's counters; o.mu held.
func (o *ownCounters) flow(k flowKey) *FlowStats {
	if f := o.flows[k]; f != nil {
		return f
	}
	switch {
	case len(o.flows) >= maxFlows:
		k = flowKey{^uint32(0), ^uint32(0)}
	case o.uidFlows[k.uid] >= maxFlowsPerUID:
		k.flow = ^uint32(0)
	}
	f := o.flows[k]
	if f == nil {
		f = &FlowStats{UID: k.uid, Flow: k.flow, Counters: Counters{MinMarginNs: 1<<63 - 1}}
		o.flows[k] = f
		o.uidFlows[k.uid]++
	}
	return f
}

// Stats returns a copy of the counters: lanes-rtd's and this process's.
func (l *Lane) Stats() Snapshot {
	s := l.ownStats(l.clients.counters())
	if l.rtd == nil { // not started (tests of the counters alone)
		return s
	}
	h, err := l.rtd.counters()
	if err != nil {
		s.Error = err.Error()
	}
	s.merge(h)
	return s
}

// statsCacheAge is how long lanes-rtd's counters answer the STATS of
// clients other than root: a client looping STATS (11,800/s seen) then
// asks lanes-rtd at most 10 times a second, not once per request.
const statsCacheAge = 100 * time.Millisecond

// clientStats is Stats for a client's STATS request: fresh for root, for
// other clients with lanes-rtd's part at most statsCacheAge old.
func (l *Lane) clientStats(uid uint32) Snapshot {
	if uid == 0 || l.rtd == nil {
		return l.Stats()
	}
	s := l.ownStats(l.clients.counters())
	l.statsMu.Lock()
	if l.statsAt.IsZero() || time.Since(l.statsAt) > statsCacheAge {
		l.statsHelper, l.statsErr = l.rtd.counters()
		l.statsAt = time.Now()
	}
	h, err := l.statsHelper, l.statsErr
	l.statsMu.Unlock()
	if err != nil {
		s.Error = err.Error()
	}
	s.merge(h)
	return s
}

// ownStats are this process's counters (ungranted clients' refusals) and
// connection counters.
func (l *Lane) ownStats(cs connStats) Snapshot {
	o := &l.own
	o.mu.Lock()
	defer o.mu.Unlock()
	s := Snapshot{RateBps: l.Rate(), Totals: o.totals, connStats: cs, DataPath: l.DataPath()}
	for _, f := range o.flows {
		c := *f
		if f.Rejects != nil {
			c.Rejects = make(map[string]uint64, len(f.Rejects))
			for k, v := range f.Rejects {
				c.Rejects[k] = v
			}
		}
		s.Flows = append(s.Flows, c)
	}
	sortFlows(s.Flows)
	return s
}

// sortFlows orders flows by uid, then flow.
func sortFlows(fs []FlowStats) {
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].UID != fs[j].UID {
			return fs[i].UID < fs[j].UID
		}
		return fs[i].Flow < fs[j].Flow
	})
}

// countLocked counts one decision for flow key and in the totals: an
// admission, or a rejection by its reason. o.mu is held.
func (o *ownCounters) countLocked(key flowKey, admitted bool, reason uint8) {
	f := o.flow(key)
	if admitted {
		f.Admitted++
		o.totals.Admitted++
		return
	}
	f.Rejected++
	o.totals.Rejected++
	if f.Rejects == nil {
		f.Rejects = map[string]uint64{}
	}
	f.Rejects[wire.ReasonString(reason)]++
}

// counters asks lanes-rtd for its counters.
func (p *rtdProc) counters() (Snapshot, error) {
	p.askMu.Lock()
	defer p.askMu.Unlock()
	p.askID++
	id := p.askID
	if err := p.send(&rtdHdr{Type: rtdCountersAsk, Conn: id}, -1); err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{Flows: []FlowStats{}}
	timeout := time.After(2 * time.Second)
	for {
		var msg []byte
		select {
		case msg = <-p.answers:
		case err := <-p.exit:
			p.exit <- err
			return s, errors.New("realtime: lanes-rtd has exited")
		case <-timeout:
			return s, errors.New("realtime: lanes-rtd did not answer for its counters")
		}
		var m rtdCountersMsg
		off, err := binary.Decode(msg, binary.NativeEndian, &m)
		if err != nil || m.H.Conn != id {
			continue
		}
		s.RateBps, s.Depth, s.BacklogNs = m.RateBps, int(m.Depth), m.QueuedNs
		s.Totals = m.Totals.counters()
		s.AppSocks = m.AppSocks
		s.Helper = &HelperStats{PoolBytes: m.PoolBytes, PoolFree: m.PoolFree, Allocs: m.Allocs, SendFull: m.SendFull}
		for i := 0; i < int(m.NFlows); i++ {
			var f rtdFlow
			k, err := binary.Decode(msg[off:], binary.NativeEndian, &f)
			if err != nil {
				break
			}
			off += k
			s.Flows = append(s.Flows, f.stats())
		}
		if m.More == 0 {
			return s, nil
		}
	}
}

func (f *rtdFlow) counters() Counters {
	return Counters{Admitted: f.Admitted, Rejected: f.Rejected, Sent: f.Sent, SentBytes: f.SentBytes,
		DroppedLate: f.DroppedLate, SendErrors: f.SendErrors, MinMarginNs: f.MinMarginNs}
}

func (f *rtdFlow) stats() FlowStats {
	s := FlowStats{UID: f.UID, Flow: f.Flow, Counters: f.counters()}
	for r, n := range f.Rejects {
		if n > 0 {
			if s.Rejects == nil {
				s.Rejects = map[string]uint64{}
			}
			s.Rejects[wire.ReasonString(uint8(r))] = n
		}
	}
	return s
}

// merge adds lanes-rtd's counters h to s, this process's: the queue and
// the attached sockets are lanes-rtd's alone, the counters the sum of
// both, flow by flow.
func (s *Snapshot) merge(h Snapshot) {
	s.RateBps, s.Depth, s.BacklogNs, s.AppSocks, s.Helper = h.RateBps, h.Depth, h.BacklogNs, h.AppSocks, h.Helper
	s.Totals.add(h.Totals)
	at := map[flowKey]int{}
	for i, f := range s.Flows {
		at[flowKey{f.UID, f.Flow}] = i
	}
	for _, f := range h.Flows {
		i, ok := at[flowKey{f.UID, f.Flow}]
		if !ok {
			s.Flows = append(s.Flows, f)
			continue
		}
		g := &s.Flows[i]
		g.Counters.add(f.Counters)
		for k, v := range f.Rejects {
			if g.Rejects == nil {
				g.Rejects = map[string]uint64{}
			}
			g.Rejects[k] += v
		}
	}
	sortFlows(s.Flows)
}

func (c *Counters) add(o Counters) {
	c.Admitted += o.Admitted
	c.Rejected += o.Rejected
	c.Sent += o.Sent
	c.SentBytes += o.SentBytes
	c.DroppedLate += o.DroppedLate
	c.SendErrors += o.SendErrors
	c.MinMarginNs = min(c.MinMarginNs, o.MinMarginNs)
}
