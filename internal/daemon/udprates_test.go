// udprates_test.go: a UDP flow's rates, both ways, in every view: status
// (text and --json), monitor (table and --json), the dashboard's snapshot
// and its /metrics.
package daemon_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/dashboard"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// TestUDPRatesInEveryView: a UDP (QUIC) flow had no rate in any view:
// status's rates per lane were TCP's, monitor and the dashboard listed the
// flow without one, /metrics had no UDP rate. Each now shows the flow's
// rate up and down (down twice up: two answers per datagram) and each
// lane's sum.
func TestUDPRatesInEveryView(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.SkipUnlessCommand(t, "curl")
	p := testutil.NewVethPair(t)
	_, sock := startDaemon(t, p.A, devicePolicy(p.LinkA))
	local := testutil.UDPCall(t, p, 9000)
	remote := fmt.Sprintf("%s:9000", p.AddrB)

	// status --json: the lane's sums and the flow's own rates
	var js struct {
		Rates []struct {
			Lane       string  `json:"lane"`
			UDPFlows   int     `json:"udp_flows"`
			UDPUpBps   float64 `json:"udp_up_bps"`
			UDPDownBps float64 `json:"udp_down_bps"`
		} `json:"tcp_rates"`
		UDP []udpflow.Flow `json:"udp_flows"`
	}
	// a socket's rates need two listings that both hold it: a new call's
	// first status may list it once
	waitFor(t, "status to list the UDP call with its rates", func() bool {
		out, err := p.A.Command(lanesBin, "status", "--json", "--socket", sock).Output()
		if err != nil || json.Unmarshal(out, &js) != nil {
			t.Fatalf("lanes status --json: %v\n%s", err, out)
		}
		f := flowOnPort(js.UDP, local)
		return f != nil && f.UpBps > 0
	})
	for _, r := range js.Rates {
		t.Logf("status --json: %s UDP %d flows, up %.0f bit/s, down %.0f bit/s", r.Lane, r.UDPFlows, r.UDPUpBps, r.UDPDownBps)
		if r.Lane == "interactive" && !testutil.AnsweredTwice(r.UDPUpBps, r.UDPDownBps) {
			t.Errorf("status --json: interactive UDP up %.0f, down %.0f bit/s; want down about twice up, both > 0", r.UDPUpBps, r.UDPDownBps)
		}
		if r.Lane != "interactive" && (r.UDPUpBps != 0 || r.UDPDownBps != 0) {
			t.Errorf("status --json: %s UDP up %.0f, down %.0f bit/s; want 0", r.Lane, r.UDPUpBps, r.UDPDownBps)
		}
	}
	if f := flowOnPort(js.UDP, local); f == nil || !testutil.AnsweredTwice(f.UpBps, f.DownBps) {
		t.Errorf("status --json: the UDP flow from port %d: %+v; want its rates", local, f)
	}
	st, err := p.A.Command(lanesBin, "status", "--socket", sock).Output()
	if err != nil || !regexp.MustCompile(`\n  interactive +TCP +\d+  up +\S+  down +\S+   UDP +1  up +[0-9.]+[KM]bit  down +[0-9.]+[KM]bit\n`).Match(st) ||
		!regexp.MustCompile(regexp.QuoteMeta(remote)+` +[0-9.]+[KM]bit +[0-9.]+[KM]bit `).Match(st) {
		t.Errorf("lanes status: %v; want the interactive lane's UDP rates and the flow's:\n%s", err, st)
	}

	// monitor: its table and its JSON lines (it asks for UDP once a second)
	mon, err := p.A.Command(lanesBin, "monitor", "--socket", sock, "--interval", "500ms", "--count", "6").Output()
	if err != nil || !regexp.MustCompile(regexp.QuoteMeta(remote)+` +[0-9.]+[KM]bit +[0-9.]+[KM]bit `).Match(mon) {
		t.Errorf("lanes monitor: %v; want the UDP flow's rates:\n%s", err, mon)
	}
	monJSON, err := p.A.Command(lanesBin, "monitor", "--socket", sock, "--json", "--interval", "500ms", "--count", "6").Output()
	rated := false
	for _, l := range strings.Split(string(monJSON), "\n") {
		var f udpflow.Flow
		if json.Unmarshal([]byte(l), &f) == nil && f.Proto == udpflow.Proto && f.Dst == remote && testutil.AnsweredTwice(f.UpBps, f.DownBps) {
			rated = true
		}
	}
	if err != nil || !rated {
		t.Errorf("lanes monitor --json: %v; no UDP line to %s with its rates:\n%s", err, remote, monJSON)
	}

	checkDashboardUDPRates(t, p, sock, local)
}

// checkDashboardUDPRates: the dashboard's snapshot has the flow's rates
// and the interactive lane's UDP rates; /metrics has the lane's.
func checkDashboardUDPRates(t *testing.T, p *testutil.Pair, sock string, local int) {
	const listen = "127.0.0.1:18378"
	start(t, p.A, "dashboard", "--socket", sock, "--listen", listen)
	get := func(path string) []byte {
		out, _ := p.A.Command("curl", "-sSf", "--max-time", "10", "http://"+listen+path).Output()
		return out
	}
	var snap dashboard.Snapshot
	waitFor(t, "the dashboard's UDP rates", func() bool {
		snap = dashboard.Snapshot{}
		if json.Unmarshal(get("/api/snapshot"), &snap) != nil {
			return false
		}
		f := flowOnPort(snap.UDPFlows, local)
		return f != nil && f.UpBps > 0
	})
	if f := flowOnPort(snap.UDPFlows, local); !testutil.AnsweredTwice(f.UpBps, f.DownBps) {
		t.Errorf("dashboard: the UDP flow's rates up %.0f, down %.0f bit/s; want down about twice up", f.UpBps, f.DownBps)
	}
	for _, l := range snap.Lanes {
		if l.Lane == "interactive" {
			pt := l.Points[len(l.Points)-1]
			if !testutil.AnsweredTwice(pt.UDPUp, pt.UDPDown) {
				t.Errorf("dashboard: the interactive lane's UDP up %.3f, down %.3f Mbit/s; want down about twice up", pt.UDPUp, pt.UDPDown)
			}
		}
	}
	metrics := string(get("/metrics"))
	up, down := testutil.LaneMetric(metrics, "lanes_udp_send_bytes_per_second", "interactive"), testutil.LaneMetric(metrics, "lanes_udp_receive_bytes_per_second", "interactive")
	if !testutil.AnsweredTwice(up, down) {
		t.Errorf("/metrics: interactive UDP send %.0f, receive %.0f B/s; want receive about twice send:\n%s", up, down, metrics)
	}
}

// flowOnPort is the UDP flow of flows with local port port, or nil.
func flowOnPort(flows []udpflow.Flow, port int) *udpflow.Flow {
	for i := range flows {
		if strings.HasSuffix(flows[i].Src, fmt.Sprintf(":%d", port)) {
			return &flows[i]
		}
	}
	return nil
}
