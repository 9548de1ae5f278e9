// rledbat_test.go: background downloads at a remote bottleneck held back by
// the daemon's own rLEDBAT (internal/rledbat), the fallback for kernels
// whose sock_ops cannot set TCP_WINDOW_CLAMP, forced here with
// `--without rledbat`. The topology and policy of
// TestBackgroundDownloadRemoteBottleneck (remote_test.go):
//
//	phone A (lanes daemon, default policy) ── router R ── server B
//	          R's egress r-a: TBF 10 Mbit/s, 600 KB buffer (480 ms)
//
// In one run: the probe idle, under a background download without lanes,
// with the BPF rLEDBAT, and with the daemon's; asserted for the daemon's
// (ratios against the same run's no-lanes figure, loose bounds), logged
// for all.
package daemon_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/procstat"
	"github.com/lanes-net/lanes/internal/rledbat"
	"github.com/lanes-net/lanes/internal/testutil"
)

// downloadRun is what one daemon configuration gives.
type downloadRun struct {
	alone, fg float64 // background alone, an interactive download under it, bit/s
	probe     []time.Duration
	st        *api.Status
}

// backgroundDownloads measures, under a daemon at sock: a background
// download alone, the probe under an endless one, and an interactive
// download competing with it.
func backgroundDownloads(t *testing.T, p *testutil.Path, sock, base string) downloadRun {
	t.Helper()
	var r downloadRun
	alone := backgroundRequest(t, p.A, sock, "get", base, 6<<20)
	r.alone = float64(alone.Bytes) * 8 / alone.Seconds
	dl := start(t, p.A, "run", "--socket", sock, "--lane", "background", "--", lanesBin, "lab", "helper", "get", "--url", base, "--bytes", "2000000000")
	defer func() { dl.cmd.Process.Kill(); dl.cmd.Wait() }()
	time.Sleep(4 * time.Second)
	r.probe = probe(t, p, 30)
	fg := request(t, p.A, "get", base, 4<<20)
	r.fg = float64(fg.Bytes) * 8 / fg.Seconds
	r.st = status(t, sock)
	return r
}

