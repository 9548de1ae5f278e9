// Tests of the dashboard on a real loopback TCP connection sampled by the TCP
// monitor; the daemon is a table (its real API is tested in internal/apiserver and
// internal/daemon): the flow appears with its lane, cwnd and cap series, and
// the page, its script, the snapshot and /metrics are served.
package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

type fakeDaemon struct {
	coop  string
	off   string // the policy leaves coop off: why
	held  bool   // the background component says the yield holds background
	queue uint64 // the background lane's backlog in bytes (status)
	sent  uint64 // the background lane's bytes sent (status)
	asked []uint64
	runs  string // the kernel's name of the congestion control the flows run
	appCC string // what every socket's app asked for ("" = none)
}

func (d *fakeDaemon) Status() (*client.Status, error) {
	return &client.Status{Version: "test", Policy: "table", Interfaces: []client.InterfaceStatus{{Name: "veth0", Mode: "shaped",
		Lanes: []client.LaneStats{{Lane: lane.Interactive, BacklogBytes: 9000}, {Lane: lane.Background, BacklogBytes: d.queue, Bytes: d.sent}}}}}, nil
}

func (d *fakeDaemon) Component(name string) (json.RawMessage, error) {
	if name == "background" {
		return json.RawMessage(fmt.Sprintf(`{"yielding":%v}`, d.held)), nil
	}
	if name == "coop" && d.off != "" {
		return nil, &client.OffError{Name: name, Why: d.off}
	}
	if name != "coop" || d.coop == "" {
		return nil, errors.New("component not running")
	}
	return json.RawMessage(d.coop), nil
}

// SocketInfo puts every socket in background, says its app asked for
// appCC, and names the kernel congestion control runs "ledbat".
func (d *fakeDaemon) SocketInfo(c []uint64) (client.SocketInfo, error) {
	d.asked = append(d.asked, c...)
	si := client.SocketInfo{Lanes: map[uint64]lane.Lane{}, AppCC: map[uint64]string{}, CCNames: map[string]string{d.runs: "ledbat"}}
	for _, k := range c {
		si.Lanes[k] = lane.Background
		if d.appCC != "" {
			si.AppCC[k] = d.appCC
		}
	}
	return si, nil
}

// UDPFlows: this table's daemon has none.
func (d *fakeDaemon) UDPFlows() ([]client.UDPFlow, int, error) { return nil, 0, nil }

// loopbackFlow returns a connected loopback TCP pair that keeps sending until
// the test ends, and the server's port.
func loopbackFlow(t *testing.T) uint16 {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); c.Close() })
	go func() {
		buf := make([]byte, 32<<10)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func TestDashboardShowsFlowLaneAndCap(t *testing.T) {
	port := loopbackFlow(t)
	smp, err := tcpmon.New(tcpmon.Config{Interval: 50 * time.Millisecond, NoProcess: true,
		Filter: tcpmon.Filter{RemotePort: port}})
	if err != nil {
		t.Skipf("sock_diag not available: %v", err)
	}
	defer smp.Close()
	first, err := smp.Sample()
	if err != nil || len(first) != 1 {
		t.Fatalf("sample: %d flows, %v", len(first), err)
	}
	cookie := first[0].Cookie
	d := &fakeDaemon{coop: fmt.Sprintf(`{"n":2,"capping":true,"flows":[{"cookie":%d,"cap":17,"down_cap_bytes":28960}]}`, cookie),
		runs: first[0].Cong, appCC: "bbr"}
	s := New(Config{Sampler: smp, Daemon: d})
	for i := 0; i < 4; i++ {
		s.tick()
		time.Sleep(50 * time.Millisecond)
	}
	snap := s.Snapshot()
	if len(snap.Flows) != 1 {
		t.Fatalf("snapshot flows: %+v", snap.Flows)
	}
	f := snap.Flows[0]
	if f.Cookie != cookie || f.Lane != "background" || len(f.Points) != 4 {
		t.Fatalf("flow %+v", f)
	}
	if f.Cong != "ledbat (app: bbr)" {
		t.Errorf("flow's cc %q, want the daemon's name of it with the app's request beside it, %q", f.Cong, "ledbat (app: bbr)")
	}
	last := f.Points[len(f.Points)-1]
	if last.Cap != 17 || last.DownCap != 28960 || last.Cwnd == 0 || last.Rate <= 0 {
		t.Errorf("last point %+v: want cap 17, downlink cap 28960, a cwnd and a rate", last)
	}
	if len(d.asked) != 1 {
		t.Errorf("lanes asked %d times for one socket, want once (cached)", len(d.asked))
	}
	if snap.Daemon == nil || snap.Daemon.Version != "test" || !strings.Contains(string(snap.Coop), `"n":2`) {
		t.Errorf("snapshot daemon %+v coop %s", snap.Daemon, snap.Coop)
	}

	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	get := func(path string) (string, string) {
		r, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 {
			t.Fatalf("GET %s: %s", path, r.Status)
		}
		return string(b), r.Header.Get("Content-Type")
	}
	if page, _ := get("/"); !strings.Contains(page, `<canvas id="cwnd"`) || !strings.Contains(page, "app.js") {
		t.Errorf("page: %.200s", page)
	}
	if js, ct := get("/app.js"); !strings.Contains(js, "api/snapshot") || !strings.Contains(ct, "javascript") {
		t.Errorf("app.js (%s): %.100s", ct, js)
	}
	body, _ := get("/api/snapshot")
	var got Snapshot
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Flows) != 1 {
		t.Errorf("snapshot over HTTP: %v %.300s", err, body)
	}
	m, _ := get("/metrics")
	if !strings.Contains(m, `lanes_tcp_flows{lane="background"} 1`) || !strings.Contains(m, "lanes_daemon_up 1") {
		t.Errorf("metrics:\n%s", m)
	}
	testutil.PromCheck(t, []byte(m))
}

