// status_rates.go: `lanes status`'s TCP rates per lane now, sent and
// received: two sock_diag samples of this namespace's TCP sockets a short
// window apart, each socket's lane from the daemon. A download counts by
// what it receives: the lane counters of status count only what a lane's
// queues send (a download's ACKs).
package main

import (
	"fmt"
	"io"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// rateWindow is the time between status's two samples.
const rateWindow = 250 * time.Millisecond

// laneRate is one lane's TCP flows and their rates, bits/s.
type laneRate struct {
	Lane    string  `json:"lane"`
	Flows   int     `json:"flows"`
	UpBps   float64 `json:"up_bps"`   // acknowledged bytes: uploads
	DownBps float64 `json:"down_bps"` // received bytes: downloads
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

// printLaneRates is status's section of the lanes' TCP rates.
func printLaneRates(w io.Writer, rates []laneRate) {
	fmt.Fprintf(w, "\nTCP now (over %v): rate per lane, up (sent) and down (received)\n", rateWindow)
	for _, r := range rates {
		fmt.Fprintf(w, "  %-12s %4d flows  up %10s  down %10s\n", r.Lane, r.Flows, fmtRate(r.UpBps), fmtRate(r.DownBps))
	}
}
