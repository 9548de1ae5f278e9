// livemove_test.go: a running program's open connections follow it, as
// root in fresh namespaces, the daemon in A's network namespace (no proc
// connector there) with its default policy, on the remote-bottleneck path
// (remote_test.go: A ── R ── B, R's uplink a 10 Mbit/s TBF). Each part
// runs for a bulk TCP upload and a QUIC upload (quic-go), each a process
// of its own:
//
//   - moved by `lanes move` 20 times (background, interactive, ...): the
//     time from the command to the first byte in the new lane's HTB class
//     on A (p50 / max printed; goal 100 / 250 ms), the socket's congestion
//     control after each direction (`ss -ti`), and the move's report
//     (processes, sockets per protocol, CPU treatment);
//   - `lanes move --cgroup`: the same upload, by its cgroup
//     (livemove_parts_test.go);
//   - an exe: rule and a uid: rule added by a reload (SIGHUP): the running
//     upload follows (time to its first byte in background printed);
//   - the foreground's probe beside the upload moved into background,
//     against the same upload started there (goal: p95 within 5 ms).
//
// And for TCP: an idle socket's switch, and the upload moved into
// background mid-transfer: the longest gap in B's reads around the switch,
// against the flow's RTT (goal 2 RTT).
//
// Old code: the open connection never left its lane (the class's count
// stayed at 0), which fails here.
package daemon_test

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// classBytes reads the bytes A's HTB classes of lane minor (0x12
// interactive, 0x13 background) have sent.
type classBytes struct {
	h    *netlink.Handle
	link netlink.Link
}

func newClassBytes(t *testing.T, p *testutil.Path) *classBytes {
	t.Helper()
	h, err := netlink.NewHandleAt(p.A.Handle, unix.NETLINK_ROUTE) // rtnetlink only: xfrm and nfnetlink may be modules not loaded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	l, err := h.LinkByName(p.LinkA)
	if err != nil {
		t.Fatal(err)
	}
	return &classBytes{h: h, link: l}
}

// of is the bytes the lane of class minor has sent: the background lane's
// are its class's and its non-TCP shaper's (1:15, where the QUIC/UDP
// class's egress waits while the controller shapes it).
func (c *classBytes) of(minor uint16) uint64 {
	cls, err := c.h.ClassList(c.link, netlink.HANDLE_NONE)
	if err != nil {
		return 0
	}
	var n uint64
	for _, cl := range cls {
		a := cl.Attrs()
		ours := a.Handle == netlink.MakeHandle(1, minor) ||
			minor == minorBackground && a.Handle == lane.BgShapeClassID
		if ours && a.Statistics != nil && a.Statistics.Basic != nil {
			n += a.Statistics.Basic.Bytes
		}
	}
	return n
}

// untilBytes polls class minor every 500 µs until it has sent more than
// from, and returns when it first saw that (false after limit).
func (c *classBytes) untilBytes(minor uint16, from uint64, limit time.Duration) (time.Time, bool) {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(500 * time.Microsecond) {
		if c.of(minor) > from {
			return time.Now(), true
		}
	}
	return time.Time{}, false
}

const (
	minorInteractive = 0x12
	minorBackground  = 0x13
)

// moveTime is one move's timing from the start of `lanes move`: to the
// command's exit (its own start under nsenter, the daemon's work, the
// reply; of it, the daemon's own work, from its log) and to the first
// byte in the new lane's class.
type moveTime struct{ cmd, daemon, toByte time.Duration }