func TestBackgroundDownloadDaemonRLEDBAT(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, downlinkBottleneck)
	idle := probe(t, p, 10)

	// Without lanes: the download fills R's buffer toward A.
	dl := start(t, p.A, "lab", "helper", "get", "--url", base, "--bytes", "2000000000")
	time.Sleep(3 * time.Second)
	off := probe(t, p, 20) // 1 s: across CUBIC's sawtooth in R's buffer
	dl.cmd.Process.Kill()
	dl.cmd.Wait()
	time.Sleep(time.Second)

	// The BPF rLEDBAT, for the figures (TestBackgroundDownloadRemoteBottleneck
	// asserts it).
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	cpu0 := cpuTime(d.cmd.Process.Pid)
	bpf := backgroundDownloads(t, p, sock, base)
	bpfCPU := cpuTime(d.cmd.Process.Pid) - cpu0
	d.stop(t, syscall.SIGTERM)
	time.Sleep(time.Second)

	// The daemon's rLEDBAT.
	d, sock = startDaemon(t, p.A, string(policy.DefaultYAML()), "--without", "rledbat")
	cpu0 = cpuTime(d.cmd.Process.Pid)
	dm := backgroundDownloads(t, p, sock, base)
	dmCPU := cpuTime(d.cmd.Process.Pid) - cpu0

	t.Logf("probe RTT p50/p95: idle %v/%v; background download: without lanes %v/%v, BPF rLEDBAT %v/%v, daemon rLEDBAT (every %v) %v/%v",
		pct(idle, .5), pct(idle, .95), pct(off, .5), pct(off, .95), pct(bpf.probe, .5), pct(bpf.probe, .95),
		rledbat.DefaultInterval, pct(dm.probe, .5), pct(dm.probe, .95))
	t.Logf("background alone: BPF %.2f Mbit/s, daemon %.2f Mbit/s; interactive download under it: BPF %.2f Mbit/s, daemon %.2f Mbit/s",
		bpf.alone/1e6, dm.alone/1e6, bpf.fg/1e6, dm.fg/1e6)
	t.Logf("daemon CPU time over the measurement (about 10 s): BPF rLEDBAT %v, daemon rLEDBAT %v", bpfCPU, dmCPU)
	it := dm.st.Interfaces[0]
	t.Logf("daemon: %s; downloads: %s; protection: %s", dm.st.Components["rledbat"], it.Downloads, it.Protection)

	if c := dm.st.Capabilities["rledbat"]; c == "on" {
		t.Fatalf("--without rledbat left the BPF rLEDBAT on")
	}
	if !strings.Contains(it.Downloads, "from the daemon") || !strings.Contains(it.Protection, "rLEDBAT (daemon") {
		t.Errorf("status says downloads are held back by %q, foreground protected by %q; want the daemon's rLEDBAT", it.Downloads, it.Protection)
	}
	var rs rledbat.Stats
	if err := json.Unmarshal(dm.st.Details["rledbat"], &rs); err != nil || rs.Set == 0 {
		t.Fatalf("the daemon's rLEDBAT set no window clamp: %v %s", err, dm.st.Details["rledbat"])
	}
	if dm.st.Interfaces[0].Sockops["rwnd_set"] != 0 {
		t.Errorf("sock_ops set receive windows although its rLEDBAT was off: %v", dm.st.Interfaces[0].Sockops)
	}
	if ratio := float64(pct(off, .5)) / float64(pct(dm.probe, .5)); ratio < 5 {
		t.Errorf("probe p50 with the daemon's rLEDBAT %v is only %.1fx better than without lanes (%v); want >= 5x", pct(dm.probe, .5), ratio, pct(off, .5))
	}
	if dm.alone < 0.5*remoteLinkBps {
		t.Errorf("background download alone at %.2f Mbit/s; want >= 5 (work conserving)", dm.alone/1e6)
	}
	if dm.fg < 0.6*remoteLinkBps {
		t.Errorf("interactive download under background at %.2f Mbit/s; want >= 6 (it takes the link)", dm.fg/1e6)
	}
}

// TestDownloadProtectionStatus: lanes status names what holds background
// downloads back: the BPF rLEDBAT where sock_ops may set TCP_WINDOW_CLAMP,
// the daemon's where it may not (--without rledbat), and none, with why,
// where neither runs (--without rledbat_daemon as well); and sock_ops off
// leaves the daemon's rLEDBAT without background sockets to find.
func TestDownloadProtectionStatus(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	for _, c := range []struct {
		flags []string
		want  []string
	}{
		{nil, []string{defaultDownloads()}},
		{[]string{"--without", "rledbat"}, []string{"rLEDBAT from the daemon", "every 50ms", "BPF rLEDBAT off: left off (--without)"}},
		{[]string{"--without", "rledbat", "--without", "rledbat_daemon"}, []string{"none: ", "--without rledbat_daemon"}},
		{[]string{"--without", "sock_ops"}, []string{"none: ", "sock_ops is off"}},
	} {
		d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA), c.flags...)
		st := status(t, sock)
		got := st.Interfaces[0].Downloads
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: background downloads held back by %q; want %q in it", c.flags, got, w)
			}
		}
		_, running := st.Components["rledbat"]
		if daemon := strings.Contains(got, "from the daemon"); running != daemon {
			t.Errorf("%v: rledbat component running %v, status %q", c.flags, running, got)
		}
		d.stop(t, syscall.SIGTERM)
	}
}

// defaultDownloads is what holds background downloads back by default:
// rLEDBAT in BPF where sock_ops may set TCP_WINDOW_CLAMP (5.11+), else the
// daemon's (sockops.HaveWindowClamp, the datapath's own test).
func defaultDownloads() string {
	if sockops.HaveWindowClamp() != nil {
		return "rLEDBAT from the daemon"
	}
	return "rLEDBAT in BPF"
}

// cpuTime is the user + system time a process has used (/proc/PID/stat),
// 0 if it cannot be read.
func cpuTime(pid int) time.Duration {
	st, _ := procstat.Read(pid)
	return st.CPU()
}
