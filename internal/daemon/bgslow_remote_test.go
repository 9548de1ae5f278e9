// bgslow_remote_test.go: background on slow links, default policy. A ── R
// ── B with R's TBF at 0.2, 0.5 or 1 Mbit/s holding 100-500 ms of it toward
// the background's bottleneck side; background TCP (iperf3) and QUIC
// (quic-go) up and down, the UDP echo probe every 50 ms. Each case: the
// probe idle and a 10 KB foreground transfer alone; the background alone
// (probe p95 over idle, probes lost, its share of the link); the 10 KB
// transfer beside it; then an interactive bulk flow (iperf3) in the
// background's direction, its share of the link. The goals (issue figure:
// p95 over idle <= 25 ms plus two packet times, 0 lost, the bulk >= 0.90,
// completions <= 1.10) are printed; held: no probe lost, the p95 within
// the whole buffer over idle, the uploads' bulk at slowBulkMin of the link
// (a download's is printed only: its held receive window cannot go below
// the kernel's TCP_WINDOW_CLAMP floor, about 2.3 KB a round trip).
package daemon_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

const (
	slowProbes = 40 // every 50 ms: 2 s
	// slowSettle: the background alone before the probe. At 2.5 s a
	// quic-go download on 0.2 Mbit/s lost a probe in 2 of 2 runs (its
	// first seconds fill 500 ms of buffer: docs/results/background.md)
	slowSettle  = 3 * time.Second
	slowBulkFor = 3 * time.Second
	// slowBulkSettle: the bulk's start, the background's mode sampled
	slowBulkSettle = time.Second
	slowFgBytes    = 10 << 10
	slowFgReps     = 3
	// slowBulkMin bounds an interactive bulk upload's share of the link
	// beside background held (goal 0.90): 2 segments a round trip unpaced would
	// be 0.16-0.4 of a 0.2 Mbit/s link behind a 300 ms queue; the hold
	// paces them at 1/16 of the link estimate (0.96-0.98 measured)
	slowBulkMin = 0.8
)

// slowCase is one link and background.
type slowCase struct {
	transport, dir string // tcp, quic; up, down
	bps            float64
	buffer         time.Duration
}

func (c slowCase) String() string {
	return fmt.Sprintf("%s %sload, %.1f Mbit/s, %v of buffer", c.transport, c.dir, c.bps/1e6, c.buffer)
}

// packetTimes is two 1,500-byte packets' time on the link.
func (c slowCase) packetTimes() time.Duration {
	return time.Duration(2 * 1500 * 8 / c.bps * float64(time.Second))
}

func TestBackgroundTCPSlowLinkUploadRemote(t *testing.T) {
	slowLink(t, slowCase{"tcp", "up", 0.2e6, 300 * time.Millisecond})
}

func TestBackgroundTCPSlowLinkDownloadRemote(t *testing.T) {
	slowLink(t, slowCase{"tcp", "down", 1e6, 100 * time.Millisecond})
}

func TestBackgroundQUICSlowLinkUploadRemote(t *testing.T) {
	slowLink(t, slowCase{"quic", "up", 0.5e6, 200 * time.Millisecond})
}

func TestBackgroundQUICSlowLinkDownloadRemote(t *testing.T) {
	slowLink(t, slowCase{"quic", "down", 0.2e6, 500 * time.Millisecond})
}

// slowFigures are one case's measurements.
type slowFigures struct {
	idle, on            []time.Duration
	lost                int
	bgShare, busy, bulk float64
	bgBeside            float64        // the background beside the bulk, of the link
	bulkIperf           float64        // the bulk by iperf3's intervals
	modes               map[string]int // the background's, the bulk settling
	fgAlone, fgBeside   float64        // median seconds of the 10 KB transfer
	retransAlone        int            // A's TCP segments retransmitted over the transfers alone
	retransBeside       int            // and beside the background
}

