// bgudp_remote_test.go: the background lane's non-TCP traffic at a remote
// bottleneck with the DEFAULT policy (remote_test.go's path: A ── R ── B,
// R's TBF 10 Mbit/s holding 600 KB). Each test runs the same traffic
// without lanes and with the daemon, probes B's UDP echo every 50 ms
// (below the yield's foreground threshold, so the delay controller is
// what is measured), and judges the probe's RTT inflation over idle, lost
// probes and the background's share of the link alone.
package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// probeN is probe's count; lost probes are counted by the caller.
const probeN = 60

// probeAll probes and returns the RTTs and the number lost.
func probeAll(t *testing.T, p *testutil.Path) ([]time.Duration, int) {
	d := probe(t, p, probeN)
	return d, probeN - len(d)
}

// bgJudge checks the probe under lanes against idle and without lanes.
func bgJudge(t *testing.T, what string, idle, off, on []time.Duration, lostOn, probes int, share float64) {
	t.Helper()
	inflOff, inflOn := pct(off, .95)-pct(idle, .95), pct(on, .95)-pct(idle, .95)
	t.Logf("%s: probe RTT p50/p95 idle %v/%v, without lanes %v/%v (+%v), with lanes %v/%v (+%v); lost with lanes %d of %d; background alone %.0f%% of the link",
		what, pct(idle, .5), pct(idle, .95), pct(off, .5), pct(off, .95), inflOff, pct(on, .5), pct(on, .95), inflOn, lostOn, probes, 100*share)
	// Margins for a loaded 2-core machine: the goals are +25 ms at p95 and
	// 70 % of the link alone; the test fails at +60 ms, where lanes takes
	// less than half off (unless within the goal: BBR without lanes adds
	// only ~20 ms on an idle machine, half of which a loaded machine's
	// jitter alone exceeds), or below 40 % of the link. Half, not 3/4:
	// alone the QUIC/UDP class keeps its own 10 ms target, and ngtcp2's
	// download, which its own window holds to +73-77 ms without lanes,
	// read +6 to +11 ms on an idle machine and +27 under the suite's load.
	if inflOn > 60*time.Millisecond || inflOn > inflOff/2 && inflOn > 25*time.Millisecond {
		testutil.TimingErrorf(t, "%s: probe p95 inflation +%v with lanes (without +%v)", what, inflOn, inflOff)
	}
	if lostOn > 0 {
		t.Errorf("%s: %d probes lost with lanes", what, lostOn)
	}
	// The share is a rate goal, not judged under emulation (in the 7.2 VM
	// the controller read TCG's echo jitter as queue: 30 %); a class held
	// near nothing is a defect anywhere.
	switch {
	case share < 0.05:
		t.Errorf("%s: background alone %.0f%% of the link, want >= 40%%", what, 100*share)
	case share < 0.4:
		testutil.TimingErrorf(t, "%s: background alone %.0f%% of the link, want >= 40%%", what, 100*share)
	}
}

// probeCost logs the controller's probing cost from its status document:
// probes and bytes (requests and replies) per second of the episode.
func probeCost(t *testing.T, st *api.Status) {
	t.Helper()
	var bs bgudp.Status
	if err := json.Unmarshal(st.Details["background-udp"], &bs); err != nil {
		t.Fatalf("background-udp status: %v", err)
	}
	for i, e := range bs.Running {
		secs := time.Since(e.Started).Seconds()
		t.Logf("probing cost on ifindex %d: %.1f probes/s, %.0f bytes/s (requests and replies) over %.1f s, %d lost",
			i, float64(e.Probes)/secs, float64(e.ProbeBytes)/secs, secs, e.Lost)
	}
}

// iperfServer runs iperf3's server in B until the test ends.
func iperfServer(t *testing.T, p *testutil.Path) {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed (scripts/deps.sh test)")
	}
	cmd := p.B.Command("iperf3", "-s", "-p", "5201")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "iperf3 server", func() bool { return listening(t, p.B, "tcp", 5201) })
}

