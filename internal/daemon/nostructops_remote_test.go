package daemon_test

// nostructops_remote_test.go: the background lane at a remote bottleneck
// without struct_ops, as on a system whose BPF loader cannot attach them
// (Android's: docs/android.md): the daemon started with the struct_ops
// congestion controls off, default policy otherwise. What holds the
// background back there is sock_ops only (the yield's clamps, rLEDBAT's
// window). Paired with the struct_ops path, TestBackgroundUploadRemoteBottleneck
// and TestBackgroundDownloadRemoteBottleneck, whose figures it prints the same way.

import (
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// withoutStructOps are the daemon's flags for a kernel or loader without
// struct_ops: neither LEDBAT++ nor the cap congestion control.
var withoutStructOps = []string{"--without", "background_cc,cap_cc"}

func TestBackgroundUploadRemoteWithoutStructOps(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, base := remotePath(t, uplinkBottleneck)
	idle := probe(t, p, 10)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), withoutStructOps...)
	bulk(t, p.A, base, lanesBin, "run", "--socket", sock, "--lane", "background", "--") // stopped at cleanup
	time.Sleep(4 * time.Second)
	bg0, t0 := laneBytes(t, sock, "background"), time.Now()
	on := probe(t, p, 30)
	bgAlone := float64(laneBytes(t, sock, "background")-bg0) * 8 / time.Since(t0).Seconds()
	st := status(t, sock)
	t.Logf("without struct_ops: probe p95 %v above idle (p50/p95: idle %v/%v, background upload %v/%v); background alone %.2f Mbit/s (%.0f%% of the link)",
		pct(on, .95)-pct(idle, .95), pct(idle, .5), pct(idle, .95), pct(on, .5), pct(on, .95), bgAlone/1e6, 100*bgAlone/remoteLinkBps)
	t.Logf("background congestion control: %s; sock_ops %v; protection: %s", st.Interfaces[0].BackgroundCC, st.Interfaces[0].Sockops, st.Interfaces[0].Protection)
	checkDegraded(t, st.Interfaces[0].BackgroundCC, st.Interfaces[0].Sockops["bg_cc"])
}

func TestBackgroundDownloadRemoteWithoutStructOps(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	if err := sockops.HaveWindowClamp(); err != nil {
		t.Skipf("rLEDBAT in sock_ops needs TCP_WINDOW_CLAMP from bpf_setsockopt: %v", err)
	}
	p, base := remotePath(t, downlinkBottleneck)
	idle := probe(t, p, 10)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), withoutStructOps...)
	alone := backgroundRequest(t, p.A, sock, "get", base, 6<<20)
	bgAlone := float64(alone.Bytes) * 8 / alone.Seconds
	dl := start(t, p.A, "run", "--socket", sock, "--lane", "background", "--", lanesBin, "lab", "helper", "get", "--url", base, "--bytes", "2000000000")
	time.Sleep(4 * time.Second)
	on := probe(t, p, 30)
	st := status(t, sock)
	dl.cmd.Process.Kill()
	dl.cmd.Wait()
	t.Logf("without struct_ops: probe p95 %v above idle (p50/p95: idle %v/%v, background download %v/%v); background download alone %.2f Mbit/s (%.0f%% of the link, slow start included)",
		pct(on, .95)-pct(idle, .95), pct(idle, .5), pct(idle, .95), pct(on, .5), pct(on, .95), bgAlone/1e6, 100*bgAlone/remoteLinkBps)
	t.Logf("background congestion control: %s; sock_ops %v", st.Interfaces[0].BackgroundCC, st.Interfaces[0].Sockops)
	checkDegraded(t, st.Interfaces[0].BackgroundCC, st.Interfaces[0].Sockops["bg_cc"])
	if st.Interfaces[0].Sockops["rwnd_set"] == 0 {
		t.Errorf("rLEDBAT (sock_ops, no struct_ops) never set a background receive window: %v", st.Interfaces[0].Sockops)
	}
}

// checkDegraded: without struct_ops the daemon runs, names the system's
// congestion control and why, and switches no socket to LEDBAT++.
func checkDegraded(t *testing.T, cc string, switched uint64) {
	t.Helper()
	if !strings.HasPrefix(cc, "system: ") || switched != 0 {
		t.Errorf("background congestion control %q with %d sockets switched; want the system's, named with its reason, none switched", cc, switched)
	}
}
