// bgmatrix_test.go: the background lane's matrix, one daemon per path
// (default policy at a remote bottleneck: bgmatrix_remote_test.go; shaped
// mode on the device), run in sequence: each background transport (TCP
// with the system's congestion control, TCP whose app sets CUBIC, QUIC by
// quic-go, unresponsive UDP) in each direction, alone and beside each
// foreground (a constant-rate UDP stream and a paced TCP stream at 40 % of
// the link, a connection opened every 300 ms). A cell prints the
// background's rate ÷ the capacity the foreground leaves idle, the
// foreground's probe p95 against the same foreground without background,
// the probes lost, and what steers the background then (the yield's mode,
// the QUIC/UDP class's episode), with the goals beside them
// (docs/background.md "Tests and figures"). Rates are the receiver's:
// iperf3's interval reports, quic-bulk's stream bytes.
package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// Matrix timing: a background settles, is measured alone (no probe: the
// probe, 50 packets/s, is itself a foreground), then each foreground
// settles beside it and the probe runs.
const (
	mxSettleBg   = 3 * time.Second
	mxAlone      = 2 * time.Second
	mxSettleFg   = time.Second
	mxProbes     = 100 // every 20 ms: 2 s
	mxProbeTail  = time.Second
	mxDrain      = time.Second
	mxChurnEvery = 300 * time.Millisecond
	mxChurnBytes = 20000
	// mxHarmBound is the loose bound on the probe's p95 over the same
	// foreground alone (goal +5 ms): a third of R's 600 KB buffer at
	// 10 Mbit/s, which a background that fills the queue exceeds.
	mxHarmBound = 150 * time.Millisecond
)

// meter is a running transfer's receiver-side count: bytes and the
// seconds they cover.
type meter interface{ read() (bytes, secs float64) }

func rateOver(m meter, d time.Duration) float64 {
	b0, s0 := m.read()
	time.Sleep(d)
	b1, s1 := m.read()
	if s1 <= s0 {
		return 0
	}
	return (b1 - b0) * 8 / (s1 - s0)
}

// iperfMeter sums iperf3's interval lines (-i 0.5 -f k --forceflush):
// transfer and interval length, summaries left out.
type iperfMeter struct {
	mu          sync.Mutex
	bytes, secs float64
}

var iperfInterval = regexp.MustCompile(`^\[\s*\d+\]\s+([\d.]+)-([\d.]+)\s+sec\s+([\d.]+) (|K|M|G)Bytes`)

func (m *iperfMeter) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Text()
		g := iperfInterval.FindStringSubmatch(l)
		if g == nil || strings.Contains(l, "sender") || strings.Contains(l, "receiver") {
			continue
		}
		a, _ := strconv.ParseFloat(g[1], 64)
		b, _ := strconv.ParseFloat(g[2], 64)
		n, _ := strconv.ParseFloat(g[3], 64)
		n *= map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[g[4]]
		m.mu.Lock()
		m.bytes, m.secs = m.bytes+n, m.secs+b-a
		m.mu.Unlock()
	}
}

func (m *iperfMeter) read() (float64, float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes, m.secs
}

var iperfReport = []string{"-i", "0.5", "-f", "k", "--forceflush"}

// meteredIperfServer runs `iperf3 -s` on port in ns and meters what it
// receives.
func meteredIperfServer(t *testing.T, ns *testutil.NetNS, port int) *iperfMeter {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed (scripts/deps.sh test)")
	}
	m := &iperfMeter{}
	cmd := ns.Command("iperf3", append([]string{"-s", "-p", fmt.Sprint(port)}, iperfReport...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go m.scan(out)
	waitFor(t, "iperf3 server", func() bool { return listening(t, ns, "tcp", port) })
	return m
}

// running is a started transfer: its meter and how to end it.
type running struct {
	meter
	stop func()
}

// startIperf runs an iperf3 client in ns (argv after prefix) for at most
// 10 minutes, its own interval lines metered; stop ends it with SIGINT
// (iperf3 then ends the test with its server, which serves the next), or
// SIGKILL after 2 s.
func startIperf(t *testing.T, ns *testutil.NetNS, prefix []string, args ...string) *running {
	t.Helper()
	argv := append(append(append([]string{}, prefix...), "iperf3"), args...)
	argv = append(append(argv, "-t", "600"), iperfReport...)
	cmd := ns.Command(argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &iperfMeter{}
	go m.scan(out)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGINT)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second): // a flooded link delays the test's end
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(stop)
	return &running{meter: m, stop: stop}
}

