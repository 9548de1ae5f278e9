// prom.go: per-lane aggregates of a sample in the Prometheus text
// exposition format (version 0.0.4), for `lanes monitor --prometheus` and
// the daemon's metrics endpoint.
package tcpmon

import (
	"bufio"
	"fmt"
	"io"
	"sort"

	"github.com/lanes-net/lanes/internal/lane"
)

type laneAgg struct {
	flows        int
	throughput   float64
	bytesAcked   uint64
	bytesRecv    uint64
	retrans      uint64
	lost         uint64
	cwnd, srtt   float64
	rtts         int
	notOpen      int
	sendQ, recvQ uint64
}

// WritePrometheus writes per-lane aggregates of one sample of flows.
func WritePrometheus(w io.Writer, flows []Flow) error {
	agg := map[lane.Lane]*laneAgg{}
	for _, l := range append([]lane.Lane{lane.Unset}, lane.All...) {
		agg[l] = &laneAgg{}
	}
	for i := range flows {
		f := &flows[i]
		a := agg[f.Lane]
		if a == nil {
			a = &laneAgg{}
			agg[f.Lane] = a
		}
		a.flows++
		a.throughput += f.Throughput
		a.bytesAcked += f.BytesAcked
		a.bytesRecv += f.BytesRecv
		a.retrans += uint64(f.TotalRetrans)
		a.lost += uint64(f.Lost)
		a.sendQ += uint64(f.SendQ)
		a.recvQ += uint64(f.RecvQ)
		if f.SRTT > 0 {
			a.cwnd += float64(f.Cwnd)
			a.srtt += float64(f.SRTT) / 1e6
			a.rtts++
		}
		if f.CAState != "" && f.CAState != "open" {
			a.notOpen++
		}
	}
	lanes := make([]lane.Lane, 0, len(agg))
	for l := range agg {
		lanes = append(lanes, l)
	}
	sort.Slice(lanes, func(i, j int) bool { return lanes[i] < lanes[j] })
	bw := bufio.NewWriter(w)
	metric := func(name, typ, help string, val func(*laneAgg) float64) {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		for _, l := range lanes {
			fmt.Fprintf(bw, "%s{lane=%q} %g\n", name, l.String(), val(agg[l]))
		}
	}
	metric("lanes_tcp_flows", "gauge", "TCP connections sampled in the lane.", func(a *laneAgg) float64 { return float64(a.flows) })
	metric("lanes_tcp_throughput_bits_per_second", "gauge", "Sum of the flows' acknowledged-bytes rate.", func(a *laneAgg) float64 { return a.throughput })
	metric("lanes_tcp_bytes_acked", "gauge", "Sum of bytes_acked of the lane's current flows.", func(a *laneAgg) float64 { return float64(a.bytesAcked) })
	metric("lanes_tcp_bytes_received", "gauge", "Sum of bytes_received of the lane's current flows.", func(a *laneAgg) float64 { return float64(a.bytesRecv) })
	metric("lanes_tcp_retransmitted_segments", "gauge", "Sum of total_retrans of the lane's current flows.", func(a *laneAgg) float64 { return float64(a.retrans) })
	metric("lanes_tcp_lost_segments", "gauge", "Segments currently considered lost.", func(a *laneAgg) float64 { return float64(a.lost) })
	metric("lanes_tcp_cwnd_segments_mean", "gauge", "Mean congestion window of flows with an RTT sample.", func(a *laneAgg) float64 { return mean(a.cwnd, a.rtts) })
	metric("lanes_tcp_srtt_seconds_mean", "gauge", "Mean smoothed RTT.", func(a *laneAgg) float64 { return mean(a.srtt, a.rtts) })
	metric("lanes_tcp_flows_not_open", "gauge", "Flows in a congestion state other than Open (disorder, CWR, recovery, loss).", func(a *laneAgg) float64 { return float64(a.notOpen) })
	metric("lanes_tcp_send_queue_bytes", "gauge", "Sum of send queue bytes.", func(a *laneAgg) float64 { return float64(a.sendQ) })
	metric("lanes_tcp_receive_queue_bytes", "gauge", "Sum of receive queue bytes.", func(a *laneAgg) float64 { return float64(a.recvQ) })
	return bw.Flush()
}

func mean(sum float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}