// moveOnce runs `lanes move` of args to lane and returns its timing and
// output.
func moveOnce(t *testing.T, p *testutil.Path, cb *classBytes, d *proc, sock, ln string, args ...string) (moveTime, string) {
	t.Helper()
	minor := uint16(minorInteractive)
	if ln == "background" {
		minor = minorBackground
	}
	// what the class sends from here is the moved flow's: let the
	// packets classified before the move leave first
	time.Sleep(50 * time.Millisecond)
	before := cb.of(minor)
	t0 := time.Now()
	// in A's network namespace only: `ip netns exec` would hide the
	// host's cgroup mounts (it mounts a /sys of its own)
	out, err := exec.Command("nsenter", append([]string{"--net=" + p.A.Path(), lanesBin, "move", "--socket", sock, "--lane", ln}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("lanes move %v: %v %s", args, err, out)
	}
	ran := time.Since(t0)
	at, ok := cb.untilBytes(minor, before, testutil.Patience(2*time.Second))
	if !ok {
		t.Fatalf("lanes move --lane %s %v: no byte in its class 2 s after the command (%s)", ln, args, out)
	}
	return moveTime{cmd: ran, daemon: lastMoveTook(d), toByte: at.Sub(t0)}, strings.TrimSpace(string(out))
}

// lastMoveTook is the time the daemon's last "process moved" log line
// gives its work (0 if none).
func lastMoveTook(d *proc) time.Duration {
	m := regexp.MustCompile(`msg="process moved" .* took=(\S+)`).FindAllStringSubmatch(d.out.String(), -1)
	if len(m) == 0 {
		return 0
	}
	took, _ := time.ParseDuration(m[len(m)-1][1])
	return took
}

// ccOf is the congestion control `ss -ti` shows for A's connections to port.
func ccOf(t *testing.T, p *testutil.Path, port int) string {
	t.Helper()
	out, err := p.A.Command("ss", "-tinH", "dst", fmt.Sprintf("%s:%d", p.AddrB, port)).CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v %s", err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if f == "cubic" || f == "reno" || f == "bbr" || strings.HasPrefix(f, "lanes") {
			return f
		}
	}
	return "?(" + strings.TrimSpace(string(out)) + ")"
}

// srttOf is the smoothed RTT `ss -ti` shows for A's connection to port.
func srttOf(t *testing.T, p *testutil.Path, port int) time.Duration {
	out, _ := p.A.Command("ss", "-tinH", "dst", fmt.Sprintf("%s:%d", p.AddrB, port)).CombinedOutput()
	m := regexp.MustCompile(`rtt:([0-9.]+)/`).FindSubmatch(out)
	if m == nil {
		return 0
	}
	ms, _ := strconv.ParseFloat(string(m[1]), 64)
	return time.Duration(ms * float64(time.Millisecond))
}

func durPct(d []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1))]
}

// moveSeries moves pid 20 times, alternating background and interactive,
// and checks each move's report and (TCP) the congestion control.
func moveSeries(t *testing.T, p *testutil.Path, cb *classBytes, d *proc, sock, bgCC string, pid, tcpPort int, proto string) []moveTime {
	t.Helper()
	var lat []moveTime
	nice0 := niceOf(t, pid) // what it had: 0, or the nice the tests run under
	for i := 0; i < 20; i++ {
		ln := []string{"background", "interactive"}[i%2]
		m, out := moveOnce(t, p, cb, d, sock, ln, fmt.Sprint(pid))
		lat = append(lat, m)
		if !regexp.MustCompile(`1 process\(es\) -> ` + ln + `: open sockets ` + proto).MatchString(out) {
			t.Errorf("move %d: report %q, want 1 process and its %s socket(s)", i, out, proto)
		}
		wantSched := map[string]string{"background": "cpu nice 19", "interactive": "cpu restored"}[ln]
		if !strings.HasSuffix(out, wantSched) {
			t.Errorf("move %d: report %q, want %q", i, out, wantSched)
		}
		if tcpPort != 0 && i < 2 {
			time.Sleep(200 * time.Millisecond) // the next ACKs switch it
			want := map[string]string{"background": bgCC, "interactive": "cubic"}[ln]
			if cc := ccOf(t, p, tcpPort); cc != want {
				t.Errorf("move %d to %s: the open connection runs %q, want %q", i, ln, cc, want)
			}
			if f := monitorFlow(t, p, sock, tcpPort); f.Lane.String() != ln || !strings.Contains(f.Why, "process moved to "+ln) {
				t.Errorf("move %d to %s: lanes monitor shows the connection in %v, why %q", i, ln, f.Lane, f.Why)
			}
			lowat := tcpOptOf(t, pid, tcpPort, unix.TCP_NOTSENT_LOWAT)
			t.Logf("move %d to %s: the open connection's TCP_NOTSENT_LOWAT %d", i, ln, lowat)
			if (ln == "background") != (lowat > 0) {
				t.Errorf("move %d to %s: the open connection's TCP_NOTSENT_LOWAT %d, want it set in background only", i, ln, lowat)
			}
		}
		if ln == "background" && i < 2 {
			if n := niceOf(t, pid); n != 19 {
				t.Errorf("moved to background: nice %d, want 19", n)
			}
		}
	}
	if n := niceOf(t, pid); n != nice0 {
		t.Errorf("moved back to interactive: nice %d, want the %d it had", n, nice0)
	}
	return lat
}

