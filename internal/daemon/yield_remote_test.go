// yield_remote_test.go: the foreground-aware yield by itself, at a remote
// bottleneck (R's TBF, 600 KB: 480 ms at 10 Mbit/s), with and without it
// (`background: yield:`), on every kernel lanes runs on. The foreground is
// a small interactive GET (20 KB, a new connection) every 100 ms, beside a
// UDP probe every 50 ms that measures the RTT the foreground sees (the
// probe alone is no foreground activity: 2 packets per 100 ms, and fewer
// behind a full queue, as it waits for each echo).
//
//   - upload: the background socket keeps CUBIC (`congestion_control:
//     system`) and capcc is off (`--without cap_cc`), so nothing but the
//     yield's clamp (sock_ops TCP_BPF_SNDCWND_CLAMP) holds it: the case of
//     5.10-5.12, where capcc cannot load, without LEDBAT++. CUBIC lowers
//     cwnd to the clamp on its next ACK when the socket is cwnd-limited,
//     which a bulk upload filling a remote queue is.
//   - download: the default policy (rLEDBAT: in sock_ops from 5.11, the
//     daemon's with the receive buffer on 5.10), the yield holding the
//     receive window at its minimum.
package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

// probeEvery starts n UDP echo probes from A to B's echo server, one every
// interval; wait returns the RTTs (lost probes left out), sorted.
func probeEvery(t *testing.T, p *testutil.Path, n int, every time.Duration) (wait func() []time.Duration) {
	t.Helper()
	cmd := p.A.Command(lanesBin, "lab", "helper", "ping", "--to", fmt.Sprintf("%s:7", p.AddrB),
		"--count", fmt.Sprint(n), "--interval", every.String())
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() []time.Duration {
		t.Helper()
		err := cmd.Wait()
		var ms []float64
		if err != nil || json.Unmarshal(out.Bytes(), &ms) != nil || len(ms) < n/2 {
			t.Fatalf("ping: %v %s", err, out.Bytes())
		}
		d := make([]time.Duration, len(ms))
		for i, v := range ms {
			d[i] = time.Duration(v * float64(time.Millisecond))
		}
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d
	}
}

// yieldRun is one run of a background transfer under the fast probe.
type yieldRun struct {
	probe   []time.Duration
	bgAlone float64 // background bits/s before the probe
	bgUnder float64 // background bits/s while the probe runs
	yields  uint64  // sock_ops yield counter at the end
	yielded bool    // the daemon said it yielded during the probe
	// downHeld: the daemon said the foreground steers downloads (held, or
	// sharing: beside a present, unharmed foreground rLEDBAT keeps a
	// quarter of its target)
	downHeld bool
	fg       int // foreground GETs done during the probe
	upload   bool
	// heldByHarm: a status sample during the probe read the background
	// held by a harmed foreground (not only by an opening)
	heldByHarm bool
}

func (r yieldRun) String() string {
	if !r.upload { // the background lane's egress bytes are a download's ACKs
		return fmt.Sprintf("probe p50/p95 %v/%v (sock_ops yields %d, yielded %v), foreground GETs of 20 KB %d",
			pct(r.probe, .5), pct(r.probe, .95), r.yields, r.yielded, r.fg)
	}
	return fmt.Sprintf("probe p50/p95 %v/%v, background alone %.2f Mbit/s, under the foreground %.2f Mbit/s (sock_ops yields %d, yielded %v), foreground GETs of 20 KB %d",
		pct(r.probe, .5), pct(r.probe, .95), r.bgAlone/1e6, r.bgUnder/1e6, r.yields, r.yielded, r.fg)
}