// A controller the policy leaves off is a state in the snapshot, not an
// error (the page shows it as an off section, last).
func TestDashboardOffAndHeldStates(t *testing.T) {
	port := loopbackFlow(t)
	smp, err := tcpmon.New(tcpmon.Config{Interval: 20 * time.Millisecond, NoProcess: true,
		Filter: tcpmon.Filter{RemotePort: port}})
	if err != nil {
		t.Skipf("sock_diag not available: %v", err)
	}
	defer smp.Close()
	d := &fakeDaemon{off: "no coop section in the policy", runs: "cubic"}
	s := New(Config{Sampler: smp, Daemon: d})
	s.tick()
	snap := s.Snapshot()
	if snap.CoopOff != "no coop section in the policy" || snap.CoopError != "" || snap.Coop != nil {
		t.Fatalf("coop off: off %q, error %q, doc %s", snap.CoopOff, snap.CoopError, snap.Coop)
	}
	// A background flow is held while the yield holds background, not before.
	d.held = true
	s.tick()
	snap = s.Snapshot()
	if len(snap.Flows) != 1 || len(snap.Flows[0].Points) != 2 || snap.Flows[0].Points[0].Held || !snap.Flows[0].Points[1].Held {
		t.Fatalf("held marks: %+v", snap.Flows)
	}
	// Queued while the background lane holds a backlog (the interactive
	// lane's backlog does not count), not before.
	d.held = false
	d.queue = 3028
	s.tick()
	snap = s.Snapshot()
	if pts := snap.Flows[0].Points; len(pts) != 3 || pts[1].Queued || !pts[2].Queued || pts[2].Held {
		t.Fatalf("queued marks: %+v", pts)
	}
}

// Without a daemon the page still shows flows; a vanished flow leaves at
// the next sample.
func TestDashboardWithoutDaemonForgetsOldFlows(t *testing.T) {
	port := loopbackFlow(t)
	smp, err := tcpmon.New(tcpmon.Config{Interval: 20 * time.Millisecond, NoProcess: true,
		Filter: tcpmon.Filter{RemotePort: port}})
	if err != nil {
		t.Skipf("sock_diag not available: %v", err)
	}
	s := New(Config{Sampler: smp, History: time.Minute})
	s.tick()
	if snap := s.Snapshot(); len(snap.Flows) != 1 || snap.Flows[0].Lane != "-" || snap.Daemon != nil {
		t.Fatalf("snapshot %+v", snap)
	}
	smp.Close()
	smp2, err := tcpmon.New(tcpmon.Config{Interval: 20 * time.Millisecond, NoProcess: true,
		Filter: tcpmon.Filter{RemotePort: 1}}) // matches nothing: the flow "vanished"
	if err != nil {
		t.Fatal(err)
	}
	defer smp2.Close()
	s.cfg.Sampler = smp2
	s.tick()
	if snap := s.Snapshot(); len(snap.Flows) != 0 {
		t.Errorf("closed flow still shown: %+v", snap.Flows)
	}
}

