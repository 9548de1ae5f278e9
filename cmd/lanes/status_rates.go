// status_rates.go: `lanes status`'s rates per lane now, sent and received:
// TCP from two sock_diag samples of this namespace's TCP sockets a short
// window apart, each socket's lane from the daemon; UDP (QUIC included)
// from two of the daemon's listings of its UDP flows, whose byte counts
// the classifier keeps per local port. A download counts by what it
// receives: the lane counters of status count only what a lane's queues
// send (a download's ACKs).
package main

import (
	"fmt"
	"io"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// rateWindow is the time between status's two samples.
const rateWindow = 250 * time.Millisecond

// laneRate is one lane's TCP and UDP flows and their rates, bits/s.
type laneRate struct {
	Lane       string  `json:"lane"`
	Flows      int     `json:"flows"`
	UpBps      float64 `json:"up_bps"`   // acknowledged bytes: uploads
	DownBps    float64 `json:"down_bps"` // received bytes: downloads
	UDPFlows   int     `json:"udp_flows"`
	UDPUpBps   float64 `json:"udp_up_bps"`   // bytes of its datagrams sent
	UDPDownBps float64 `json:"udp_down_bps"` // bytes of its datagrams received
}

// udpWindow is the least time between status's two UDP listings: the
// daemon lists afresh at most every 250 ms.
const udpWindow = 300 * time.Millisecond

// udpAgain asks for the UDP flows again, udpWindow after the listing udp
// taken at at, and returns the new listing with its rates from udp (udp
// itself where the second listing fails).
func udpAgain(c *client.Client, udp []udpflow.Flow, more int, at time.Time) ([]udpflow.Flow, int) {
	time.Sleep(udpWindow - time.Since(at))
	cur, curMore, err := c.UDPFlows()
	if err != nil {
		return udp, more
	}
	udpflow.FillRates(udp, cur)
	return cur, curMore
}

// addUDPRates adds each lane's UDP flows and rates to rates.
func addUDPRates(rates []laneRate, udp []udpflow.Flow) {
	by := udpflow.LaneRates(udp)
	for i := range rates {
		l, err := lane.Parse(rates[i].Lane)
		if err != nil {
			continue
		}
		r := by[l]
		rates[i].UDPFlows, rates[i].UDPUpBps, rates[i].UDPDownBps = r.Flows, r.UpBps, r.DownBps
	}
}

// sampleLaneRates measures each lane's TCP rates over rateWindow.
func sampleLaneRates(c *client.Client) ([]laneRate, error) {
	s, err := tcpmon.New(tcpmon.Config{NoProcess: true, Backend: tcpmon.BackendDiag, Interval: rateWindow})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if _, err := s.Sample(); err != nil {
		return nil, err
	}
	time.Sleep(rateWindow)
	flows, err := s.Sample()
	if err != nil {
		return nil, err
	}
	cookies := make([]uint64, 0, len(flows))
	for i := range flows {
		cookies = append(cookies, flows[i].Cookie)
	}
	lanes, err := c.SocketLanes(cookies)
	if err != nil {
		return nil, err
	}
	by := map[lane.Lane]*laneRate{}
	for _, l := range lane.All {
		by[l] = &laneRate{Lane: l.String()}
	}
	for i := range flows {
		l, ok := lanes[flows[i].Cookie]
		if !ok || by[l] == nil {
			l = lane.Interactive // the default lane
		}
		r := by[l]
		r.Flows++
		r.UpBps += flows[i].Throughput
		r.DownBps += flows[i].RecvRate
	}
	out := make([]laneRate, 0, len(lane.All))
	for _, l := range lane.All {
		out = append(out, *by[l])
	}
	return out, nil
}

// printLaneRates is status's section of the lanes' rates.
func printLaneRates(w io.Writer, rates []laneRate) {
	fmt.Fprintf(w, "\nrates now (TCP over %v, UDP over %v): per lane, flows, up (sent) and down (received)\n",
		rateWindow, udpWindow)
	for _, r := range rates {
		fmt.Fprintf(w, "  %-12s TCP %3d  up %9s  down %9s   UDP %3d  up %9s  down %9s\n", r.Lane,
			r.Flows, fmtRate(r.UpBps), fmtRate(r.DownBps), r.UDPFlows, fmtRate(r.UDPUpBps), fmtRate(r.UDPDownBps))
	}
}