// runYield starts a daemon with pol and flags, a background transfer
// (upload: bulk POST; download: GET), and then the foreground and the probe.
func runYield(t *testing.T, p *testutil.Path, base, pol string, upload bool, flags ...string) yieldRun {
	t.Helper()
	d, sock := startDaemon(t, p.A, pol, flags...)
	defer d.stop(t, syscall.SIGTERM)
	var bg *proc
	if upload {
		bg, _ = bulk(t, p.A, base, lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	} else {
		bg = start(t, p.A, "run", "--socket", sock, "--lane", "background", "--", lanesBin, "lab", "helper", "get", "--url", base, "--bytes", "2000000000")
	}
	defer func() { bg.cmd.Process.Kill(); bg.cmd.Wait(); time.Sleep(time.Second) }()
	r := yieldRun{upload: upload}
	time.Sleep(3 * time.Second) // fill R's queue (without the yield)
	b0, t0 := laneBytes(t, sock, "background"), time.Now()
	time.Sleep(2 * time.Second)
	b1, t1 := laneBytes(t, sock, "background"), time.Now()
	r.bgAlone = float64(b1-b0) * 8 / t1.Sub(t0).Seconds()
	stop, fgDone := make(chan struct{}), make(chan int)
	go func() { // the foreground: a small interactive GET every 100 ms
		n := 0
		for {
			select {
			case <-stop:
				fgDone <- n
				return
			default:
			}
			if p.A.Command(lanesBin, "lab", "helper", "get", "--url", base, "--bytes", "20000").Run() == nil {
				n++
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	r.yielded, r.downHeld = waitYielded(t, sock, upload, testutil.Patience(10*time.Second))
	// The probe judges whether the yield holds the transfer, not how soon it
	// comes (TestYieldReaction's): it starts once the daemon says it yields
	// (or, without the yield, after as long), when R's queue had 1 s to drain.
	time.Sleep(time.Second)
	harm := watchHarm(t, sock)
	r.probe = probeEvery(t, p, 40, 50*time.Millisecond)()
	r.heldByHarm = harm()
	close(stop)
	r.fg = <-fgDone
	r.bgUnder = float64(laneBytes(t, sock, "background")-b1) * 8 / time.Since(t1).Seconds()
	r.yields = status(t, sock).Interfaces[0].Sockops["yield"]
	return r
}

// watchHarm polls the daemon's yield status every 50 ms until the
// returned function is called, which says whether a sample read an
// interface held by harm (a status that fails to come counts as none).
func watchHarm(t *testing.T, sock string) func() bool {
	t.Helper()
	stop, seen := make(chan struct{}), make(chan bool)
	go func() {
		held := false
		for {
			select {
			case <-stop:
				seen <- held
				return
			case <-time.After(50 * time.Millisecond):
			}
			held = held || heldByHarm(sock)
		}
	}()
	return func() bool { close(stop); return <-seen }
}

// heldByHarm says whether the daemon's status reads an interface held by
// a harmed foreground.
func heldByHarm(sock string) bool {
	c, err := client.Dial(sock)
	if err != nil {
		return false
	}
	defer c.Close()
	st, err := c.Status()
	if err != nil {
		return false
	}
	var ys yield.Status
	if json.Unmarshal(st.Details["background"], &ys) != nil {
		return false
	}
	for _, i := range ys.Interfaces {
		if i.Cause == yield.CauseHarm {
			return true
		}
	}
	return false
}

// waitYielded polls the daemon's yield status every 100 ms until it says
// it yields (upload) or the foreground steers downloads (download), for at
// most limit; with yield: false it reports neither and waits 2 s.
func waitYielded(t *testing.T, sock string, upload bool, limit time.Duration) (yielded, downHeld bool) {
	t.Helper()
	for start := time.Now(); time.Since(start) < limit; {
		time.Sleep(100 * time.Millisecond)
		if len(status(t, sock).Details["background"]) == 0 { // yield: false
			if time.Since(start) >= 2*time.Second {
				return false, false
			}
			continue
		}
		for _, i := range yieldStatus(t, sock).Interfaces {
			yielded = yielded || i.Yielding
			downHeld = downHeld || i.Yielding || i.Mode == "sharing"
		}
		if upload && yielded || !upload && downHeld {
			return yielded, downHeld
		}
	}
	return yielded, downHeld
}

func yieldPolicy(cc string, on bool) string {
	return fmt.Sprintf("interfaces:\n  - name: default-route\n    mode: device-bottleneck\nbackground:\n  congestion_control: %s\n  yield: %v\n", cc, on)
}

// yieldOffOn measures the idle probe, then the same background transfer
// (an upload through the uplink's bottleneck or a download through the
// downlink's; cc, extra daemon flags) at a remote bottleneck with
// the yield off and on, and logs the three under name.
func yieldOffOn(t *testing.T, uplink bool, name, cc string, extra ...string) (idle []time.Duration, off, on yieldRun) {
	t.Helper()
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, uplink)
	idle = probeEvery(t, p, 20, 50*time.Millisecond)()
	off = runYield(t, p, base, yieldPolicy(cc, false), uplink, extra...)
	on = runYield(t, p, base, yieldPolicy(cc, true), uplink, extra...)
	t.Logf("idle probe p50/p95 %v/%v", pct(idle, .5), pct(idle, .95))
	t.Logf("%s, without the yield: %v", name, off)
	t.Logf("%s, with the yield:    %v", name, on)
	return idle, off, on
}

func TestYieldRemoteUploadClampAlone(t *testing.T) {
	sideBySide(t)
	_, off, on := yieldOffOn(t, uplinkBottleneck, "background CUBIC upload, clamp alone", "system", "--without", "cap_cc")
	if on.yields == 0 || !on.yielded {
		t.Fatalf("the foreground did not make the daemon yield: %v", on)
	}
	if off.yields != 0 {
		t.Errorf("yield: false still yielded: %v", off)
	}
	if !on.heldByHarm { // each GET a new connection: its path's minimum tells the queue
		t.Errorf("the upload was never held by the foreground's harm during the probe (only by openings): %v", on)
	}
	if ratio := float64(pct(off.probe, .5)) / float64(pct(on.probe, .5)); ratio < 5 {
		testutil.TimingErrorf(t, "probe p50 with the yield %v is only %.1fx better than without (%v); want >= 5x: the clamp does not hold the upload",
			pct(on.probe, .5), ratio, pct(off.probe, .5))
	}
}

// TestYieldRemoteDownload: beside the foreground's GETs the yield holds
// the background download, or keeps it sharing at the share target: the
// probe's p50 stays within the share target of idle, or under the
// download's without the yield. Without it rLEDBAT keeps its own target,
// whose p50 moves between 2 and 12 ms from run to run, at times under what
// sharing keeps: the two alone are no comparison.
func TestYieldRemoteDownload(t *testing.T) {
	sideBySide(t)
	idle, off, on := yieldOffOn(t, downlinkBottleneck, "background download, rLEDBAT", "ledbat")
	if !on.downHeld {
		t.Fatalf("the foreground did not make the daemon yield: %v", on)
	}
	bound := max(pct(off.probe, .5), pct(idle, .5)+yield.ShareTarget(10*time.Millisecond))
	if pct(on.probe, .5) > bound {
		testutil.TimingErrorf(t, "probe p50 with the yield %v, above both the %v without it and idle's %v plus the share target",
			pct(on.probe, .5), pct(off.probe, .5), pct(idle, .5))
	}
}
