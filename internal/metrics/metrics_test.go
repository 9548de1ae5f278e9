// metrics_test.go: every metric family appears with the right type and
// value, the documents are read with the real components' field names, and
// the output passes Prometheus' own linter (promlint, and promtool when
// installed).
package metrics

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/sched"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/udpflow"
	"github.com/lanes-net/lanes/internal/yield"
)

func mustJSON(t *testing.T, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sample(t *testing.T) Snapshot {
	cs := coop.Status{N: 3, Capping: true, RateBits: 20e6, LaneCaps: map[string]uint32{"background": 12},
		Flows:    []coop.FlowStatus{{Cap: 12}, {Cap: 0, DownCap: 28960}},
		Down:     coop.DownStatus{N: 2, Capping: true, RateBits: 40e6},
		Counters: coop.Counters{Sent: 5, Received: 9, Accepted: 7, Forged: 1, Replayed: 1, CapChanges: 4, DownCapChanges: 3}}
	rt := rtlane.Snapshot{Depth: 2, Totals: rtlane.Counters{Admitted: 10, Rejected: 3, Sent: 9, DroppedLate: 1}}
	ts := sched.Status{Tracked: []sched.Task{{PID: 1}}, Promotions: 6, Demotions: 2}
	st := &client.Status{
		Interfaces: []client.InterfaceStatus{{Name: "eth0", Lanes: []client.LaneStats{
			{Lane: lane.Interactive, Packets: 100, Bytes: 150000, Drops: 1, BacklogBytes: 3000, BacklogPackets: 2},
			{Lane: lane.Background, Packets: 50, Bytes: 75000}},
			Classifier: map[string]uint64{"cgroup": 5, "socket": 7},
			Account: []api.LinkAccount{{Dir: "up", CapacityBps: 10e6, Why: "free",
				Shares: []api.LaneShare{{Lane: lane.Interactive}, {Lane: lane.Background, Bps: 9e6, Share: 0.9}}},
				{Dir: "down", Why: "not ours"}}}},
		Details: map[string]json.RawMessage{"coop": mustJSON(t, cs), "realtime": mustJSON(t, rt), "tasks": mustJSON(t, ts),
			"background": mustJSON(t, yield.Status{Yielding: true, Yields: 4, Interfaces: map[string]yield.IfaceStatus{"eth0": {Yielding: true}}})},
	}
	flows := []tcpmon.Flow{{Lane: lane.Background, Throughput: 8e6, SRTT: 20000, Cwnd: 10, CAState: "open"},
		{Lane: lane.Unset, Throughput: 800, CAState: "recovery"}}
	return Snapshot{Status: st, Flows: flows}
}

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sample(t)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"# TYPE lanes_lane_packets_total counter",
		`lanes_lane_packets_total{interface="eth0",lane="interactive"} 100`,
		`lanes_lane_bytes_total{interface="eth0",lane="background"} 75000`,
		`lanes_lane_drops_total{interface="eth0",lane="interactive"} 1`,
		`lanes_lane_backlog_bytes{interface="eth0",lane="interactive"} 3000`,
		`lanes_classifier_packets_total{interface="eth0",match="socket"} 7`,
		`lanes_tcp_throughput_bytes_per_second{lane="background"} 1e+06`,
		`lanes_tcp_flows{lane="unknown"} 1`,
		`lanes_tcp_flows_not_open{lane="unknown"} 1`,
		"lanes_coop_active_senders 3",
		"lanes_coop_capped_flows 1",
		"lanes_coop_downlink_active_hosts 2",
		"lanes_coop_downlink_capping 1",
		"lanes_coop_downlink_rate_bytes_per_second 5e+06",
		"lanes_coop_downlink_capped_flows 1",
		"lanes_coop_downlink_cap_changes_total 3",
		`lanes_coop_lane_cap_segments{lane="background"} 12`,
		`lanes_coop_announcements_dropped_total{reason="forged"} 1`,
		`lanes_coop_announcements_dropped_total{reason="stale"} 0`,
		"lanes_realtime_admitted_total 10",
		"lanes_realtime_rejected_total 3",
		"lanes_realtime_missed_total 1",
		"lanes_task_promotions_total 6",
		"lanes_task_demotions_total 2",
		`lanes_background_yielding{interface="eth0"} 1`,
		"lanes_background_yields_total 4",
		"lanes_daemon_up 1",
		`lanes_account_capacity_bytes_per_second{dir="up",interface="eth0"} 1.25e+06`,
		`lanes_account_share{dir="up",interface="eth0",lane="background"} 0.9`,
		`lanes_account_share{dir="up",interface="eth0",lane="interactive"} 0`,
		`lanes_account_why{dir="down",interface="eth0",why="not ours"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
	testutil.PromCheck(t, b.Bytes())
}

func TestNoDaemon(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, Snapshot{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "lanes_daemon_up 0\n") || strings.Contains(b.String(), "lanes_lane_") {
		t.Errorf("without a daemon:\n%s", b.String())
	}
	testutil.PromCheck(t, b.Bytes())
}

// TestPromtoolInstalled: make test installs Debian's prometheus package
// (scripts/deps.sh) for promtool; say so plainly where it is missing.
func TestPromtoolInstalled(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		if _, err := os.Stat(testutil.PromtoolFallback); err != nil {
			t.Skip("promtool not installed (scripts/deps.sh test takes it from Debian's prometheus package): only promlint checked")
		}
	}
}

// TestDownloadRatePerLane: a download (bytes received, none sent) counted 0
// in every per-lane metric; its received rate now has one of its own.
func TestDownloadRatePerLane(t *testing.T) {
	flows := []tcpmon.Flow{{Lane: lane.Interactive, RecvRate: 18.6e6, CAState: "open"}}
	var b bytes.Buffer
	if err := Write(&b, Snapshot{Flows: flows}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE lanes_tcp_receive_bytes_per_second gauge",
		`lanes_tcp_receive_bytes_per_second{lane="interactive"} 2.325e+06`,
		`lanes_tcp_throughput_bytes_per_second{lane="interactive"} 0`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	testutil.PromCheck(t, b.Bytes())
}

// TestUDPRatePerLane: a UDP (QUIC) flow's rates had no metric; each lane's
// UDP send and receive rates now have one, the daemon's own sockets left out.
func TestUDPRatePerLane(t *testing.T) {
	udp := []udpflow.Flow{
		{Cookie: 1, Lane: lane.Background, UpBps: 8e5, DownBps: 16e6},
		{Cookie: 2, Lane: lane.Interactive, UpBps: 1e9, Daemon: true},
	}
	var b bytes.Buffer
	if err := Write(&b, Snapshot{UDP: udp}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`lanes_udp_flows{lane="background"} 1`,
		`lanes_udp_send_bytes_per_second{lane="background"} 100000`,
		`lanes_udp_receive_bytes_per_second{lane="background"} 2e+06`,
		`lanes_udp_send_bytes_per_second{lane="interactive"} 0`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	testutil.PromCheck(t, b.Bytes())
}
