// lanerate.go: each lane's rates for the page's lane chart. Up: where the
// daemon reports its interfaces, what each lane's queues sent (its lane
// counters, summed over the interfaces: TCP, UDP, QUIC and the realtime
// lane's datagrams alike); without a daemon's status, the sum of the
// lane's TCP flows' send rates, which leaves UDP and QUIC out. Down: the
// sum of the lane's TCP flows' received rates (the egress queues see only
// a download's ACKs). UDP apart, both ways: the lane's UDP sockets' rates
// from the daemon's listings (udpflow.LaneRates).
package dashboard

import (
	"slices"
	"strings"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// Lane chart sources (Snapshot.LaneSource).
const (
	laneSourceQueues = "queues" // the lanes' queue counters
	laneSourceFlows  = "flows"  // the sum of the lanes' TCP flows
)

// laneCounters is the bytes each lane sent, summed over the interfaces of
// one status, by lane name.
type laneCounters struct {
	at     time.Time
	bytes  map[string]uint64
	ifaces string // the interfaces summed: another set is not compared
}

// countersOf reads the lane counters of st; nil without interfaces.
func countersOf(st *client.Status, at time.Time) *laneCounters {
	if st == nil || len(st.Interfaces) == 0 {
		return nil
	}
	c := &laneCounters{at: at, bytes: map[string]uint64{}}
	var names []string
	for _, it := range st.Interfaces {
		names = append(names, it.Name)
		for _, l := range it.Lanes {
			c.bytes[l.Lane.String()] += l.Bytes
		}
	}
	slices.Sort(names)
	c.ifaces = strings.Join(names, " ")
	return c
}

// laneRates is each lane's Mbit/s from prev to cur; false where they
// cannot be compared (no earlier status, another set of interfaces, a
// counter that went back: a restarted daemon).
func laneRates(prev, cur *laneCounters) (map[string]float64, bool) {
	if prev == nil || cur == nil || prev.ifaces != cur.ifaces {
		return nil, false
	}
	dt := cur.at.Sub(prev.at).Seconds()
	if dt <= 0 {
		return nil, false
	}
	r := map[string]float64{}
	for name, b := range cur.bytes {
		p, ok := prev.bytes[name]
		if !ok || b < p {
			return nil, false
		}
		r[name] = float64(b-p) * 8 / dt / 1e6
	}
	return r, true
}

// flowSums is each lane's summed TCP rate in Mbit/s: rate(f) of its flows.
func flowSums(flows []tcpmon.Flow, rate func(*tcpmon.Flow) float64) map[string]float64 {
	sum := map[string]float64{}
	for i := range flows {
		l := flows[i].Lane
		if l == lane.Unset {
			l = lane.Interactive // sockets lanes has not classified are in the default lane
		}
		sum[l.String()] += rate(&flows[i]) / 1e6
	}
	return sum
}

func sentRate(f *tcpmon.Flow) float64     { return f.Throughput }
func receivedRate(f *tcpmon.Flow) float64 { return f.RecvRate }

// addLanePoints appends each lane's rates at t to its series: up from the
// lane counters of st (read at now) where the last status can be
// compared, else from the flows; down from the flows. s.mu is held.
func (s *Server) addLanePoints(t float64, flows []tcpmon.Flow, udp []udpflow.Flow, st *client.Status, now time.Time) {
	cur := countersOf(st, now)
	rates, ok := laneRates(s.laneCount, cur)
	s.laneCount = cur
	s.laneSource = laneSourceQueues
	if !ok {
		rates = flowSums(flows, sentRate)
		if cur == nil {
			s.laneSource = laneSourceFlows
		}
	}
	down := flowSums(flows, receivedRate)
	udpRates := udpflow.LaneRates(udp)
	for _, l := range lane.All {
		name := l.String()
		u := udpRates[l]
		pts := append(s.lanePts[name], LanePoint{T: round3(t), Mbit: round3(rates[name]), Down: round3(down[name]),
			UDPUp: round3(u.UpBps / 1e6), UDPDown: round3(u.DownBps / 1e6)})
		cut := 0
		for cut < len(pts) && t-pts[cut].T > s.cfg.History.Seconds() {
			cut++
		}
		s.lanePts[name] = pts[cut:]
	}
}
