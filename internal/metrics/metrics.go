// Package metrics exposes lanes' state to Prometheus through client_golang:
// per-lane, per-interface qdisc counters (packets, bytes, drops, overlimits,
// as _total counters) and backlog; per-lane TCP flows and rates sent and received from the
// TCP monitor; per-lane UDP (QUIC included) flows and rates sent and received from the
// daemon's UDP listings; the coop controller's N, caps and dropped announcements by
// reason; the realtime lane's admitted, rejected and missed datagrams; the
// task engine's promotions and demotions; the background lane's yielding
// state. Every value is read from one snapshot (the daemon's status with its
// components' details, the latest TCP sample and UDP listing) at scrape time.
package metrics

import (
	"encoding/json"
	"io"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// Snapshot is what one scrape reports. Status may be nil (no daemon).
type Snapshot struct {
	Status *client.Status
	Flows  []tcpmon.Flow
	// UDP is the daemon's last listing of its UDP flows, their rates
	// filled from the one before (udpflow.FillRates); nil: not asked.
	UDP []udpflow.Flow
}

// Collector is a prometheus.Collector over the snapshots a function returns.
type Collector struct {
	snap func() Snapshot
}

// New returns a collector reading snap at every scrape.
func New(snap func() Snapshot) *Collector { return &Collector{snap: snap} }

// Registry returns a registry holding the collector alone (no Go runtime
// metrics: lanes' /metrics is about lanes).
func Registry(c *Collector) *prometheus.Registry {
	r := prometheus.NewPedanticRegistry()
	r.MustRegister(c)
	return r
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("lanes_"+name, help, labels, nil)
}

var (
	laneLabels  = []string{"interface", "lane"}
	dPackets    = desc("lane_packets_total", "Packets sent by the lane's qdisc class.", laneLabels...)
	dBytes      = desc("lane_bytes_total", "Bytes sent by the lane's qdisc class.", laneLabels...)
	dDrops      = desc("lane_drops_total", "Packets the lane's qdisc class dropped.", laneLabels...)
	dOverlimits = desc("lane_overlimits_total", "Times the lane's class was over its limit (throttled).", laneLabels...)
	dBacklogB   = desc("lane_backlog_bytes", "Bytes queued in the lane's class.", laneLabels...)
	dBacklogP   = desc("lane_backlog_packets", "Packets queued in the lane's class.", laneLabels...)
	dClassified = desc("classifier_packets_total", "Packets the classifier matched, by what matched.", "interface", "match")
	dUp         = desc("daemon_up", "1 if the lanes daemon answered the last status request.")

	dFlows      = desc("tcp_flows", "TCP connections sampled in the lane.", "lane")
	dThroughput = desc("tcp_throughput_bytes_per_second", "Sum of the lane's flows' acknowledged-bytes rate over the last sample (sent: uploads).", "lane")
	dReceive    = desc("tcp_receive_bytes_per_second", "Sum of the lane's flows' received-bytes rate over the last sample (downloads).", "lane")
	dSRTT       = desc("tcp_srtt_seconds_mean", "Mean smoothed RTT of the lane's flows with an RTT sample.", "lane")
	dSendQ      = desc("tcp_send_queue_bytes", "Sum of the lane's flows' send queues.", "lane")
	dCwnd       = desc("tcp_cwnd_segments_mean", "Mean congestion window of the lane's flows with an RTT sample.", "lane")
	dRetrans    = desc("tcp_retransmitted_segments", "Sum of total_retrans of the lane's current flows.", "lane")
	dNotOpen    = desc("tcp_flows_not_open", "The lane's flows in a congestion state other than Open.", "lane")

	dUDPFlows   = desc("udp_flows", "UDP sockets (QUIC included) in the lane, the daemon's own left out.", "lane")
	dUDPSend    = desc("udp_send_bytes_per_second", "Sum of the lane's UDP sockets' sent-bytes rate on the managed interfaces between the last two listings.", "lane")
	dUDPReceive = desc("udp_receive_bytes_per_second", "Sum of the lane's UDP sockets' received-bytes rate on the managed interfaces between the last two listings.", "lane")

	dCoopN       = desc("coop_active_senders", "Active senders (N) the cooperative controller counts, this host included.")
	dCoopCapping = desc("coop_capping", "1 if the cooperative controller caps congestion windows now.")
	dCoopRate    = desc("coop_rate_bytes_per_second", "Access point rate the caps are computed from.")
	dCoopLaneCap = desc("coop_lane_cap_segments", "Congestion window cap of the lane's flows, segments.", "lane")
	dCoopCapped  = desc("coop_capped_flows", "Flows with a cap in force.")
	dCoopSent    = desc("coop_announcements_sent_total", "Announcements this host sent.")
	dCoopRecv    = desc("coop_announcements_received_total", "Announcements received.")
	dCoopAccept  = desc("coop_announcements_accepted_total", "Announcements accepted.")
	dCoopDropped = desc("coop_announcements_dropped_total", "Announcements refused, by reason.", "reason")
	dCoopChanges = desc("coop_cap_changes_total", "Changes of any flow's applied cap.")
	dCoopDownN   = desc("coop_downlink_active_hosts", "Hosts with active downloads (downlink N), this host included.")
	dCoopDownCap = desc("coop_downlink_capping", "1 if the cooperative controller caps the receive windows of downloads now.")
	dCoopDownRt  = desc("coop_downlink_rate_bytes_per_second", "Access point downlink rate the downlink caps are computed from.")
	dCoopDownCpd = desc("coop_downlink_capped_flows", "Downloads with a receive window cap in force.")
	dCoopDownChg = desc("coop_downlink_cap_changes_total", "Changes of any download's receive window cap.")

	dRTAdmitted = desc("realtime_admitted_total", "Realtime datagrams admitted (deadline feasible).")
	dRTRejected = desc("realtime_rejected_total", "Realtime datagrams refused at admission.")
	dRTMissed   = desc("realtime_missed_total", "Admitted realtime datagrams dropped because their deadline passed.")
	dRTSent     = desc("realtime_sent_total", "Realtime datagrams sent.")
	dRTDepth    = desc("realtime_queue_datagrams", "Realtime datagrams queued.")

	dTaskPromo   = desc("task_promotions_total", "Task rules applied to processes (raised priority or lane).")
	dTaskDemo    = desc("task_demotions_total", "Processes the watchdog demoted.")
	dTaskTracked = desc("tasks_tracked", "Processes under a task rule.")

	dBGYielding = desc("background_yielding", "1 while the background lane yields to foreground traffic, per interface.", "interface")
	dBGYields   = desc("background_yields_total", "Times the background lane started yielding to foreground traffic.")

	dAccountCap   = desc("account_capacity_bytes_per_second", "The link's capacity estimate per direction (0: not measured).", "interface", "dir")
	dAccountShare = desc("account_share", "The lane's rate over the last status interval as a fraction of the capacity estimate (uploads).", "interface", "dir", "lane")
	dAccountWhy   = desc("account_why", "1 for why the background is where it is per direction (free, sharing, held by harm, ...).", "interface", "dir", "why")
)

var all = []*prometheus.Desc{dPackets, dBytes, dDrops, dOverlimits, dBacklogB, dBacklogP, dClassified, dUp,
	dFlows, dThroughput, dReceive, dSRTT, dSendQ, dCwnd, dRetrans, dNotOpen, dUDPFlows, dUDPSend, dUDPReceive,
	dCoopN, dCoopCapping, dCoopRate, dCoopLaneCap, dCoopCapped, dCoopSent, dCoopRecv, dCoopAccept, dCoopDropped, dCoopChanges,
	dCoopDownN, dCoopDownCap, dCoopDownRt, dCoopDownCpd, dCoopDownChg,
	dRTAdmitted, dRTRejected, dRTMissed, dRTSent, dRTDepth, dTaskPromo, dTaskDemo, dTaskTracked, dBGYielding, dBGYields,
	dAccountCap, dAccountShare, dAccountWhy}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range all {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	up := 0.0
	if s.Status != nil {
		up = 1
		collectLanes(ch, s.Status)
		collectAccount(ch, s.Status)
		collectDetails(ch, s.Status)
	}
	ch <- gauge(dUp, up)
	collectTCP(ch, s.Flows)
	if s.UDP != nil {
		collectUDP(ch, s.UDP)
	}
}

// collectUDP reports each lane's UDP flows and rates.
func collectUDP(ch chan<- prometheus.Metric, flows []udpflow.Flow) {
	by := udpflow.LaneRates(flows)
	for _, l := range lane.All {
		r := by[l]
		ch <- gauge(dUDPFlows, float64(r.Flows), l.String())
		ch <- gauge(dUDPSend, r.UpBps/8, l.String())
		ch <- gauge(dUDPReceive, r.DownBps/8, l.String())
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v uint64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func collectLanes(ch chan<- prometheus.Metric, st *client.Status) {
	for _, it := range st.Interfaces {
		for _, l := range it.Lanes {
			ln := l.Lane.String()
			ch <- counter(dPackets, l.Packets, it.Name, ln)
			ch <- counter(dBytes, l.Bytes, it.Name, ln)
			ch <- counter(dDrops, l.Drops, it.Name, ln)
			ch <- counter(dOverlimits, l.Overlimits, it.Name, ln)
			ch <- gauge(dBacklogB, float64(l.BacklogBytes), it.Name, ln)
			ch <- gauge(dBacklogP, float64(l.BacklogPackets), it.Name, ln)
		}
		kinds := make([]string, 0, len(it.Classifier))
		for k := range it.Classifier {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			ch <- counter(dClassified, it.Classifier[k], it.Name, k)
		}
	}
}

// collectAccount reports each interface and direction's account.
func collectAccount(ch chan<- prometheus.Metric, st *client.Status) {
	for _, it := range st.Interfaces {
		for _, a := range it.Account {
			ch <- gauge(dAccountCap, float64(a.CapacityBps)/8, it.Name, a.Dir)
			for _, s := range a.Shares {
				ch <- gauge(dAccountShare, s.Share, it.Name, a.Dir, s.Lane.String())
			}
			if a.Why != "" {
				ch <- gauge(dAccountWhy, 1, it.Name, a.Dir, a.Why)
			}
		}
	}
}

func collectTCP(ch chan<- prometheus.Metric, flows []tcpmon.Flow) {
	type agg struct {
		n, rtts, notOpen       int
		tput, recv, srtt, cwnd float64
		sendQ, retrans         uint64
	}
	by := map[string]*agg{}
	for _, l := range lane.All {
		by[l.String()] = &agg{}
	}
	for i := range flows {
		f := &flows[i]
		name := "unknown"
		if f.Lane != lane.Unset {
			name = f.Lane.String()
		}
		a := by[name]
		if a == nil {
			a = &agg{}
			by[name] = a
		}
		a.n++
		a.tput += f.Throughput / 8
		a.recv += f.RecvRate / 8
		a.sendQ += uint64(f.SendQ)
		a.retrans += uint64(f.TotalRetrans)
		if f.CAState != "" && f.CAState != "open" {
			a.notOpen++
		}
		if f.SRTT > 0 {
			a.srtt += float64(f.SRTT) / 1e6
			a.cwnd += float64(f.Cwnd)
			a.rtts++
		}
	}
	for name, a := range by {
		ch <- gauge(dFlows, float64(a.n), name)
		ch <- gauge(dThroughput, a.tput, name)
		ch <- gauge(dReceive, a.recv, name)
		ch <- gauge(dSendQ, float64(a.sendQ), name)
		ch <- gauge(dRetrans, float64(a.retrans), name)
		ch <- gauge(dNotOpen, float64(a.notOpen), name)
		if a.rtts > 0 {
			ch <- gauge(dSRTT, a.srtt/float64(a.rtts), name)
			ch <- gauge(dCwnd, a.cwnd/float64(a.rtts), name)
		}
	}
}

// The parts of the components' status documents the metrics read.
type coopDoc struct {
	N        int               `json:"n"`
	Capping  bool              `json:"capping"`
	RateBits uint64            `json:"rate_bits"`
	LaneCaps map[string]uint32 `json:"lane_caps"`
	Flows    []struct {
		Cap     uint32 `json:"cap"`
		DownCap uint32 `json:"down_cap_bytes"`
	} `json:"flows"`
	Down struct {
		N        int    `json:"n"`
		Capping  bool   `json:"capping"`
		RateBits uint64 `json:"rate_bits"`
	} `json:"downlink"`
	Counters map[string]uint64 `json:"counters"`
}

type realtimeDoc struct {
	Depth  int `json:"depth"`
	Totals struct {
		Admitted    uint64 `json:"admitted"`
		Rejected    uint64 `json:"rejected"`
		Sent        uint64 `json:"sent"`
		DroppedLate uint64 `json:"dropped_late"`
	} `json:"totals"`
}

type tasksDoc struct {
	Tracked    []json.RawMessage `json:"tracked"`
	Promotions uint64            `json:"promotions"`
	Demotions  uint64            `json:"watchdog_demotions"`
}

// backgroundDoc is the background lane's yielding state: the "background"
// component's document (internal/yield's Status).
type backgroundDoc struct {
	Yields     uint64 `json:"yields"`
	Interfaces map[string]struct {
		Yielding bool `json:"yielding"`
	} `json:"interfaces"`
}

// dropReasons are the coop counters that count refused announcements.
var dropReasons = []string{"malformed", "oversized", "bad_version", "unauthenticated", "forged", "replayed", "stale"}

func collectDetails(ch chan<- prometheus.Metric, st *client.Status) {
	var c coopDoc
	if decode(st.Details, "coop", &c) {
		ch <- gauge(dCoopN, float64(c.N))
		ch <- gauge(dCoopCapping, b2f(c.Capping))
		ch <- gauge(dCoopRate, float64(c.RateBits)/8)
		capped, downCapped := 0, 0
		for _, f := range c.Flows {
			if f.Cap > 0 {
				capped++
			}
			if f.DownCap > 0 {
				downCapped++
			}
		}
		ch <- gauge(dCoopCapped, float64(capped))
		ch <- gauge(dCoopDownN, float64(c.Down.N))
		ch <- gauge(dCoopDownCap, b2f(c.Down.Capping))
		ch <- gauge(dCoopDownRt, float64(c.Down.RateBits)/8)
		ch <- gauge(dCoopDownCpd, float64(downCapped))
		ch <- counter(dCoopDownChg, c.Counters["down_cap_changes"])
		for l, v := range c.LaneCaps {
			ch <- gauge(dCoopLaneCap, float64(v), l)
		}
		ch <- counter(dCoopSent, c.Counters["sent"])
		ch <- counter(dCoopRecv, c.Counters["received"])
		ch <- counter(dCoopAccept, c.Counters["accepted"])
		ch <- counter(dCoopChanges, c.Counters["cap_changes"])
		for _, r := range dropReasons {
			ch <- counter(dCoopDropped, c.Counters[r], r)
		}
	}
	var r realtimeDoc
	if decode(st.Details, "realtime", &r) {
		ch <- counter(dRTAdmitted, r.Totals.Admitted)
		ch <- counter(dRTRejected, r.Totals.Rejected)
		ch <- counter(dRTMissed, r.Totals.DroppedLate)
		ch <- counter(dRTSent, r.Totals.Sent)
		ch <- gauge(dRTDepth, float64(r.Depth))
	}
	var t tasksDoc
	if decode(st.Details, "tasks", &t) {
		ch <- counter(dTaskPromo, t.Promotions)
		ch <- counter(dTaskDemo, t.Demotions)
		ch <- gauge(dTaskTracked, float64(len(t.Tracked)))
	}
	var b backgroundDoc
	if decode(st.Details, "background", &b) {
		for name, i := range b.Interfaces {
			ch <- gauge(dBGYielding, b2f(i.Yielding), name)
		}
		ch <- counter(dBGYields, b.Yields)
	}
}

// Write writes one snapshot in the Prometheus text format (lanes monitor
// --prometheus).
func Write(w io.Writer, s Snapshot) error {
	mfs, err := Registry(New(func() Snapshot { return s })).Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

func decode(details map[string]json.RawMessage, name string, v any) bool {
	raw, ok := details[name]
	return ok && len(raw) > 0 && json.Unmarshal(raw, v) == nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