// The dashboard's own HTTP connections (to its listening address) are not
// shown as flows.
func TestDashboardHidesOwnConnections(t *testing.T) {
	port := loopbackFlow(t)
	smp, err := tcpmon.New(tcpmon.Config{Interval: 20 * time.Millisecond, NoProcess: true,
		Filter: tcpmon.Filter{RemotePort: port}})
	if err != nil {
		t.Skipf("sock_diag not available: %v", err)
	}
	defer smp.Close()
	s := New(Config{Sampler: smp, Hide: []netip.AddrPort{netip.AddrPortFrom(netip.IPv4Unspecified(), port)}})
	s.tick()
	if snap := s.Snapshot(); len(snap.Flows) != 0 {
		t.Errorf("own connection shown: %+v", snap.Flows)
	}
	s.cfg.Hide = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1")}
	s.tick()
	if snap := s.Snapshot(); len(snap.Flows) != 1 || len(snap.Lanes) != 3 {
		t.Errorf("other flow hidden or lanes missing: %+v", snap)
	}
}

// The lane chart's rates: what the lanes' queues sent between two
// statuses, not compared across another set of interfaces or a counter
// that went back (a restarted daemon); from the flows without a status.
func TestLaneRates(t *testing.T) {
	t0 := time.Unix(100, 0)
	st := func(bytes uint64, ifaces ...string) *client.Status {
		s := &client.Status{}
		for _, n := range ifaces {
			s.Interfaces = append(s.Interfaces, client.InterfaceStatus{Name: n,
				Lanes: []client.LaneStats{{Lane: lane.Background, Bytes: bytes}, {Lane: lane.Realtime, Bytes: 1000}}})
		}
		return s
	}
	a, b := countersOf(st(0, "eth0", "wlan0"), t0), countersOf(st(625_000, "wlan0", "eth0"), t0.Add(time.Second))
	r, ok := laneRates(a, b)
	if !ok || r["background"] != 10 || r["realtime"] != 0 {
		t.Errorf("two interfaces, 625,000 bytes each in 1 s: %v %v, want background 10 Mbit/s, realtime 0", r, ok)
	}
	if _, ok := laneRates(b, countersOf(st(10, "wlan0", "eth0"), t0.Add(2*time.Second))); ok {
		t.Error("a counter that went back compared")
	}
	if _, ok := laneRates(b, countersOf(st(700_000, "eth0"), t0.Add(2*time.Second))); ok {
		t.Error("another set of interfaces compared")
	}
	if countersOf(&client.Status{}, t0) != nil || countersOf(nil, t0) != nil {
		t.Error("counters without interfaces")
	}
	// Through the server: "queues" once two statuses compare, "flows" without a daemon.
	port := loopbackFlow(t)
	smp, err := tcpmon.New(tcpmon.Config{Interval: 20 * time.Millisecond, NoProcess: true,
		Filter: tcpmon.Filter{RemotePort: port}})
	if err != nil {
		t.Skipf("sock_diag not available: %v", err)
	}
	defer smp.Close()
	d := &fakeDaemon{runs: "cubic"}
	s := New(Config{Sampler: smp, Daemon: d})
	s.tick()
	d.sent = 1_000_000
	s.tick()
	snap := s.Snapshot()
	var bg []LanePoint
	for _, l := range snap.Lanes {
		if l.Lane == "background" {
			bg = l.Points
		}
	}
	if snap.LaneSource != "queues" || len(bg) != 2 || bg[1].Mbit <= 0 {
		t.Errorf("with a daemon's status: source %q, background points %+v; want queues and a rate", snap.LaneSource, bg)
	}
	alone := New(Config{Sampler: smp})
	alone.tick()
	if src := alone.Snapshot().LaneSource; src != "flows" {
		t.Errorf("without a daemon: source %q, want flows", src)
	}
}

// TestLaneChartCountsDownloads: a download's lane showed only its ACKs
// (what the lane's queues sent); its received rate is now the lane's down.
func TestLaneChartCountsDownloads(t *testing.T) {
	s := New(Config{})
	flows := []tcpmon.Flow{{Lane: lane.Interactive, RecvRate: 18.6e6, Throughput: 0.47e6}, {Lane: lane.Background, RecvRate: 2e6}}
	s.addLanePoints(1, flows, nil, nil, time.Now())
	got := map[string]LanePoint{}
	for name, pts := range s.lanePts {
		got[name] = pts[len(pts)-1]
	}
	if got["interactive"].Down != 18.6 || got["background"].Down != 2 || got["interactive"].Mbit != 0.47 {
		t.Errorf("lane points %+v; want interactive down 18.6 up 0.47, background down 2 Mbit/s", got)
	}
}