func slowLink(t *testing.T, c slowCase) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p := testutil.NewRoutedPath(t)
	dev := "r-a"
	if c.dir == "up" {
		dev = p.LinkRB
	}
	limit := fmt.Sprint(int(c.bps / 8 * c.buffer.Seconds()))
	tbfRate := fmt.Sprintf("%dkbit", int(c.bps/1e3))
	if out, err := p.R.Command("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", tbfRate, "burst", "3000", "limit", limit).CombinedOutput(); err != nil {
		t.Fatalf("tbf: %v %s", err, out)
	}
	start(t, p.B, "lab", "helper", "echo", "--listen", ":7")
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	bgSrv, bulkSrv := meteredIperfServer(t, p.B, 5311), meteredIperfServer(t, p.B, 5312)
	if c.transport == "quic" {
		start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	}
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String())
		}
	}()
	var f slowFigures
	f.idle, _ = probeCount(t, p, slowProbes)
	fgURL := fmt.Sprintf("http://%s:8080", p.AddrB)
	r0 := tcpRetrans(t, p.A)
	f.fgAlone = slowFg(t, p, c.dir, fgURL)
	f.retransAlone = tcpRetrans(t, p.A) - r0

	bgRun := []string{lanesBin, "run", "--socket", sock, "--lane", "background", "--"}
	var bg *running
	if c.transport == "quic" {
		q := startQUICBulk(t, p, c.dir, bgRun...)
		bg = &running{quicMeter{q, time.Now()}, q.stop}
	} else {
		bg = slowIperf(t, p, bgRun, 5311, c.dir, bgSrv)
	}
	time.Sleep(slowSettle)
	b0, s0 := bg.read()
	t0, sent0 := time.Now(), tbfSent(t, p, dev)
	f.on, f.lost = probeCount(t, p, slowProbes)
	b1, s1 := bg.read()
	f.bgShare = rate(b0, s0, b1, s1) / c.bps
	f.busy = (tbfSent(t, p, dev) - sent0) * 8 / time.Since(t0).Seconds() / c.bps
	r0 = tcpRetrans(t, p.A)
	f.fgBeside = slowFg(t, p, c.dir, fgURL)
	f.retransBeside = tcpRetrans(t, p.A) - r0

	bulk := slowIperf(t, p, nil, 5312, c.dir, bulkSrv)
	f.modes = slowModes(t, sock, slowBulkSettle)
	b0, s0 = bg.read()
	t0, sent0 = time.Now(), tbfSent(t, p, dev)
	f.bulkIperf = rateOver(bulk, slowBulkFor) / c.bps
	b1, s1 = bg.read()
	f.bgBeside = rate(b0, s0, b1, s1) / c.bps
	// the bottleneck's bytes less the background's: iperf3's intervals
	// read up to 1.16 of a 0.2 Mbit/s link
	f.bulk = (tbfSent(t, p, dev)-sent0)*8/time.Since(t0).Seconds()/c.bps - f.bgBeside
	st := status(t, sock)
	t.Logf("background-udp: %s", st.Components["background-udp"])
	for _, it := range st.Interfaces {
		for _, a := range it.Account {
			t.Logf("account %s %s: %s, owner %s (%d ms ago), %d cause tests, %d not background",
				it.Name, a.Dir, a.Why, a.QueueOwner, a.TestedAgoMS, a.Tests, a.NotOurs)
		}
	}
	f.judge(t, c)
	var wg sync.WaitGroup // each may wait 2 s on the flooded link
	wg.Go(bulk.stop)
	wg.Go(bg.stop)
	wg.Wait()
}

// tcpRetrans is ns's TCP segments retransmitted so far (RetransSegs of
// /proc/net/snmp, per network namespace).
func tcpRetrans(t *testing.T, ns *testutil.NetNS) int {
	t.Helper()
	out, err := ns.Command("cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatalf("snmp in %s: %v", ns.Name, err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RetransSegs" && i < len(f) {
				v, err := strconv.Atoi(f[i])
				if err != nil {
					t.Fatalf("snmp RetransSegs %q: %v", f[i], err)
				}
				return v
			}
		}
	}
	t.Fatalf("snmp in %s: no Tcp RetransSegs", ns.Name)
	return 0
}

// probeCount probes n times and returns the RTTs and the number lost.
func probeCount(t *testing.T, p *testutil.Path, n int) ([]time.Duration, int) {
	d := probe(t, p, n)
	return d, n - len(d)
}

