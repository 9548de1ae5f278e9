// firsthour_test.go: a new user's first hour with the README, in one test:
// the Quick start as written, then the daemon again on the policy it
// installed, a real curl download moved to background with `lanes move`
// beside a UDP call, the dashboard's /api/snapshot and /metrics, a broken
// policy refused on SIGHUP and the realtime lane off. What each view says (status text and
// --json, monitor, the dashboard, the metrics, lanes rt send) is checked
// against the kernel: the HTB classes' counters and the socket's
// congestion control as ss reads them; the UDP call's rates against what
// it sends (each datagram answered twice: down twice up).
package examples_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/dashboard"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/rt"
)

// firstHour is the daemon a user started after the Quick start and what
// the test runs beside it.
type firstHour struct {
	t    *testing.T
	p    *testutil.Pair
	bin  string // the Quick start's bin/lanes
	pol  string // the policy it installed
	dir  string // the daemon's socket folder
	sock string
	cmd  *exec.Cmd // the daemon
	// udpPort is the UDP call's local port (testutil.UDPCall)
	udpPort int
}

// lanes runs the CLI in the user's namespace and returns its output.
func (f *firstHour) lanes(args ...string) (string, error) {
	out, err := f.p.A.Command(f.bin, args...).CombinedOutput()
	return string(out), err
}

// startDaemon runs bin's daemon on the installed policy as the Quick start
// did, with its state and socket in folders of the test's; at the test's
// end it is stopped with SIGTERM and must leave no qdisc behind.
func (f *firstHour) startDaemon() {
	t := f.t
	f.cmd = f.p.A.Command(f.bin, "daemon", "--policy", f.pol, "--socket", f.sock)
	f.cmd.Env = append(os.Environ(), "STATE_DIRECTORY="+filepath.Join(f.dir, "state"))
	var log strings.Builder
	f.cmd.Stderr = &log
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- f.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the daemon's exit on SIGTERM: %v", err)
			}
		case <-time.After(testutil.Patience(20 * time.Second)):
			_ = f.cmd.Process.Kill()
			<-done
			t.Errorf("the daemon did not stop within 20 s of SIGTERM")
		}
		t.Logf("the daemon's log:\n%s", log.String())
		checkNoQdisc(t, f.p.A, f.p.LinkA, "the daemon's SIGTERM")
	})
	if out, err := f.lanes("status", "--wait", "30s", "--socket", f.sock); err != nil {
		t.Fatalf("lanes status --wait 30s: %v\n%s", err, out)
	}
}

// serveStream serves an endless download paced at about 26 Mbit/s (32 KB
// every 10 ms, as a video server sends) on ns's port until the test ends:
// its bytes arrive steadily, so every view's rate has something to show in
// any window.
func serveStream(t *testing.T, ns *testutil.NetNS, port int) {
	var ln net.Listener
	ns.Do(t, func() (err error) { ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); return })
	zeros := make([]byte, 32<<10)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for r.Context().Err() == nil {
			if _, err := w.Write(zeros); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			<-tick.C
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// startCurl starts curl downloading from url and returns its pid.
func startCurl(t *testing.T, ns *testutil.NetNS, url string) int {
	cmd := ns.Command("curl", "-sS", "-o", "/dev/null", url)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
	for i := 0; i < 50 && (err != nil || strings.TrimSpace(string(comm)) != "curl"); i++ {
		time.Sleep(20 * time.Millisecond) // ip netns exec has not exec'd it yet
		comm, err = os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
	}
	if strings.TrimSpace(string(comm)) != "curl" {
		t.Fatalf("pid %d is %q, not curl: %v", cmd.Process.Pid, comm, err)
	}
	return cmd.Process.Pid
}

var (
	ssCC   = regexp.MustCompile(`^\s+(\S+)\s`)
	ssRecv = regexp.MustCompile(`\bbytes_received:(\d+)`)
)

// bytesReceived is what ss reads as received by ns's established TCP
// socket to remote port port.
func bytesReceived(t *testing.T, ns *testutil.NetNS, port int) uint64 {
	out, err := ns.Command("ss", "-tinH", "state", "established", fmt.Sprintf("dport = :%d", port)).Output()
	m := ssRecv.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("ss: %v, no bytes_received in\n%s", err, out)
	}
	n, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return n
}