func niceOf(t *testing.T, pid int) int {
	n, err := syscall.Getpriority(syscall.PRIO_PROCESS, pid)
	if err != nil {
		t.Fatal(err)
	}
	return 20 - n // the raw syscall returns 20 - nice
}

// recvSink accepts B's port and records when each read returned.
type recvSink struct {
	mu    sync.Mutex
	reads []time.Time
}

func newRecvSink(t *testing.T, ns *testutil.NetNS, port int) *recvSink {
	t.Helper()
	var ln net.Listener
	ns.Do(t, func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	})
	s := &recvSink{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
			s.mu.Lock()
			s.reads = append(s.reads, time.Now())
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

// longestGap is the longest time between two reads in [from, to].
func (s *recvSink) longestGap(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gap time.Duration
	var last time.Time
	for _, r := range s.reads {
		if r.Before(from) || r.After(to) {
			continue
		}
		if !last.IsZero() && r.Sub(last) > gap {
			gap = r.Sub(last)
		}
		last = r
	}
	return gap
}

// Side by side: its exe: rule names the package's lanes binary, which the
// other traffic tests' helpers run too, but its daemon moves only the
// processes of its own network namespace (TestExeRuleOwnNamespaceOnly).
func TestMoveOpenConnections(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	sideBySide(t)
	p, base := remotePath(t, uplinkBottleneck)
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	cb := newClassBytes(t, p)
	bgCC := regexp.MustCompile(`lanes_\w+`).FindString(status(t, sock).Interfaces[0].BackgroundCC)
	protos := []string{"tcp"}
	if err := udpDiagErr(p.A); err != nil {
		t.Logf("no UDP sock_diag here (udp_diag, a module this kernel cannot load): a moved process's open UDP sockets keep their lane, the QUIC parts skip (%v)", err)
	} else {
		protos = append(protos, "quic")
		start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	}
	for _, proto := range protos {
		t.Run(proto, func(t *testing.T) {
			u := startUpload(t, p, base, proto)
			time.Sleep(time.Second)
			lat := moveSeries(t, p, cb, d, sock, bgCC, u.pid, map[string]int{"tcp": 8080}[proto], reportSockets[proto])
			logMoves(t, uploadName[proto]+", lanes move PID", lat)
		})
	}
	for _, proto := range protos {
		t.Run("cgroup/"+proto, func(t *testing.T) { moveByCgroup(t, p, cb, d, sock, base, proto) })
	}
	for _, rule := range []string{"exe: " + lanesBin, "uid: 0"} {
		for _, proto := range protos {
			t.Run(strings.Fields(rule)[0]+"rule/"+proto, func(t *testing.T) {
				ruleByReload(t, p, cb, d, sock, base, bgCC, rule, proto)
			})
		}
	}
	// the rules started the task engine in A's namespace: its log names
	// why the proc connector is not its source, and blames no kernel option
	if log := d.out.String(); strings.Contains(log, "CONFIG_PROC_EVENTS") ||
		strings.Contains(log, "process events from BPF tracepoints") && !strings.Contains(log, "not the initial one") {
		t.Errorf("the daemon's log on its process events in a network namespace:\n%s", log)
	}
	t.Run("idle", func(t *testing.T) {
		// a stopped sender's socket: no ACK comes to switch it
		if c := status(t, sock).Capabilities["live_cc"]; c != "on" {
			t.Skipf("live_cc %s: an idle socket switches at its next ACK", c)
		}
		b, _ := bulk(t, p.A, base)
		time.Sleep(time.Second)
		_ = b.cmd.Process.Signal(syscall.SIGSTOP)
		defer func() { _ = b.cmd.Process.Signal(syscall.SIGCONT) }()
		time.Sleep(2 * time.Second) // what it queued is sent and acked
		for _, ln := range []string{"background", "interactive"} {
			out, err := exec.Command("nsenter", "--net="+p.A.Path(), lanesBin, "move", "--socket", sock, "--lane", ln, fmt.Sprint(b.cmd.Process.Pid)).CombinedOutput()
			if err != nil {
				t.Fatalf("lanes move: %v %s", err, out)
			}
			want := map[string]string{"background": bgCC, "interactive": "cubic"}[ln]
			if cc := ccOf(t, p, 8080); cc != want {
				t.Errorf("idle socket moved to %s: runs %q right after the command, want %q", ln, cc, want)
			}
		}
	})
	for _, proto := range protos {
		t.Run("probe/"+proto, func(t *testing.T) {
			// the foreground's view: UDP echo probes beside an upload moved
			// into background, and beside the same upload started there
			moved := startUpload(t, p, base, proto)
			time.Sleep(time.Second)
			moveOnce(t, p, cb, d, sock, "background", fmt.Sprint(moved.pid))
			time.Sleep(3 * time.Second)
			pm, rm := probeBeside(t, p, cb)
			moved.stop()
			time.Sleep(time.Second)
			started := startUpload(t, p, base, proto, "nsenter", "--net="+p.A.Path(), lanesBin, "run", "--socket", sock, "--lane", "background", "--")
			time.Sleep(4 * time.Second)
			ps, rs := probeBeside(t, p, cb)
			started.stop()
			t.Logf("foreground probe p50/p95 beside a %s moved into background %v/%v (background %.1f Mbit/s), started in background %v/%v (%.1f Mbit/s) (goal: p95 within 5 ms)", uploadName[proto],
				durPct(pm, .5).Round(100*time.Microsecond), durPct(pm, .95).Round(100*time.Microsecond), rm/1e6,
				durPct(ps, .5).Round(100*time.Microsecond), durPct(ps, .95).Round(100*time.Microsecond), rs/1e6)
			if min(rm, rs) < remoteLinkBps/10 {
				t.Logf("an upload sent under a tenth of the link while the probe ran: this comparison says nothing of the yield")
			}
			// The figure (goal: within 5 ms of the started one) is printed
			// above; what fails is a move that did not take: an upload left
			// interactive fills R's 600 KB (480 ms at 10 Mbit/s), so the
			// probe beside it waits far past half of that. A moved QUIC
			// upload's queue while the class's controller takes its base
			// from a standing queue reached +76 and +96 ms (a limit in
			// docs/background.md), not a failed move.
			t.Logf("probe p95 beside the moved upload %v above the one started in background", durPct(pm, .95)-durPct(ps, .95))
			if p95 := durPct(pm, .95); p95 > 240*time.Millisecond {
				testutil.TimingErrorf(t, "probe p95 beside the moved upload %v: over half of R's buffer, as if it had not moved", p95)
			}
		})
	}
	t.Run("restart key", func(t *testing.T) {
		pol := filepath.Join(filepath.Dir(sock), "policy.yaml")
		yaml := strings.Replace(string(policy.DefaultYAML()), "congestion_control: ledbat", "congestion_control: system", 1)
		if err := os.WriteFile(pol, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.WriteFile(pol, policy.DefaultYAML(), 0o644) })
		out, err := exec.Command("nsenter", "--net="+p.A.Path(), lanesBin, "daemon", "--check", "--policy", pol, "--socket", sock).CombinedOutput()
		if err == nil || !regexp.MustCompile(`policy\.yaml:\d+: background\.congestion_control: changed from ledbat to system`).Match(out) {
			t.Errorf("lanes daemon --check against the running daemon: %v %s, want it refused naming the key and its line", err, out)
		}
		_ = d.cmd.Process.Signal(syscall.SIGHUP)
		waitFor(t, "the reload refused in the log", func() bool {
			return strings.Contains(d.out.String(), "background.congestion_control: changed from ledbat to system")
		})
		t.Logf("lanes daemon --check: %s", strings.TrimSpace(string(out)))
	})
	t.Run("stall", func(t *testing.T) {
		sink := newRecvSink(t, p.B, 8090)
		b, _ := bulk(t, p.A, fmt.Sprintf("http://%s:8090", p.AddrB))
		time.Sleep(3 * time.Second) // past slow start
		rtt := srttOf(t, p, 8090)
		t0 := time.Now()
		moveOnce(t, p, cb, d, sock, "background", fmt.Sprint(b.cmd.Process.Pid))
		time.Sleep(time.Second)
		before := sink.longestGap(t0.Add(-time.Second), t0)
		gap := sink.longestGap(t0, t0.Add(time.Second))
		t.Logf("TCP moved into background mid-transfer: longest gap in delivery %v in the second after the move (%v in the second before), the flow's srtt %v: %.1f RTT (goal <= 2)",
			gap.Round(time.Millisecond), before.Round(time.Millisecond), rtt.Round(time.Millisecond), float64(gap)/float64(max(rtt, time.Millisecond)))
		if cc := ccOf(t, p, 8090); cc != bgCC {
			t.Errorf("after the move: %q, want %q", cc, bgCC)
		}
		if rtt > 0 && gap > 2*rtt+before {
			testutil.TimingErrorf(t, "the switch stalled the flow %v, over 2 RTT (%v) beyond the %v gap before it", gap, 2*rtt, before)
		}
	})
}

