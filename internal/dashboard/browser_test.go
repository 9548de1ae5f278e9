// browser_test.go: the dashboard in a real browser. Debian's headless
// Chromium, driven from Go through the DevTools protocol (chromedp), loads
// the page served against a real `lanes daemon` managing a fresh namespace
// with a real TCP flow in it, and checks that the flow appears, updates and
// leaves after it closed, that the page fits 400 px, and that the console
// stays free of errors; the same server's /metrics passes promtool. LANES_DASHBOARD_SCREENSHOT=FILE saves a screenshot.
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

func findChromium(t *testing.T) string {
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("no Chromium installed (Debian package chromium; scripts/deps.sh test installs it)")
	return ""
}

// startLanesDaemon builds lanes and runs its daemon in ns managing link
// (with the interface keys ifaceKeys, e.g. "mode: shaped") until the test
// ends; it returns the daemon's socket.
func startLanesDaemon(t *testing.T, ns *testutil.NetNS, link string, ifaceKeys ...string) string {
	return testutil.StartLanesDaemon(t, ns, testutil.BuildLanes(t, "../.."), link, ifaceKeys...)
}

// flowAtoB opens a TCP connection from p.A to p.B that keeps sending until
// the returned function closes it.
func flowAtoB(t *testing.T, p *testutil.Pair) (local string, stop func()) {
	c, stop := pacedFlowAtoB(t, p, 9000, 16<<10, 2*time.Millisecond)
	return c.LocalAddr().String(), stop
}

// pacedFlowAtoB opens a TCP connection from p.A to p.B's port that writes
// chunk bytes every pause until the returned function closes it.
func pacedFlowAtoB(t *testing.T, p *testutil.Pair, port, chunk int, pause time.Duration) (net.Conn, func()) {
	var ln net.Listener
	p.B.Do(t, func() (err error) { ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); return })
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	var c net.Conn
	p.A.Do(t, func() (err error) {
		c, err = net.Dial("tcp4", net.JoinHostPort(p.AddrB.String(), strconv.Itoa(port)))
		return
	})
	done := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done); c.Close() }) }
	t.Cleanup(stop)
	go func() {
		buf := make([]byte, chunk)
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
			time.Sleep(pause)
		}
	}()
	return c, stop
}

func TestDashboardInBrowser(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("starts a daemon and a browser")
	}
	chromium := findChromium(t)
	p := testutil.NewVethPair(t)
	sock := startLanesDaemon(t, p.A, p.LinkA)
	local, stopFlow := flowAtoB(t, p)
	key := local + " " + net.JoinHostPort(p.AddrB.String(), "9000")
	addr := serveDashboard(t, p, sock)

	b := openBrowser(t, chromium)
	if err := chromedp.Do(b.ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	first := b.waitForPoints(t, key, "flow "+key+" appears", func(n int) bool { return n > 0 })
	b.waitForPoints(t, key, "flow updates", func(n int) bool { return n > first })
	checkPage(t, b.ctx, key)
	if path := os.Getenv("LANES_DASHBOARD_SCREENSHOT"); path != "" {
		screenshot(t, b.ctx, path)
	}
	checkLiveMetrics(t, addr, p.LinkA)

	stopFlow()
	b.waitForPoints(t, key, "closed flow leaves", func(n int) bool { return n < 0 })
	b.checkConsole(t)
}

// A realtime flow of a few dozen kbit/s beside tens of Mbit/s gets its own
// scale, and the background flow, starved by a foreground upload that
// fills the shaped uplink, is in the legend with its lane and the srtt
// chart says why its srtt is seconds: the page's pictures that were
// unreadable. LANES_DASHBOARD_SCREENSHOT writes it.
func TestDashboardHeldAndRealtime(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("starts a daemon and a browser")
	}
	chromium := findChromium(t)
	p := testutil.NewVethPair(t)
	// A 50 Mbit/s uplink the foreground fills (a bulk upload): the
	// background flow gets what is left, which the yield holds.
	sock := startLanesDaemon(t, p.A, p.LinkA, "mode: shaped", "uplink: 50mbit")
	pacedFlowAtoB(t, p, 9000, 64<<10, 0) // the foreground: interactive
	bg, _ := pacedFlowAtoB(t, p, 9001, 16<<10, 2*time.Millisecond)
	rt, _ := pacedFlowAtoB(t, p, 9002, 200, 20*time.Millisecond)
	dc, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	for c, l := range map[net.Conn]lane.Lane{bg: lane.Background, rt: lane.Realtime} {
		if _, err := dc.RegisterConn(c, l); err != nil {
			t.Fatalf("register %s: %v", l, err)
		}
	}
	addr := serveDashboard(t, p, sock)
	b := openBrowser(t, chromium)
	if err := chromedp.Do(b.ctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	bgKey := bg.LocalAddr().String() + " " + bg.RemoteAddr().String()
	state := fmt.Sprintf(`(() => {
		const r = [...document.querySelectorAll("#flows tbody tr")].find(r => r.dataset.flow === %q);
		return [r ? r.children[5].textContent : "", document.getElementById("srtt-note").textContent,
			document.getElementById("rt-alone").hidden ? "" : "realtime alone", document.getElementById("flow-legend").textContent].join("|");
	})()`, bgKey)
	var got string
	for {
		if got, err = chromedp.Run(b.ctx, chromedp.Evaluate[string](state)); err != nil {
			t.Fatal(err)
		}
		f := strings.Split(got, "|")
		// held or not as the yield's rule says (beside a foreground TCP
		// flow that is not harmed, background shares): the marks
		// themselves are TestDashboardOffAndHeldStates'
		// the background flow starved by the foreground on the 50 Mbit/s
		// uplink: the srtt chart says why its srtt is high
		if f[2] != "" && strings.Contains(f[3], "(background") && strings.Contains(f[1], "held back") {
			break
		}
		select {
		case <-b.ctx.Done():
			t.Fatalf("the page never showed the background flow and the realtime lane alone: state %q", got)
		case <-time.After(300 * time.Millisecond):
		}
	}
	if path := os.Getenv("LANES_DASHBOARD_SCREENSHOT"); path != "" {
		// A picture with some history: 20 s more of the three flows.
		if err := chromedp.Do(b.ctx, chromedp.Sleep(20*time.Second)); err != nil {
			t.Fatal(err)
		}
		screenshot(t, b.ctx, path)
	}
	b.checkConsole(t)
}