// socketCC is the congestion control ss reads from the kernel for ns's
// established TCP socket to remote port port, "" while there is none.
func socketCC(t *testing.T, ns *testutil.NetNS, port int) string {
	out, err := ns.Command("ss", "-tinH", "state", "established", fmt.Sprintf("dport = :%d", port)).Output()
	if err != nil {
		t.Fatalf("ss: %v", err)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 2 {
		return ""
	}
	m := ssCC.FindStringSubmatch(lines[1])
	if m == nil {
		t.Fatalf("ss -tin's second line names no congestion control:\n%s", out)
	}
	return m[1]
}

// classPackets are the packets the kernel's HTB classes on ns's link sent,
// by lane: what the classifier put into each lane.
func classPackets(t *testing.T, ns *testutil.NetNS, link string) map[lane.Lane]uint64 {
	got := map[lane.Lane]uint64{}
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(link)
		if err != nil {
			return err
		}
		classes, err := netlink.ClassList(l, 0)
		for _, c := range classes {
			st := c.Attrs().Statistics
			for _, ln := range lane.All {
				if c.Attrs().Handle == ln.ClassID() && st != nil && st.Basic != nil {
					got[ln] = uint64(st.Basic.Packets)
				}
			}
		}
		return err
	})
	return got
}

// statusDoc is `lanes status --json`.
type statusDoc struct {
	client.Status
	TCPRates []struct {
		Lane       string  `json:"lane"`
		DownBps    float64 `json:"down_bps"`
		UDPUpBps   float64 `json:"udp_up_bps"`
		UDPDownBps float64 `json:"udp_down_bps"`
	} `json:"tcp_rates"`
	UDP []client.UDPFlow `json:"udp_flows"`
}

func (f *firstHour) statusJSON() statusDoc {
	f.t.Helper()
	out, err := f.p.A.Command(f.bin, "status", "--json", "--socket", f.sock).Output()
	var st statusDoc
	if err != nil || json.Unmarshal(out, &st) != nil {
		f.t.Fatalf("lanes status --json: %v\n%s", err, out)
	}
	return st
}

// monitorFlow is lanes monitor's last sample of the flow to port, from
// two samples (the rates need a pair) between which the kernel's socket
// received bytes (asked again, up to 5 times, while it did not).
func (f *firstHour) monitorFlow(port int) tcpmon.Flow {
	f.t.Helper()
	var flows []tcpmon.Flow
	for range 5 {
		out, err := f.p.A.Command(f.bin, "monitor", "--socket", f.sock, "--json", "--count", "2",
			"--dport", fmt.Sprint(port)).Output()
		var rerr error
		flows, rerr = tcpmon.ReadFlows(strings.NewReader(string(out)))
		if err != nil || rerr != nil || len(flows) != 2 {
			f.t.Fatalf("lanes monitor --json --count 2 --dport %d: %v %v, want two samples of one flow\n%s", port, err, rerr, out)
		}
		if flows[1].BytesRecv > flows[0].BytesRecv {
			break
		}
	}
	return flows[1]
}

// get fetches url from inside the user's namespace (the dashboard listens
// on its loopback) with curl.
func (f *firstHour) get(url string) []byte {
	f.t.Helper()
	out, err := f.p.A.Command("curl", "-sSf", "--max-time", "10", url).Output()
	if err != nil {
		f.t.Fatalf("curl %s: %v", url, err)
	}
	return out
}