// newProcessFollows: with an exe: rule in force, a new upload's first
// packets are in background (the rule's lane), the exec seen by the task
// engine before the process connects; the daemon in a network namespace
// takes exec events from its BPF tracepoint programs (status names them).
func newProcessFollows(t *testing.T, p *testutil.Path, cb *classBytes, sock, base string) {
	t.Helper()
	tasks := status(t, sock).Components["tasks"]
	t.Logf("task engine: %s", tasks)
	if !strings.HasPrefix(tasks, "bpf tracepoints") && !strings.HasPrefix(tasks, "netlink") {
		t.Errorf("task engine in a network namespace: %q, want its events from BPF tracepoints", tasks)
	}
	time.Sleep(300 * time.Millisecond)
	fg, bg := cb.of(minorInteractive), cb.of(minorBackground)
	b, _ := bulk(t, p.A, base)
	time.Sleep(time.Second)
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
	dfg, dbg := cb.of(minorInteractive)-fg, cb.of(minorBackground)-bg
	t.Logf("exe: rule, a new upload's first second: %d bytes in background, %d in interactive", dbg, dfg)
	if dbg == 0 {
		t.Errorf("the new upload sent nothing in background")
	}
	execLane := status(t, sock).Capabilities["exec_lane"]
	t.Logf("exec_lane: %s", execLane)
	switch {
	case dfg <= 3000: // at most a neighbour exchange
	case execLane == "on":
		// decided at exec in the kernel: its sockets are background from
		// their creation, whatever the load
		t.Errorf("the new upload sent %d bytes in interactive although its exec set its lane", dfg)
	default:
		// the engine moves the process after its exec event: a process
		// that connects and sends before that (a loaded host: 135 KB at
		// load 14) starts in interactive, then follows
		testutil.TimingErrorf(t, "the new upload sent %d bytes in interactive before the rule reached it", dfg)
	}
}