// quicMeter is quic-bulk's stream bytes over wall time.
type quicMeter struct {
	q  *quicBulk
	t0 time.Time
}

func (m quicMeter) read() (float64, float64) {
	return float64(m.q.bytes.Load()), time.Since(m.t0).Seconds()
}

// churnMeter counts the churn foreground's completed GETs.
type churnMeter struct {
	n  *atomic.Int64
	t0 time.Time
}

func (m churnMeter) read() (float64, float64) {
	return float64(m.n.Load() * mxChurnBytes), time.Since(m.t0).Seconds()
}

// mxBed is one path under one daemon: where the servers are.
type mxBed struct {
	p    *testutil.Path
	sock string
	base string  // B's HTTP server
	link float64 // the bottleneck's rate, bit/s
	// servers: an iperf3 server per use (namespace/transfer), so that one
	// transfer's end never leaves the next one's server busy
	servers map[string]mxServer
}

type mxServer struct {
	port string
	*iperfMeter
}

// newBed starts the iperf3 servers the matrix uses on p, from port on:
// B's for each transfer's uploads, A's for the foregrounds' downloads.
func newBed(t *testing.T, p *testutil.Path, base string, link float64, port int, dirs []string, bgs []mxBackground) *mxBed {
	t.Helper()
	b := &mxBed{p: p, base: base, link: link, servers: map[string]mxServer{}}
	add := func(ns *testutil.NetNS, name string) {
		b.servers[ns.Name+"/"+name] = mxServer{fmt.Sprint(port), meteredIperfServer(t, ns, port)}
		port++
	}
	for _, bg := range bgs {
		if bg.iperf {
			add(p.B, bg.name)
		}
	}
	for _, fg := range mxForegrounds {
		for _, dir := range dirs {
			if fg.iperf && dir == "up" {
				add(p.B, fg.name)
			} else if fg.iperf {
				add(p.A, fg.name)
			}
		}
	}
	return b
}

func (b *mxBed) server(ns *testutil.NetNS, name string) mxServer {
	return b.servers[ns.Name+"/"+name]
}

// mxBackground is a background transport: start in a direction.
type mxBackground struct {
	name  string
	iperf bool // an iperf3 client: its uploads need B's server
	start func(t *testing.T, b *mxBed, dir string) *running
}

func (b *mxBed) run() []string {
	return []string{lanesBin, "run", "--socket", b.sock, "--lane", "background", "--"}
}

// bgIperf is an iperf3 background to its server on B: an upload metered
// by the server, a download (-R) by the client.
func bgIperf(name string, args ...string) mxBackground {
	return mxBackground{name, true, func(t *testing.T, b *mxBed, dir string) *running {
		srv := b.server(b.p.B, name)
		a := append([]string{"-c", b.p.AddrB.String(), "-p", srv.port}, args...)
		if dir == "up" {
			r := startIperf(t, b.p.A, b.run(), a...)
			return &running{meter: srv, stop: r.stop}
		}
		return startIperf(t, b.p.A, b.run(), append(a, "-R")...)
	}}
}

var mxBackgrounds = []mxBackground{
	bgIperf("TCP (system CC)"),
	bgIperf("TCP (app sets CUBIC)", "-C", "cubic"),
	{"QUIC (quic-go)", false, func(t *testing.T, b *mxBed, dir string) *running {
		q := startQUICBulk(t, b.p, dir, b.run()...)
		return &running{meter: quicMeter{q, time.Now()}, stop: q.stop}
	}},
	bgIperf("UDP (unresponsive, 20 Mbit/s)", "-u", "-b", "20M", "-l", "1200"),
}

// mxForeground is a steady foreground: start in a direction; none is
// the background alone.
type mxForeground struct {
	name  string
	iperf bool
	start func(t *testing.T, b *mxBed, dir string) *running
}