// TestFirstHourViewsMatchKernel: the README's path, each view checked
// against what the kernel does (see the file's comment).
func TestFirstHourViewsMatchKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lanes and runs a daemon")
	}
	for _, tool := range []string{"curl", "ss"} {
		testutil.SkipUnlessCommand(t, tool)
	}
	run := runQuickStart(t)
	checkQuickStart(t, run)
	f := &firstHour{t: t, p: run.pair, bin: filepath.Join(run.tree, "bin", "lanes"),
		pol: filepath.Join(run.scratch, "etc-up", "lanes", "policy.yaml"), dir: t.TempDir()}
	f.sock = filepath.Join(f.dir, "lanes.sock")
	f.startDaemon()

	const port = 8080
	serveStream(t, f.p.B, port)
	pid := startCurl(t, f.p.A, fmt.Sprintf("http://%s:%d/", f.p.AddrB, port))
	var before string
	waitUntil(t, "curl's connection", func() bool { before = socketCC(t, f.p.A, port); return before != "" })
	if m := f.monitorFlow(port); m.Lane != lane.Interactive || m.Cong != before || m.RecvRate <= 0 {
		t.Errorf("before the move, lanes monitor says lane %v, CC %q, received %.0f bit/s; the kernel: interactive, %q, downloading",
			m.Lane, m.Cong, m.RecvRate, before)
	}

	if out, err := f.lanes("move", "--socket", f.sock, "--lane", "background", strconv.Itoa(pid)); err != nil {
		t.Fatalf("lanes move --lane background %d: %v\n%s", pid, err, out)
	}
	f.checkDownloadInBackground(port, before)
	// a call beside it (after the classes' check: its datagrams are interactive)
	f.udpPort = testutil.UDPCall(t, f.p, 9000)
	f.checkUDPCall()
	f.checkDashboard(port)
	f.checkRefusedReload(port)
	f.checkRealtimeOff()
}

// waitUntil polls cond for up to 10 s (more on a loaded machine).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testutil.Patience(10 * time.Second)); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// backgroundCCName is the congestion control status names for the
// background lane ("LEDBAT++ NAME, target ..."), "" if none.
func backgroundCCName(st statusDoc) string {
	for _, it := range st.Interfaces {
		if name, ok := strings.CutPrefix(it.BackgroundCC, "LEDBAT++ "); ok {
			name, _, _ = strings.Cut(name, ",")
			return name
		}
	}
	return ""
}

// checkDownloadInBackground: the kernel runs the moved download in the
// background lane (its ACKs counted in the background class, its socket on
// the lane's congestion control), and status, monitor say so, with its rate.
func (f *firstHour) checkDownloadInBackground(port int, before string) {
	t := f.t
	c0, r0 := classPackets(t, f.p.A, f.p.LinkA), bytesReceived(t, f.p.A, port)
	st := f.statusJSON()
	var c1 map[lane.Lane]uint64
	waitUntil(t, "50 packets in the background class", func() bool {
		c1 = classPackets(t, f.p.A, f.p.LinkA)
		return c1[lane.Background]-c0[lane.Background] >= 50
	})
	r1 := bytesReceived(t, f.p.A, port)
	bg, fg := c1[lane.Background]-c0[lane.Background], c1[lane.Interactive]-c0[lane.Interactive]
	t.Logf("after the move, while the socket received %d bytes: background class +%d packets, interactive +%d", r1-r0, bg, fg)
	if fg*10 > bg {
		t.Errorf("the kernel's classes: background +%d packets, interactive +%d; want the download's ACKs in background", bg, fg)
	}
	for _, it := range st.Interfaces {
		for _, l := range it.Lanes {
			if l.Lane == lane.Background && (l.Packets < c0[lane.Background] || l.Packets > c1[lane.Background]) {
				t.Errorf("status --json: background %d packets; the kernel's class had %d before it, %d after",
					l.Packets, c0[lane.Background], c1[lane.Background])
			}
		}
	}
	for _, r := range st.TCPRates {
		if (r.Lane == "background") != (r.DownBps > 0) {
			t.Errorf("status --json tcp_rates: %s down %.0f bit/s; want the download in background only", r.Lane, r.DownBps)
		}
	}
	want := backgroundCCName(st)
	cc := socketCC(t, f.p.A, port)
	if want == "" || cc != want || cc == before {
		t.Errorf("the socket's congestion control (ss): %q (before the move %q); status names the background lane's %q", cc, before, want)
	}
	m := f.monitorFlow(port)
	if m.Lane != lane.Background || m.Cong != datapath.CCNameLEDBAT || !strings.Contains(m.Why, "lanes move") || m.RecvRate <= 0 {
		t.Errorf("lanes monitor: lane %v, CC %q, why %q, received %.0f bit/s; the kernel: background, %q (%s), moved by lanes move, downloading",
			m.Lane, m.Cong, m.Why, m.RecvRate, cc, datapath.CCNameLEDBAT)
	}
	out, err := f.lanes("status", "--socket", f.sock)
	if err != nil || !regexp.MustCompile(`(?m)^  background +TCP +1  up +\S+  down +[1-9]`).MatchString(out) {
		t.Errorf("lanes status: %v; want the background lane's download rate:\n%s", err, out)
	}
}

