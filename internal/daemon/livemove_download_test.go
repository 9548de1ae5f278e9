// livemove_download_test.go: a running download moved into background
// gets rLEDBAT's receive window at once, and moved back, its window clamp
// released (issue #51: moving back restores everything), as root in fresh
// namespaces, the daemon in A's network namespace, B → A through R's
// 10 Mbit/s TBF (remote_test.go).
package daemon_test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestMoveOpenDownload(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	if err := sockops.HaveWindowClamp(); err != nil {
		t.Skipf("rLEDBAT in sock_ops needs TCP_WINDOW_CLAMP from bpf_setsockopt: %v", err)
	}
	if !kernelAtLeast(6, 12) {
		t.Skip("an open download asks for rLEDBAT's callback by bpf_setsockopt(TCP_BPF_SOCK_OPS_CB_FLAGS) from the live iterator: Linux 6.12+")
	}
	p, base := remotePath(t, downlinkBottleneck)
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	if c := status(t, sock).Capabilities; c["live_cc"] != "on" || c["rledbat"] != "on" {
		t.Skipf("live_cc %q, rledbat %q: no live move of a download's receive window", c["live_cc"], c["rledbat"])
	}
	dl := start(t, p.A, "lab", "helper", "get", "--url", base, "--bytes", "2000000000")
	pid := dl.cmd.Process.Pid
	time.Sleep(3 * time.Second) // past slow start
	before := tcpOptOf(t, pid, 8080, unix.TCP_WINDOW_CLAMP)
	clampAfter := func(ln string) int {
		// in A's network namespace only (see moveOnce); a download's
		// packets on A are its ACKs: no lane class byte to wait for
		out, err := exec.Command("nsenter", "--net="+p.A.Path(), lanesBin, "move", "--socket", sock, "--lane", ln, strconv.Itoa(pid)).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "open sockets 1 tcp") {
			t.Fatalf("lanes move --lane %s: %v %s, want its TCP socket", ln, err, out)
		}
		var c int
		// rLEDBAT sets the window at the socket's next segments: wait
		// for them, loosely
		for end := time.Now().Add(testutil.Patience(2 * time.Second)); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if c = tcpOptOf(t, pid, 8080, unix.TCP_WINDOW_CLAMP); (ln == "background") == (c < before) {
				break
			}
		}
		return c
	}
	bg := clampAfter("background")
	back := clampAfter("interactive")
	t.Logf("the open download's TCP_WINDOW_CLAMP: %d bytes before the move, %d in background (rLEDBAT), %d moved back", before, bg, back)
	if bg >= before {
		t.Errorf("moved into background: window clamp %d, not below the %d it had (rLEDBAT did not reach the open download)", bg, before)
	}
	if back <= bg || back < before {
		t.Errorf("moved back to interactive: window clamp %d, want it released (at least the %d it had before)", back, before)
	}
}

// kernelAtLeast compares the running kernel's release with major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return true
	}
	var maj, mnr int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &maj, &mnr)
	return maj > major || maj == major && mnr >= minor
}