// fgIperf is an iperf3 foreground at 40 % of the link: an upload from A
// to its server on B, a download from B to its server on A (so a paced
// stream is paced by its sender: iperf3 -R does not pass --fq-rate to
// the server).
func fgIperf(name string, args ...string) mxForeground {
	return mxForeground{name, true, func(t *testing.T, b *mxBed, dir string) *running {
		rate := fmt.Sprint(int(0.4 * b.link))
		a := append([]string{}, args...)
		for i := range a {
			a[i] = strings.ReplaceAll(a[i], "RATE", rate)
		}
		from, to, addr := b.p.A, b.p.B, b.p.AddrB
		if dir != "up" {
			from, to, addr = b.p.B, b.p.A, b.p.AddrA
		}
		srv := b.server(to, name)
		r := startIperf(t, from, nil, append([]string{"-c", addr.String(), "-p", srv.port}, a...)...)
		return &running{meter: srv, stop: r.stop}
	}}
}

var mxForegrounds = []mxForeground{
	fgIperf("a UDP call (constant rate, 40 %)", "-u", "-b", "RATE", "-l", "1200"),
	fgIperf("a paced TCP stream (40 %)", "--fq-rate", "RATE"),
	{"a connection every 300 ms", false, churnForeground},
}

// churnForeground opens a connection to B every mxChurnEvery (a GET of
// mxChurnBytes; the direction is the GET's, whichever the background's).
// stop kills a GET still running (behind a flooded link it can take
// minutes).
func churnForeground(t *testing.T, b *mxBed, _ string) *running {
	n, quit, done := &atomic.Int64{}, make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var cur *exec.Cmd
	go func() {
		defer close(done)
		tick := time.NewTicker(mxChurnEvery)
		defer tick.Stop()
		for {
			cmd := b.p.A.Command(lanesBin, "lab", "helper", "get", "--url", b.base, "--bytes", fmt.Sprint(mxChurnBytes))
			mu.Lock()
			select {
			case <-quit:
				mu.Unlock()
				return
			default:
			}
			err := cmd.Start()
			cur = cmd
			mu.Unlock()
			if err == nil && cmd.Wait() == nil {
				n.Add(1)
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			mu.Lock()
			close(quit)
			if cur != nil && cur.Process != nil {
				_ = cur.Process.Kill()
			}
			mu.Unlock()
			<-done
		})
	}
	t.Cleanup(stop)
	return &running{meter: churnMeter{n, time.Now()}, stop: stop}
}

// mxCell is one measurement: the background beside a foreground (or
// alone), its probe against the baseline's.
type mxCell struct {
	bg, fg, dir               string
	bgRate, fgAlone, fgBeside float64
	baseP95, p95              time.Duration
	lost                      int
	mode, nonTCP              string
}

func (c mxCell) share(link float64) float64 { return c.bgRate / (link - c.fgAlone) }

// mxBaseline is a foreground alone: its rate and the probe beside it.
type mxBaseline struct {
	rate float64
	p95  time.Duration
}

// probeWithState runs the probe and, half-way, reads what steers the
// background: the yield's mode on A's link, the QUIC/UDP class's episode.
func probeWithState(t *testing.T, b *mxBed) (p95 time.Duration, lost int, mode, nonTCP string) {
	t.Helper()
	ch := make(chan [2]string, 1)
	go func() {
		time.Sleep(mxProbes * 20 * time.Millisecond / 2)
		m, n := mxSteering(b.sock)
		ch <- [2]string{m, n}
	}()
	d, lost := probeFastN(t, b.p, mxProbes, mxProbeTail)
	s := <-ch
	if len(d) == 0 {
		return time.Hour, lost, s[0], s[1]
	}
	return pct(d, .95), lost, s[0], s[1]
}