// checkUDPCall: status (--json and text) shows the UDP call in interactive
// with its rates, down twice up, and no UDP rate in another lane.
func (f *firstHour) checkUDPCall() {
	t := f.t
	var st statusDoc
	// a socket's rates need two listings that both hold it: a new call's
	// first status may list it once
	waitUntil(t, "status to list the UDP call with its rates", func() bool {
		st = f.statusJSON()
		u := udpFrom(st.UDP, f.udpPort)
		return u != nil && u.UpBps > 0
	})
	for _, r := range st.TCPRates {
		if (r.Lane == "interactive") != testutil.AnsweredTwice(r.UDPUpBps, r.UDPDownBps) {
			t.Errorf("status --json: %s UDP up %.0f, down %.0f bit/s; want the call in interactive only, down twice up",
				r.Lane, r.UDPUpBps, r.UDPDownBps)
		}
	}
	if u := udpFrom(st.UDP, f.udpPort); u == nil || u.Lane != lane.Interactive || !testutil.AnsweredTwice(u.UpBps, u.DownBps) {
		t.Errorf("status --json: the UDP call %+v; want it interactive, down twice up", u)
	}
	out, err := f.lanes("status", "--socket", f.sock)
	if err != nil || !regexp.MustCompile(`(?m)^  interactive +TCP .*UDP +1  up +[0-9.]+[KM]bit  down +[0-9.]+[KM]bit$`).MatchString(out) {
		t.Errorf("lanes status: %v; want the interactive lane's UDP rates:\n%s", err, out)
	}
}

// checkDashboard: the dashboard's snapshot shows the download in
// background with the socket's congestion control and a received rate, the
// background lane's download rate, the UDP flows, and /metrics the rate.
func (f *firstHour) checkDashboard(port int) {
	t := f.t
	const listen = "127.0.0.1:18377"
	cmd := f.p.A.Command(f.bin, "dashboard", "--socket", f.sock, "--listen", listen)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	dst := fmt.Sprintf("%s:%d", f.p.AddrB, port)
	var snap dashboard.Snapshot
	var flow *dashboard.FlowView
	waitUntil(t, "the dashboard's snapshot with the download's rate", func() bool {
		if f.p.A.Command("curl", "-sf", "-o", "/dev/null", "http://"+listen+"/").Run() != nil {
			return false
		}
		snap, flow = dashboard.Snapshot{}, nil
		if json.Unmarshal(f.get("http://"+listen+"/api/snapshot"), &snap) != nil {
			return false
		}
		for i := range snap.Flows {
			if snap.Flows[i].Dst == dst {
				flow = &snap.Flows[i]
			}
		}
		u := udpFrom(snap.UDPFlows, f.udpPort)
		return flow != nil && len(flow.Points) > 1 && flow.Points[len(flow.Points)-1].Recv > 0 && u != nil && u.UpBps > 0
	})
	if u := udpFrom(snap.UDPFlows, f.udpPort); u.Lane != lane.Interactive || !testutil.AnsweredTwice(u.UpBps, u.DownBps) {
		t.Errorf("dashboard: the UDP call in %v, up %.0f, down %.0f bit/s; want interactive, down twice up", u.Lane, u.UpBps, u.DownBps)
	}
	if cc := socketCC(t, f.p.A, port); flow.Lane != "background" || flow.Cong != datapath.CCNameLEDBAT || cc != backgroundCCName(f.statusJSON()) {
		t.Errorf("dashboard: the download in %s with CC %q; the kernel: background, %q (LEDBAT++)", flow.Lane, flow.Cong, cc)
	}
	if snap.UDPError != "" || snap.DaemonError != "" {
		t.Errorf("dashboard: udp_error %q, daemon_error %q", snap.UDPError, snap.DaemonError)
	}
	var bgDown float64
	for _, l := range snap.Lanes {
		if l.Lane == "background" && len(l.Points) > 0 {
			bgDown = l.Points[len(l.Points)-1].Down
		}
	}
	if bgDown <= 0 {
		t.Errorf("dashboard: the background lane's download rate is %v", bgDown)
	}
	page := string(f.get("http://" + listen + "/metrics"))
	if v := testutil.LaneMetric(page, "lanes_tcp_receive_bytes_per_second", "background"); v <= 0 {
		t.Errorf("/metrics: lanes_tcp_receive_bytes_per_second{lane=\"background\"} %v; want the download's rate", v)
	}
	up, down := testutil.LaneMetric(page, "lanes_udp_send_bytes_per_second", "interactive"), testutil.LaneMetric(page, "lanes_udp_receive_bytes_per_second", "interactive")
	if !testutil.AnsweredTwice(up, down) {
		t.Errorf("/metrics: interactive UDP send %v, receive %v B/s; want the call's, receive twice send", up, down)
	}
}