// slowIperf starts iperf3 in dir (up: metered at the server srv) under prefix.
func slowIperf(t *testing.T, p *testutil.Path, prefix []string, port int, dir string, srv *iperfMeter) *running {
	args := []string{"-c", p.AddrB.String(), "-p", fmt.Sprint(port)}
	if dir == "down" {
		return startIperf(t, p.A, prefix, append(args, "-R")...)
	}
	r := startIperf(t, p.A, prefix, args...)
	return &running{srv, r.stop}
}

// slowFg is the median seconds of slowFgReps foreground 10 KB transfers
// in dir (a POST up, a GET down).
func slowFg(t *testing.T, p *testutil.Path, dir, url string) float64 {
	kind := map[string]string{"up": "post", "down": "get"}[dir]
	var s []float64
	for range slowFgReps {
		s = append(s, request(t, p.A, kind, url, slowFgBytes).Seconds)
	}
	slices.Sort(s)
	return s[len(s)/2]
}

func (f slowFigures) judge(t *testing.T, c slowCase) {
	t.Helper()
	infl, goal := pct(f.on, .95)-pct(f.idle, .95), 25*time.Millisecond+c.packetTimes()
	t.Logf("%v: probe p50/p95 idle %v/%v, beside the background %v/%v (%+v, goal <= %v); lost %d of %d (goal 0)",
		c, pct(f.idle, .5), pct(f.idle, .95), pct(f.on, .5), pct(f.on, .95), infl, goal, f.lost, slowProbes)
	t.Logf("%v: background %.2f of the link alone (the bottleneck busy %.2f); an interactive bulk beside it %.2f of the link (goal >= 0.90; iperf3 reads %.2f), the background %.2f; a 10 KB foreground transfer %.0f ms alone, %.0f beside (%.2fx, goal <= 1.10)",
		c, f.bgShare, f.busy, f.bulk, f.bulkIperf, f.bgBeside, 1000*f.fgAlone, 1000*f.fgBeside, f.fgBeside/f.fgAlone)
	t.Logf("%v: the 10 KB transfers' TCP segments retransmitted from A: %d alone, %d beside the background",
		c, f.retransAlone, f.retransBeside)
	t.Logf("%v: the background's mode as the bulk starts, of %d samples: %v", c, slowModeN, f.modes)
	if f.lost > 0 {
		testutil.TimingErrorf(t, "%d probes lost", f.lost)
	}
	// loose for a loaded 2-core machine: the whole buffer over idle
	if infl > c.buffer {
		testutil.TimingErrorf(t, "probe p95 %+v over idle, over the whole buffer", infl)
	}
	if f.busy < 0.05 { // the background's meter: quic-bulk's lines are coarse
		t.Errorf("the bottleneck %.2f busy with the background alone: held near nothing", f.busy)
	}
	held := 0
	for k, n := range f.modes {
		if strings.HasPrefix(k, "held") {
			held += n
		}
	}
	switch {
	case c.dir == "up" && 2*held < slowModeN:
		// the cause test may rule the bulk's own queue "not ours" as it
		// starts and release the hold for 2 s (docs/results/background.md,
		// the slow-link download never held): #60's shortfall, logged; a
		// run held in under half the samples is that run (CI: held 2 of
		// 8, sharing 4, the bulk 0.79)
		t.Logf("an interactive bulk upload %.2f of the link beside background held in %d of %d samples as it started", f.bulk, held, slowModeN)
	case c.dir == "up" && f.bulk < slowBulkMin:
		testutil.TimingErrorf(t, "an interactive bulk upload %.2f of the link beside background held, want >= %.2f", f.bulk, slowBulkMin)
	}
}

const slowModeN = 8

// slowModes samples the background's mode per interface slowModeN times
// over d: "held/harm/down" (sampleDirModes without the readings).
func slowModes(t *testing.T, sock string, d time.Duration) map[string]int {
	out := map[string]int{}
	for k, n := range sampleDirModes(t, sock, slowModeN, d/slowModeN) {
		if !strings.Contains(k, " ") {
			out[k] += n
		}
	}
	return out
}