// mxSteering is the yield's mode/cause and the class's episode, briefly
// (no *testing.T: it runs beside the probe).
func mxSteering(sock string) (mode, nonTCP string) {
	c, err := client.Dial(sock)
	if err != nil {
		return err.Error(), ""
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil {
		return err.Error(), ""
	}
	mode = "free"
	var ys yield.Status
	if json.Unmarshal(st.Details["background"], &ys) == nil {
		for _, is := range ys.Interfaces {
			mode = is.Mode
			if is.Cause != "" {
				mode += "/" + is.Cause
			}
		}
	}
	var bs bgudp.Status
	nonTCP = "no episode"
	if json.Unmarshal(st.Details["background-udp"], &bs) == nil {
		for _, e := range bs.Running {
			nonTCP = fmt.Sprintf("%s: rate %.2f Mbit/s, held %v, sharing %v, blind %v", e.Controlled, float64(e.Rate)*8/1e6, e.Held, e.Sharing, e.Blind)
		}
	}
	return mode, nonTCP
}

// mxRun runs the matrix on b in each direction of dirs.
func mxRun(t *testing.T, b *mxBed, dirs []string, bgs []mxBackground) []mxCell {
	var cells []mxCell
	for _, dir := range dirs {
		base := map[string]mxBaseline{}
		t.Run(dir+"load, foregrounds alone", func(t *testing.T) {
			idleP95, lost, _, _ := probeWithState(t, b)
			base[""] = mxBaseline{0, idleP95}
			t.Logf("idle probe p95 %v, lost %d of %d", idleP95, lost, mxProbes)
			for _, fg := range mxForegrounds {
				r := fg.start(t, b, dir)
				time.Sleep(mxSettleFg)
				m0b, m0s := r.read()
				p95, lost, _, _ := probeWithState(t, b)
				m1b, m1s := r.read()
				r.stop()
				rate := 0.0
				if m1s > m0s {
					rate = (m1b - m0b) * 8 / (m1s - m0s)
				}
				base[fg.name] = mxBaseline{rate, p95}
				t.Logf("%s alone: %.2f Mbit/s, probe p95 %v, lost %d of %d", fg.name, rate/1e6, p95, lost, mxProbes)
			}
		})
		for _, bg := range bgs {
			t.Run(dir+"load, "+bg.name, func(t *testing.T) {
				cells = append(cells, mxBackgroundCells(t, b, dir, bg, base)...)
			})
		}
	}
	return cells
}

// mxBackgroundCells starts one background and measures it alone and
// beside each foreground.
func mxBackgroundCells(t *testing.T, b *mxBed, dir string, bg mxBackground, base map[string]mxBaseline) []mxCell {
	r := bg.start(t, b, dir)
	defer func() { r.stop(); time.Sleep(mxDrain) }()
	time.Sleep(mxSettleBg)
	alone := mxCell{bg: bg.name, fg: "nothing (the probe only)", dir: dir, baseP95: base[""].p95}
	alone.bgRate = rateOver(r, mxAlone)
	alone.p95, alone.lost, alone.mode, alone.nonTCP = probeWithState(t, b)
	cells := []mxCell{alone}
	for _, fg := range mxForegrounds {
		c := mxCell{bg: bg.name, fg: fg.name, dir: dir, baseP95: base[fg.name].p95, fgAlone: base[fg.name].rate}
		f := fg.start(t, b, dir)
		time.Sleep(mxSettleFg)
		if strings.Contains(fg.name, "paced") { // a foreground the yield reads
			mxStatusSays(t, b, bg.name)
		}
		b0, s0 := r.read()
		f0, g0 := f.read()
		c.p95, c.lost, c.mode, c.nonTCP = probeWithState(t, b)
		b1, s1 := r.read()
		f1, g1 := f.read()
		f.stop()
		if s1 > s0 {
			c.bgRate = (b1 - b0) * 8 / (s1 - s0)
		}
		if g1 > g0 {
			c.fgBeside = (f1 - f0) * 8 / (g1 - g0)
		}
		cells = append(cells, c)
	}
	for i := range cells {
		mxJudge(t, b, &cells[i])
	}
	return cells
}

// mxJudge prints a cell beside its goals and holds what is robust on a
// loaded 2-core machine: no probe lost; the foreground's p95 within
// mxHarmBound of the same foreground alone, and its rate at least half
// its rate alone; the background moving beside every steady foreground
// and alone (beside the paced stream its RTT samples tell it unharmed;
// beside the UDP call the background's own delay does). An unresponsive
// UDP download is judged by nothing: no device slows its sender.
func mxJudge(t *testing.T, b *mxBed, c *mxCell) {
	t.Helper()
	unresponsive := strings.HasPrefix(c.bg, "UDP") && c.dir == "down"
	t.Logf("%sload %s beside %s: background %.2f Mbit/s = %.2f of the idle %.2f (goal >= 0.90; >= 0.50 beside the churn); foreground %.2f Mbit/s alone, %.2f beside; probe p95 %v against %v without background (%+v, goal <= +5ms); lost %d of %d (goal 0); yield %s; QUIC/UDP %s",
		c.dir, c.bg, c.fg, c.bgRate/1e6, c.share(b.link), (b.link-c.fgAlone)/1e6, c.fgAlone/1e6, c.fgBeside/1e6,
		c.p95, c.baseP95, c.p95-c.baseP95, c.lost, mxProbes, c.mode, c.nonTCP)
	if unresponsive {
		return
	}
	if c.lost > 0 {
		t.Errorf("%sload %s beside %s: %d probes lost", c.dir, c.bg, c.fg, c.lost)
	}
	switch {
	case c.fgAlone > 0 && c.fgBeside == 0:
		t.Errorf("%sload %s beside %s: the foreground moved nothing beside the background", c.dir, c.bg, c.fg)
	case c.fgBeside < c.fgAlone/2:
		testutil.TimingErrorf(t, "%sload %s beside %s: the foreground at %.2f Mbit/s, %.2f alone", c.dir, c.bg, c.fg, c.fgBeside/1e6, c.fgAlone/1e6)
	}
	if d := c.p95 - c.baseP95; d > mxHarmBound {
		testutil.TimingErrorf(t, "%sload %s beside %s: probe p95 %+v over the foreground alone", c.dir, c.bg, c.fg, d)
	}
	steady := !strings.Contains(c.fg, "every 300 ms")
	if steady && c.share(b.link) < 0.01 {
		t.Errorf("%sload %s beside %s: background %.3f of the idle capacity: held at zero where the rule shares", c.dir, c.bg, c.fg, c.share(b.link))
	}
}

// mxStatusSays checks that `lanes status` says, on A's interface, what
// steers the background and the share it keeps: the TCP lane's signal
// ("background now:"), and for QUIC/UDP the class's episode now.
func mxStatusSays(t *testing.T, b *mxBed, bg string) {
	t.Helper()
	out, err := b.p.A.Command(lanesBin, "status", "-v", "--socket", b.sock).Output()
	if err != nil {
		t.Fatalf("lanes status: %v %s", err, out)
	}
	var now, udp string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "background now: "); ok {
			now = v
		}
		if v, ok := strings.CutPrefix(l, "background QUIC/UDP: "); ok {
			udp = v
		}
	}
	t.Logf("lanes status: background now: %s", now)
	switch {
	case strings.HasPrefix(now, "held at the minimum"):
	case strings.HasPrefix(now, "free:") || strings.HasPrefix(now, "sharing:"):
		if !strings.Contains(now, "of queue") {
			t.Errorf("lanes status names no share for the background: %q", now)
		}
	default:
		t.Errorf("lanes status says no signal for the background on %s: %q\n%s", b.p.LinkA, now, out)
	}
	if strings.HasPrefix(bg, "QUIC") || strings.HasPrefix(bg, "UDP") {
		i := strings.Index(udp, "; now: ")
		t.Logf("lanes status: background QUIC/UDP now: %s", udp[max(i, 0):])
		if i < 0 || strings.HasPrefix(udp[i:], "; now: no such traffic") {
			t.Errorf("lanes status says nothing of the running QUIC/UDP class: %q", udp)
		}
	}
}

// mxTable prints the cells as docs/results rows.
func mxTable(t *testing.T, b *mxBed, cells []mxCell) {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("\n| direction | background | foreground | bg ÷ idle | probe p95 − fg alone | lost | yield |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range cells {
		fmt.Fprintf(&sb, "| %s | %s | %s | %.2f | %+.1f ms | %d | %s |\n", c.dir, c.bg, c.fg, c.share(b.link),
			float64(c.p95-c.baseP95)/float64(time.Millisecond), c.lost, c.mode)
	}
	t.Log(sb.String())
}
