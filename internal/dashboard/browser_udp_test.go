// browser_udp_test.go: the dashboard's UDP flows in a real browser. A real
// daemon manages a fresh namespace pair; a QUIC upload (quic-go, `lanes lab
// helper quic-bulk`) runs in background by `lanes run --lane background`
// and a plain UDP echo client in interactive. Both must appear in
// /api/snapshot's udp_flows and in the page's UDP table with their lane
// and why. LANES_DASHBOARD_UDP_SCREENSHOT=FILE saves a screenshot (make
// screenshots).
package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lanes-net/lanes/internal/testutil"
)

// startIn runs bin with args in ns until the test ends.
func startIn(t *testing.T, ns *testutil.NetNS, bin string, args ...string) {
	cmd := ns.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// udpListening says whether ns has a UDP socket bound to port.
func udpListening(ns *testutil.NetNS, port int) bool {
	out, _ := ns.Command("cat", "/proc/net/udp", "/proc/net/udp6").Output()
	return strings.Contains(string(out), fmt.Sprintf(":%04X ", port))
}

// udpRows reads the page's UDP table: per row, "local remote lane why".
const udpRows = `[...document.querySelectorAll("#udpflows tbody tr")].map(r => [...r.children].map(c => c.textContent).join(" | "))`

func TestDashboardUDPInBrowser(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("starts a daemon and a browser")
	}
	chromium := findChromium(t)
	p := testutil.NewVethPair(t)
	sock := startLanesDaemon(t, p.A, p.LinkA)
	bin := testutil.BuildLanes(t, "../..")
	startIn(t, p.B, bin, "lab", "helper", "quic-serve", "--listen", ":4433")
	startIn(t, p.B, bin, "lab", "helper", "echo", "--listen", ":7")
	for deadline := time.Now().Add(testutil.Patience(10 * time.Second)); !udpListening(p.B, 4433) || !udpListening(p.B, 7); {
		if time.Now().After(deadline) {
			t.Fatal("the QUIC and echo servers did not bind")
		}
		time.Sleep(50 * time.Millisecond)
	}
	quicRemote, udpRemote := fmt.Sprintf("%s:4433", p.AddrB), fmt.Sprintf("%s:7", p.AddrB)
	startIn(t, p.A, bin, "run", "--socket", sock, "--lane", "background", "--", bin, "lab", "helper", "quic-bulk", "--to", quicRemote, "--dir", "up")
	startIn(t, p.A, bin, "lab", "helper", "ping", "--to", udpRemote, "--count", "2000", "--interval", "50ms")
	addr := serveDashboard(t, p, sock)

	b := openBrowser(t, chromium)
	if err := chromedp.Do(b.ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	want := map[string]string{quicRemote: "| background | lanes run: process moved to background", udpRemote: "| interactive | no rule"}
	var rows []string
	for deadline := time.Now().Add(testutil.Patience(30 * time.Second)); ; {
		var err error
		if rows, err = chromedp.Run(b.ctx, chromedp.Evaluate[[]string](udpRows)); err != nil {
			t.Fatal(err)
		}
		if allRows(rows, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page's UDP table lacks the QUIC upload in background or the UDP flow in interactive:\n%s", strings.Join(rows, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the page's UDP flows:\n%s", strings.Join(rows, "\n"))
	checkSnapshotUDP(t, addr, quicRemote, udpRemote)
	checkLaneChartCountsQUIC(t, b)
	if path := os.Getenv("LANES_DASHBOARD_UDP_SCREENSHOT"); path != "" {
		if err := chromedp.Do(b.ctx, chromedp.ScrollIntoView("#udp-section")); err != nil {
			t.Fatal(err)
		}
		screenshot(t, b.ctx, path)
	}
	b.checkConsole(t)
}

// allRows says whether, for each remote of want, a row holds the remote
// and the lane-and-why text.
func allRows(rows []string, want map[string]string) bool {
	for remote, text := range want {
		found := false
		for _, r := range rows {
			found = found || strings.Contains(r, remote) && strings.Contains(r, text)
		}
		if !found {
			return false
		}
	}
	return true
}

// checkSnapshotUDP reads /api/snapshot: both flows with lane and why, the
// QUIC upload in the background class.
func checkSnapshotUDP(t *testing.T, addr, quicRemote, udpRemote string) {
	resp, err := http.Get("http://" + addr + "/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var snap Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatal(err)
	}
	var q, u bool
	for _, f := range snap.UDPFlows {
		q = q || strings.Contains(strings.Join(f.Remotes, ","), quicRemote) && f.Lane.String() == "background" && f.BgClass && f.PID != 0
		u = u || f.Dst == udpRemote && f.Lane.String() == "interactive" && f.Why != "" && f.PID != 0
	}
	if !q || !u {
		t.Errorf("/api/snapshot's udp_flows: QUIC in background %v, UDP in interactive %v; want both with their process:\n%s", q, u, body)
	}
}

// checkLaneChartCountsQUIC: the lane chart counts what the lanes' queues
// sent, so the QUIC upload (no TCP flow in background) shows as the
// background lane's rate.
func checkLaneChartCountsQUIC(t *testing.T, b *browser) {
	t.Helper()
	rate := regexp.MustCompile(`background ([0-9.]+) Mbit/s`)
	var got string
	for deadline := time.Now().Add(testutil.Patience(30 * time.Second)); ; {
		var err error
		if got, err = chromedp.Run(b.ctx, chromedp.Evaluate[string](
			`document.getElementById("lane-legend").textContent + "|" + document.getElementById("lane-source").textContent`)); err != nil {
			t.Fatal(err)
		}
		if m := rate.FindStringSubmatch(got); m != nil && m[1] != "0.00" && strings.Contains(got, "QUIC") {
			t.Logf("the lane chart: %s", got)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lane chart never showed the QUIC upload as background's rate: %q", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