// udpUpload starts an unresponsive UDP upload above the link's rate
// (iperf3 -u at 20 Mbit/s), under prefix, killed at the end of the test.
// Real-time (realTime): starved beside two busy loops and two other
// traffic tests, the class carried 18-19 % of the link in 2 runs of 3.
func udpUpload(t *testing.T, p *testutil.Path, secs int, prefix ...string) *exec.Cmd {
	t.Helper()
	args := append(append(append([]string{}, prefix...), realTime...), "iperf3", "-c", p.AddrB.String(), "-p", "5201", "-u", "-b", "20M", "-l", "1200", "-t", fmt.Sprint(secs))
	cmd := p.A.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestBackgroundUDPUploadRemote(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, _ := remotePath(t, uplinkBottleneck)
	iperfServer(t, p)
	idle, _ := probeAll(t, p)

	u := udpUpload(t, p, 7)
	time.Sleep(2 * time.Second)
	off, _ := probeAll(t, p)
	_ = u.Process.Kill()
	_ = u.Wait()
	time.Sleep(2 * time.Second) // R's queue drains

	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String()) // the controller's steps
		}
	}()
	udpUpload(t, p, 15, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	time.Sleep(4 * time.Second)
	bg0, t0 := laneBytes(t, sock, "background"), time.Now()
	on, lost := probeAll(t, p)
	share := float64(laneBytes(t, sock, "background")-bg0) * 8 / time.Since(t0).Seconds() / remoteLinkBps
	st := status(t, sock)
	t.Logf("background-udp: %s", st.Components["background-udp"])
	t.Logf("background QUIC/UDP: %s", st.Interfaces[0].NonTCP)
	probeCost(t, st)
	// held at the sample by the controller, or by the yield while the class's own
	// queue reads the probe's harm (a foreground no TCP sample speaks for)
	if nt := st.Interfaces[0].NonTCP; !strings.Contains(nt, "uploads held by delay controller") || !strings.Contains(nt, "now: egress held") {
		t.Errorf("status says background non-TCP is %q; want held by the delay controller or the yield now", nt)
	}
	bgJudge(t, "UDP upload", idle, off, on, lost, probeN, share)
	// iperf3 waits on the shaper, which drops none of its packets: held
	// under its measured link, but for the steps that find the link
	// again when the measurement ages out (every 2 s), and for 2 s after
	// a drop (the upload runs 15 s: 4 s to settle, 3 s of probes, this)
	under := false
	for end := time.Now().Add(5 * time.Second); !under && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		under = strings.Contains(status(t, sock).Components["background-udp"], "under its measured link")
	}
	if !under {
		t.Errorf("status never said the class is held under its measured link in 5 s: %s", status(t, sock).Components["background-udp"])
	}
}

// quicBulk is a running QUIC bulk transfer and its byte count.
type quicBulk struct {
	cmd   *exec.Cmd
	bytes atomic.Int64
}

// startQUICBulk starts `lab helper quic-bulk` from A to B's quic-serve
// under prefix, stopped at the end of the test.
func startQUICBulk(t *testing.T, p *testutil.Path, dir string, prefix ...string) *quicBulk {
	t.Helper()
	return startQUICBulkTo(t, p.A, fmt.Sprintf("%s:4433", p.AddrB), dir, prefix...)
}

// startQUICBulkTo starts `lab helper quic-bulk` in ns to a quic-serve at
// to, under prefix, stopped at the end of the test.
func startQUICBulkTo(t *testing.T, ns *testutil.NetNS, to, dir string, prefix ...string) *quicBulk {
	t.Helper()
	args := append(append([]string{}, prefix...), lanesBin, "lab", "helper", "quic-bulk", "--to", to, "--dir", dir)
	q := &quicBulk{cmd: ns.Command(args[0], args[1:]...)}
	out, err := q.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := q.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.stop)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l struct{ Bytes *int64 }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Bytes != nil {
				q.bytes.Store(*l.Bytes)
			}
		}
	}()
	return q
}

func (q *quicBulk) stop() {
	if q.cmd.ProcessState == nil {
		_ = q.cmd.Process.Kill()
		_ = q.cmd.Wait()
	}
}

// quicRemote runs a QUIC bulk transfer in dir over the remote path whose
// bottleneck is on that side, without lanes and in the background lane.
func quicRemote(t *testing.T, dir string, bottleneck bool) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, _ := remotePath(t, bottleneck)
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	idle, _ := probeAll(t, p)

	q := startQUICBulk(t, p, dir)
	time.Sleep(3 * time.Second)
	off, _ := probeAll(t, p)
	q.stop()
	time.Sleep(2 * time.Second) // R's queue drains

	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String())
		}
	}()
	q = startQUICBulk(t, p, dir, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	time.Sleep(4 * time.Second)
	// alone on the link: the share before the probe starts (the probe's
	// bursts can read as a present foreground, which holds the class)
	dev := "r-a"
	if bottleneck == uplinkBottleneck {
		dev = p.LinkRB
	}
	b0, s0, t0 := q.bytes.Load(), tbfSent(t, p, dev), time.Now()
	time.Sleep(3 * time.Second)
	secs := time.Since(t0).Seconds()
	share := float64(q.bytes.Load()-b0) * 8 / secs / remoteLinkBps
	link := (tbfSent(t, p, dev) - s0) * 8 / secs / remoteLinkBps
	on, lost := probeAll(t, p)
	st := status(t, sock)
	t.Logf("background-udp: %s", st.Components["background-udp"])
	probeCost(t, st)
	t.Logf("QUIC %sload alone: %.2f of the link in stream bytes, the bottleneck busy %.2f of the time (goal >= 0.90); probe p95 over idle +%v (goal <= 25ms)",
		dir, share, link, pct(on, .95)-pct(idle, .95))
	bgJudge(t, "QUIC "+dir+"load", idle, off, on, lost, probeN, share)
}

func TestBackgroundQUICUploadRemote(t *testing.T) { quicRemote(t, "up", uplinkBottleneck) }

func TestBackgroundQUICDownloadRemote(t *testing.T) { quicRemote(t, "down", downlinkBottleneck) }