// checkRefusedReload: a broken policy and SIGHUP, as the Quick start
// teaches: status (text and --json) says it was refused, and the running
// policy keeps the download where it was.
func (f *firstHour) checkRefusedReload(port int) {
	t := f.t
	good, err := os.ReadFile(f.pol)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(good), "lane: background, exe: /usr/bin/restic", "lane: fastest, exe: /usr/bin/restic", 1)
	if broken == string(good) {
		t.Fatal("the installed policy has no restic rule to break")
	}
	if err := os.WriteFile(f.pol, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var st statusDoc
	waitUntil(t, "status --json to show the refused reload", func() bool { st = f.statusJSON(); return st.PolicyRefused != nil })
	if r := st.PolicyRefused; r.Errors != 1 || !strings.Contains(r.First, "lane") {
		t.Errorf("status --json policy_refused %+v: want 1 error, about the lane", r)
	}
	out, err := f.lanes("status", "--socket", f.sock)
	if err != nil || !strings.Contains(out, "POLICY REFUSED at ") || !strings.Contains(out, "running the policy read at ") {
		t.Errorf("lanes status after the refused reload: %v\n%s", err, out)
	}
	if m := f.monitorFlow(port); m.Lane != lane.Background {
		t.Errorf("after the refused reload lanes monitor shows the download in %v; the old policy runs", m.Lane)
	}
}

// checkRealtimeOff: the laptop policy leaves the realtime lane off; status
// says so with the key that turns it on, and so does a realtime client.
func (f *firstHour) checkRealtimeOff() {
	t := f.t
	out, err := f.lanes("status", "--socket", f.sock)
	if err != nil || !regexp.MustCompile(`(?m)^realtime: off\b.*realtime\.enabled`).MatchString(out) {
		t.Errorf("lanes status with the realtime lane off: %v\n%s", err, out)
	}
	out, err = f.lanes("rt", "send", "--socket", filepath.Join(f.dir, "rt.sock"), "--count", "1",
		fmt.Sprintf("%s:9", f.p.AddrB))
	if err == nil || !strings.Contains(out, rt.MsgLaneOff) {
		t.Errorf("lanes rt send with the lane off: %v; want %q in:\n%s", err, rt.MsgLaneOff, out)
	}
}

// udpFrom is the UDP flow of flows with local port port, or nil.
func udpFrom(flows []client.UDPFlow, port int) *client.UDPFlow {
	for i := range flows {
		if strings.HasSuffix(flows[i].Src, fmt.Sprintf(":%d", port)) {
			return &flows[i]
		}
	}
	return nil
}