// serveDashboard serves the dashboard of A's sockets and the daemon at
// sock on a loopback port, for the test's life; it returns the address.
func serveDashboard(t *testing.T, p *testutil.Pair, sock string) string {
	smp, err := tcpmon.New(tcpmon.Config{Interval: 200 * time.Millisecond, NetNSPath: p.A.Path(), NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smp.Close() })
	dc := client.New(sock) // what `lanes dashboard` passes
	t.Cleanup(func() { dc.Close() })
	srv := New(Config{Sampler: smp, Daemon: dc})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = srv.Run(ctx) }()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// browser is a headless Chromium for one test, and the errors its console
// reported.
type browser struct {
	ctx         context.Context // bounded: the browser starts and the page polls on a loaded machine
	stopConsole context.CancelFunc
	consoleDone chan struct{}
	mu          sync.Mutex
	errors      []string
}

// openBrowser starts Chromium (closed at the test's end) and collects its
// console's errors and exceptions.
func openBrowser(t *testing.T, chromium string) *browser {
	// Chromium puts its profile singleton's socket in a directory of its own
	// under TMPDIR (org.chromium.Chromium.*) and leaves it when killed, as
	// the test ends it: both that and the profile go in the test's own
	// temporary directory.
	browserTmp := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(400, 1000),
		chromedp.UserDataDir(filepath.Join(browserTmp, "profile")), chromedp.Env("TMPDIR="+browserTmp))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	tctx, tcancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(tcancel)
	b := &browser{ctx: tctx, consoleDone: make(chan struct{})}
	var cctx context.Context
	cctx, b.stopConsole = context.WithCancel(bctx)
	t.Cleanup(b.stopConsole)
	msgs := chromedp.Console(cctx)
	go func() {
		defer close(b.consoleDone)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// waitForPoints polls the page until the flow key's row has a number of
// points ok accepts (-1: no row); what names the wait in a failure.
func (b *browser) waitForPoints(t *testing.T, key, what string, ok func(n int) bool) int {
	for {
		n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf(
			`(() => { const r = [...document.querySelectorAll("#flows tbody tr")].find(r => r.dataset.flow === %q); return r ? +r.dataset.points : -1 })()`, key)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok(n) {
			return n
		}
		select {
		case <-b.ctx.Done():
			t.Fatalf("%s: not seen (points %d)", what, n)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkConsole stops collecting and fails on every console error, and if
// the browser's time ran out.
func (b *browser) checkConsole(t *testing.T) {
	b.stopConsole()
	<-b.consoleDone
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("browser console: %s", e)
	}
	if err := b.ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		t.Error(err)
	}
}

// checkPage: the flow's row names its lane from the daemon, the page fits
// a 400 px window, and the legends list the lanes and the flow.
func checkPage(t *testing.T, ctx context.Context, key string) {
	laneName, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`[...document.querySelectorAll("#flows tbody tr")].find(r => r.dataset.flow === %q).children[2].textContent`, key)))
	if err != nil {
		t.Fatal(err)
	}
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`))
	if err != nil {
		t.Fatal(err)
	}
	legends, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#lane-legend > span, #flow-legend > span").length`))
	if err != nil {
		t.Fatal(err)
	}
	if laneName != "interactive" {
		t.Errorf("flow's lane on the page: %q, want interactive (from the daemon)", laneName)
	}
	if overflow {
		t.Error("the page is wider than a 400 px window")
	}
	if legends < 4 {
		t.Errorf("%d legend entries, want the 3 lanes and the flow", legends)
	}
	// The daemon's policy has no coop section: an off section, last, no error.
	coop, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`(() => { const s = document.getElementById("coop-section"); return (s.classList.contains("off") && s === s.parentNode.lastElementChild ? "last, off: " : "") + s.querySelector("#coop").textContent })()`))
	if err != nil {
		t.Fatal(err)
	}
	if coop != "last, off: off (no coop section in the policy)" {
		t.Errorf("coop section: %q, want it last and off: the policy has no coop section", coop)
	}
}

// screenshot writes the page at 1000 x 900 to path as PNG.
func screenshot(t *testing.T, ctx context.Context, path string) {
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1000, 900), chromedp.Sleep(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkLiveMetrics reads the live daemon's metrics, as Prometheus scrapes them.
func checkLiveMetrics(t *testing.T, addr, link string) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	testutil.PromCheck(t, metricsText)
	for _, want := range []string{"lanes_daemon_up 1", fmt.Sprintf(`lanes_lane_packets_total{interface=%q,lane="interactive"}`, link),
		`lanes_tcp_flows{lane="interactive"} 1`} {
		if !strings.Contains(string(metricsText), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
