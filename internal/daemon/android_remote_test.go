// android_remote_test.go: an app's traffic follows its Android state, with
// the shipped example policy (examples/policies/android.yaml) and Android's
// cpuset groups emulated on a cgroup v1 hierarchy of the test's own
// (testutil.NewAndroidGroups), at the remote bottleneck of remote_test.go:
//
//	phone A (daemon, app uid 10123: an upload and a second process)
//	  ── router R (TBF 10 Mbit/s, 600 KB) ── server B
//
// The test writes the processes' ids into the groups' cgroup.procs as
// ActivityManager does. It checks the per-uid rule (one process in
// background while the other is top-app leaves the app's socket
// interactive) and that each move reaches the open socket; it logs the
// probe's delay beside the app's upload as top-app and as background, the
// app's rate in each state and back at the top, and the time from the
// write to the socket's new lane over 20 moves.
package daemon_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

const appUID = "10123"

// appReadableBin copies lanes where an app's uid may run it (the built
// one is in a folder only root may enter) and uses it for the test.
func appReadableBin(t *testing.T) {
	dir, err := os.MkdirTemp("", "lanes-appbin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(lanesBin)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "lanes")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err == nil {
		_, err = io.Copy(dst, src)
		dst.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	saved := lanesBin
	lanesBin = bin
	t.Cleanup(func() { lanesBin = saved })
}

// socketCookie is the cookie of A's established TCP socket from sport.
func socketCookie(t *testing.T, ns *testutil.NetNS, sport int) uint64 {
	var cookie uint64
	ns.Do(t, func() error {
		return tcpmon.DumpSockets(unix.IPPROTO_TCP, func(s *tcpmon.Sock) {
			if int(s.Src.Port()) == sport && s.State == 1 {
				cookie = s.Cookie
			}
		})
	})
	if cookie == 0 {
		t.Fatalf("no socket from port %d", sport)
	}
	return cookie
}

// waitLane polls the socket's lane until it is want and returns the time
// since t0 then; it fails the test after a generous wait.
func waitLane(t *testing.T, c *client.Client, cookie uint64, want lane.Lane, t0 time.Time) time.Duration {
	t.Helper()
	for {
		ls, err := c.SocketLanes([]uint64{cookie})
		if err != nil {
			t.Fatal(err)
		}
		if ls[cookie] == want {
			return time.Since(t0)
		}
		if time.Since(t0) > testutil.Patience(5*time.Second) {
			t.Fatalf("socket %d still in %v %v after the move, want %v", cookie, ls[cookie], time.Since(t0), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAndroidAppStateRemoteBottleneck(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	groups := testutil.NewAndroidGroups(t)
	appReadableBin(t)
	p, base := remotePath(t, uplinkBottleneck)
	pol, err := os.ReadFile("../../examples/policies/android.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d, sock := startDaemon(t, p.A, strings.Replace(string(pol), "default-route", p.LinkA, 1),
		"--android-cpuset", groups.Root)
	t.Cleanup(func() {
		if t.Failed() {
			_ = d.cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(time.Second)
			t.Logf("daemon:\n%s", d.out)
		}
	})
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	move := func(pid int, group string) time.Time {
		t.Helper()
		t0 := time.Now()
		if err := groups.Move(pid, group); err != nil {
			t.Fatal(err)
		}
		return t0
	}
	// The app's uid, keeping CAP_NET_ADMIN only so that its helpers may
	// ask for CUBIC (TestMain; a phone's default) where the machine's
	// allowed list lacks it; the sockets are the app uid's all the same.
	asApp := []string{"setpriv", "--reuid=" + appUID, "--regid=" + appUID, "--clear-groups",
		"--inh-caps=+net_admin", "--ambient-caps=+net_admin"}
	idle := probe(t, p, 10)

	// The app: a second process in top-app, then its upload, moved there too.
	// (ip netns exec and setpriv exec what they run: one pid each)
	other := p.A.Command(asApp[0], append(asApp[1:], "sleep", "600")...)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	otherPid := other.Process.Pid
	move(otherPid, "top-app")
	up, sport := bulk(t, p.A, base, asApp...)
	begin := time.Now()
	upPid := up.cmd.Process.Pid
	cookie := socketCookie(t, p.A, sport)
	waitLane(t, c, cookie, lane.Interactive, move(upPid, "top-app"))
	time.Sleep(2 * time.Second)
	i0, t0 := laneBytes(t, sock, "interactive"), time.Now()
	top := probe(t, p, 20)
	topRate := float64(laneBytes(t, sock, "interactive")-i0) * 8 / time.Since(t0).Seconds()

	// At t = 5 s the upload's process goes to background; the app's other
	// process is still top-app, so the app is not background.
	time.Sleep(time.Until(begin.Add(5 * time.Second)))
	move(upPid, "background")
	time.Sleep(300 * time.Millisecond)
	if l, _ := c.SocketLanes([]uint64{cookie}); l[cookie] != lane.Interactive {
		t.Fatalf("one of the app's processes in background, the other top-app: its upload is in %v, want interactive", l[cookie])
	}
	// Now the app: the other process follows, 20 times back and forth.
	var lat []time.Duration
	stages := map[string][]time.Duration{}
	for i := 0; i < 20; i++ {
		group, want := "background", lane.Background
		if i%2 == 1 {
			group, want = "top-app", lane.Interactive
		}
		t0 := move(otherPid, group)
		written := time.Now()
		lat = append(lat, waitLane(t, c, cookie, want, t0))
		stages["write"] = append(stages["write"], written.Sub(t0))
		addStages(t, c, t0, written, t0.Add(lat[i]), stages)
		time.Sleep(150 * time.Millisecond)
	}
	waitLane(t, c, cookie, lane.Background, move(otherPid, "background"))
	time.Sleep(3 * time.Second)
	b0, t0 := laneBytes(t, sock, "background"), time.Now()
	bg := probe(t, p, 30)
	bgRate := float64(laneBytes(t, sock, "background")-b0) * 8 / time.Since(t0).Seconds()
	// its congestion control's view in background alone (RTT against its
	// minimum: the queue it reads)
	ssBg, _ := p.A.Command("ss", "-tin", fmt.Sprintf("sport = :%d", sport)).CombinedOutput()

	// Beside a top-app's stream paced at 40 % of the link (a video, a
	// call over TCP): the background app's share of what it leaves idle.
	share, fgPaced := appShareBesidePaced(t, p, base, sock)

	// Back to the top: the rate comes back.
	waitLane(t, c, cookie, lane.Interactive, move(otherPid, "top-app"))
	time.Sleep(2 * time.Second)
	i0, t0 = laneBytes(t, sock, "interactive"), time.Now()
	time.Sleep(2 * time.Second)
	backRate := float64(laneBytes(t, sock, "interactive")-i0) * 8 / time.Since(t0).Seconds()
	// The upload's congestion control and window back at the top (ss).
	ssOut, _ := p.A.Command("ss", "-tin", fmt.Sprintf("sport = :%d", sport)).CombinedOutput()

	slices.Sort(lat)
	t.Logf("hierarchy: cgroup v1 %s at %s", groups.Kind, groups.Root)
	t.Logf("probe RTT p50/p95: idle %v/%v; beside the app's upload as top-app %v/%v, as background %v/%v",
		pct(idle, .5), pct(idle, .95), pct(top, .5), pct(top, .95), pct(bg, .5), pct(bg, .95))
	t.Logf("app's upload: top-app %.2f Mbit/s, background %.2f Mbit/s, back at the top %.2f Mbit/s (link %.0f)",
		topRate/1e6, bgRate/1e6, backRate/1e6, remoteLinkBps/1e6)
	t.Logf("beside a paced stream (%.2f Mbit/s): the background app took %.2f of the idle capacity", fgPaced/1e6, share)
	t.Logf("cgroup write -> open socket in the new lane, 20 moves: p50 %v, max %v (%.1fx, %.1fx the idle probe's p50)",
		pct(lat, .5), lat[len(lat)-1], float64(pct(lat, .5))/float64(pct(idle, .5)),
		float64(lat[len(lat)-1])/float64(pct(idle, .5)))
	for _, k := range []string{"write", "written->wake", "read", "lock", "maps", "list", "set", "wake->done", "wake->seen"} {
		slices.Sort(stages[k])
		t.Logf("  stage %-13s p50 %v, max %v", k, pct(stages[k], .5), stages[k][len(stages[k])-1])
	}
	t.Logf("android component: %s", status(t, sock).Components["android"])
	t.Logf("the upload in background alone (ss -tin):\n%s", ssBg)
	t.Logf("the upload back at the top (ss -tin):\n%s", ssOut)
	if ratio := float64(pct(top, .5)) / float64(pct(bg, .5)); ratio < 3 {
		testutil.TimingErrorf(t, "probe p50 beside the background app %v is only %.1fx below the top-app's %v; want >= 3x", pct(bg, .5), ratio, pct(top, .5))
	}
	if backRate < 0.5*remoteLinkBps {
		testutil.TimingErrorf(t, "the app back at the top sends %.2f Mbit/s; want >= 5 (its rate back)", backRate/1e6)
	}
}

// appShareBesidePaced runs an interactive TCP upload paced at 4 Mbit/s
// by the kernel (lanes' own bulk helper, SO_MAX_PACING_RATE, to the
// test's own HTTP sink on B: no iperf3, so the VM measures it too) beside
// the background app and returns the app's share of the capacity the
// stream leaves idle and the stream's rate, both from the lanes' byte
// counts (the stream is root's, a system uid: interactive).
func appShareBesidePaced(t *testing.T, p *testutil.Path, base, sock string) (float64, float64) {
	const pacedBytesPerSec = 500_000 // 4 Mbit/s, 40 % of the link
	fg := start(t, p.A, "lab", "helper", "bulk", "--url", base, "--rate", fmt.Sprint(pacedBytesPerSec))
	defer func() { _ = fg.cmd.Process.Kill() }()
	time.Sleep(3 * time.Second)
	b0, i0, t0 := laneBytes(t, sock, "background"), laneBytes(t, sock, "interactive"), time.Now()
	why := map[string]int{} // the upload account's why, read each 500 ms
	for time.Since(t0) < 4*time.Second {
		time.Sleep(500 * time.Millisecond)
		for _, a := range status(t, sock).Interfaces[0].Account {
			if a.Dir == "up" {
				why[a.Why+" (queue "+a.QueueOwner+")"]++
			}
		}
	}
	secs := time.Since(t0).Seconds()
	bgRate := float64(laneBytes(t, sock, "background")-b0) * 8 / secs
	fgRate := float64(laneBytes(t, sock, "interactive")-i0) * 8 / secs
	t.Logf("beside the paced stream, the upload account's why over %.1f s: %v", secs, why)
	return bgRate / (remoteLinkBps - fgRate), fgRate
}

// addStages adds the android component's stages of its last change (the
// move written from begin to written, its socket seen in the new lane at
// seen) to st: from the write's return to the watcher's wake-up, the
// daemon's own, and from the wake-up to the lane seen (the daemon's part
// where the move is more than one write: task_profiles' three groups'
// writes on android-cgroups.sh's hierarchies, the cpuset's second).
func addStages(t *testing.T, c *client.Client, begin, written, seen time.Time, st map[string][]time.Duration) {
	t.Helper()
	var s struct {
		Stages struct {
			Woke   time.Time
			Read   time.Duration `json:"read_ns"`
			Lock   time.Duration `json:"lock_ns"`
			Maps   time.Duration `json:"maps_ns"`
			Total  time.Duration `json:"total_ns"`
			Follow struct {
				List time.Duration `json:"list_ns"`
				Set  time.Duration `json:"set_ns"`
			}
		}
	}
	// the socket's lane is set before the component stores its stages
	for !s.Stages.Woke.After(begin) {
		if time.Since(begin) > testutil.Patience(5*time.Second) {
			t.Fatalf("the android component's last change woke at %v, before the move at %v", s.Stages.Woke, begin)
		}
		doc, err := c.Component("android")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(doc, &s); err != nil {
			t.Fatalf("android component %s: %v", doc, err)
		}
	}
	g := s.Stages
	for k, v := range map[string]time.Duration{"written->wake": g.Woke.Sub(written), "read": g.Read, "lock": g.Lock,
		"maps": g.Maps, "list": g.Follow.List, "set": g.Follow.Set, "wake->done": g.Total,
		"wake->seen": seen.Sub(g.Woke)} {
		st[k] = append(st[k], v)
	}
}