// nestedOf is the name of the lane group pid lives in below dir ("" if
// it is in dir itself).
func nestedOf(t *testing.T, pid int, root, dir string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "0::"); ok {
			cur = v
		}
	}
	rel := strings.TrimPrefix(root+cur, dir)
	return strings.TrimPrefix(rel, "/")
}

func logMoves(t *testing.T, what string, lat []moveTime) {
	t.Helper()
	toByte := make([]time.Duration, len(lat))
	slowest := lat[0]
	for i, m := range lat {
		toByte[i] = m.toByte
		if m.toByte > slowest.toByte {
			slowest = m
		}
	}
	t.Logf("%s: command -> first byte in the new lane's class, p50 %v max %v over %d moves (goal 100 / 250 ms); the slowest: the command ran %v of it, the daemon's work %v",
		what, durPct(toByte, .5).Round(time.Millisecond), durPct(toByte, 1).Round(time.Millisecond), len(lat), slowest.cmd.Round(time.Millisecond), slowest.daemon.Round(time.Millisecond))
	if durPct(toByte, .5) > 250*time.Millisecond {
		testutil.TimingErrorf(t, "%s: p50 %v, goal 100 ms", what, durPct(toByte, .5))
	}
}

// removeCgroupTree removes dir and the cgroups the daemon nested in it
// (its lane groups), deepest first, waiting while one is still busy.
func removeCgroupTree(t *testing.T, dir string) {
	deadline := time.Now().Add(testutil.Patience(5 * time.Second))
	for {
		var dirs []string
		_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if len(dirs) == 0 {
			return
		}
		for i := len(dirs) - 1; i >= 0; i-- { // children after their parents in a walk
			_ = syscall.Rmdir(dirs[i])
		}
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cgroup %s left behind: %v", dir, dirs)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
