// views_test.go: what a running daemon's views tell people matches what it
// does: a refused reload shows in status, a socket's why names its DSCP
// marking or the rule or command that moved it (and a reload's moves are
// logged), and `lanes move` of a PID that does not exist says so.
package daemon_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// TestStatusShowsRefusedReload: a policy refused on SIGHUP was only logged;
// status (text and --json) said nothing. It now says when, how many
// errors, the first, and which policy runs, until a reload takes the file.
func TestStatusShowsRefusedReload(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA))
	pol := filepath.Join(filepath.Dir(sock), "policy.yaml")
	broken := devicePolicy(p.LinkA) + "rules:\n  - {lane: fastest, uid: 3}\n  - {lane: background, dscp: 99}\n"
	if err := os.WriteFile(pol, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "status to show the refused reload", func() bool { return status(t, sock).PolicyRefused != nil })
	r := status(t, sock).PolicyRefused
	if r.Errors != 2 || !strings.Contains(r.First, "policy.yaml:4: rules[0].lane") || r.At == "" || r.Running == "" {
		t.Errorf("policy_refused %+v: want 2 errors, the first at line 4, when, and the running policy's time", r)
	}
	out, err := p.A.Command(lanesBin, "status", "--socket", sock).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "POLICY REFUSED at "+r.At+" (2 errors)") ||
		!strings.Contains(string(out), "running the policy read at "+r.Running) || !strings.Contains(string(out), "rules[0].lane") {
		t.Errorf("lanes status after a refused reload: %v\n%s", err, out)
	}
	out, err = p.A.Command(lanesBin, "status", "--json", "--socket", sock).Output()
	var js struct {
		PolicyRefused *api.PolicyRefused `json:"policy_refused"`
	}
	if err != nil || json.Unmarshal(out, &js) != nil || js.PolicyRefused == nil || *js.PolicyRefused != *r {
		t.Errorf("lanes status --json after a refused reload: %v, policy_refused %+v, want %+v", err, js.PolicyRefused, r)
	}
	if err := os.WriteFile(pol, []byte(devicePolicy(p.LinkA)), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "a good reload to clear the refusal", func() bool { return status(t, sock).PolicyRefused == nil })
}

// TestWhyNamesDSCPAndRule: a socket marking itself DSCP LE was shown
// interactive with a generic why, and a process moved by a reload's new
// rule showed "process moved ... (lanes move, lanes run or a process
// rule)", its move unlogged. The why now says "DSCP LE" (with the lane the
// classifier gives) and names the rule or command (lanes run), for the
// sockets open at the move and those opened after it; the daemon logs the
// reload's move.
func TestWhyNamesDSCPAndRule(t *testing.T) {
	testutil.RequireRoot(t)
	python := realPython(t)
	p := testutil.NewVethPair(t)
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA))
	// A process with a UDP and a TCP socket marked LE and a plain UDP one.
	script := fmt.Sprintf(`import socket, sys
b = %q
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 4); u.connect((b, 9))
v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.connect((b, 10))
t = socket.socket(); t.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 4); t.connect((b, 8080))
print(u.getsockname()[1], v.getsockname()[1], flush=True)
sys.stdin.readline()
w = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); w.connect((b, 11))
print(w.getsockname()[1], flush=True)
sys.stdin.read()
`, p.AddrB.String())
	cmd := p.A.Command(python, "-c", script)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var marked, plain, later int
	lines := bufio.NewReader(stdout)
	if _, err := fmt.Fscan(lines, &marked, &plain); err != nil {
		t.Fatalf("the python sockets' ports: %v", err)
	}

	if f := udpFlowFrom(t, sock, marked); f.Lane.String() != "background" || !strings.HasPrefix(f.Why, "DSCP LE") {
		t.Errorf("UDP socket marked LE: lane %v, why %q; want background, DSCP LE", f.Lane, f.Why)
	}
	if f := monitorTCP(t, p.A, sock, 8080); f.Lane.String() != "background" || !strings.HasPrefix(f.Why, "DSCP LE") {
		t.Errorf("TCP socket marked LE in lanes monitor: lane %v, why %q; want background, DSCP LE", f.Lane, f.Why)
	}
	if f := udpFlowFrom(t, sock, plain); f.Lane.String() != "interactive" || f.Why != "no rule: interactive" {
		t.Errorf("plain UDP socket: lane %v, why %q; want interactive, no rule", f.Lane, f.Why)
	}

	// lanes run names itself (before the rule below would move its python too)
	run := p.A.Command(lanesBin, "run", "--socket", sock, "--lane", "background", "--", python, "-c",
		"import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('"+p.AddrB.String()+"', 12))\n"+
			"print(s.getsockname()[1], flush=True)\nsys.stdin.read()\n")
	runIn, _ := run.StdinPipe()
	runOut, _ := run.StdoutPipe()
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runIn.Close(); _ = run.Process.Kill(); _ = run.Wait() })
	var ran int
	if _, err := fmt.Fscan(runOut, &ran); err != nil {
		t.Fatalf("lanes run's socket port: %v", err)
	}
	if f := udpFlowFrom(t, sock, ran); f.Why != "lanes run: process moved to background" {
		t.Errorf("UDP socket of a command under lanes run: lane %v, why %q; want lanes run named", f.Lane, f.Why)
	}

	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)) // ip netns exec execs it
	if err != nil {
		t.Fatal(err)
	}
	pol := filepath.Join(filepath.Dir(sock), "policy.yaml")
	withRule := devicePolicy(p.LinkA) + fmt.Sprintf("rules:\n  - {name: py-bg, lane: background, exe: %s}\n", exe)
	if err := os.WriteFile(pol, []byte(withRule), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	want := "rule py-bg (exe): process moved to background"
	waitFor(t, "the reload's rule to move the process", func() bool { return udpFlowFrom(t, sock, plain).Why == want })
	if f := monitorTCP(t, p.A, sock, 8080); f.Why != want {
		t.Errorf("moved TCP socket in lanes monitor: why %q, want %q", f.Why, want)
	}
	// a socket the moved process opens afterwards, in the lane's cgroup
	if _, err := io.WriteString(stdin, "\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fscan(lines, &later); err != nil {
		t.Fatalf("the later socket's port: %v", err)
	}
	go io.Copy(io.Discard, lines)
	if f := udpFlowFrom(t, sock, later); f.Why != want {
		t.Errorf("UDP socket opened after the move: lane %v, why %q; want %q", f.Lane, f.Why, want)
	}
	waitFor(t, "the reload's move logged with its rule", func() bool {
		return strings.Contains(d.out.String(), `msg="process moved"`) && strings.Contains(d.out.String(), `by="rule py-bg (exe)"`)
	})
}

// TestMoveUnknownPIDSaysNoProcess: `lanes move` of a PID that does not
// exist said "open /proc/PID/cgroup: no such file or directory".
func TestMoveUnknownPIDSaysNoProcess(t *testing.T) {
	testutil.RequireRoot(t)
	const pid = "999999"
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Skip("pid " + pid + " exists here")
	}
	p := testutil.NewVethPair(t)
	_, sock := startDaemon(t, p.A, devicePolicy(p.LinkA))
	out, err := p.A.Command(lanesBin, "move", "--socket", sock, "--lane", "background", pid).CombinedOutput()
	t.Logf("lanes move --lane background %s: %s", pid, out)
	if err == nil || !strings.Contains(string(out), "no process "+pid) || strings.Contains(string(out), "/proc/") {
		t.Errorf("lanes move --lane background %s: %v\n%s\nwant an error saying no process %s", pid, err, out, pid)
	}
}

// TestDefaultOutputFits100Columns: on a busy daemon (a download, an upload,
// coop and the realtime lane on, a refused reload) status's lines reached 685 characters,
// doctor's 326, monitor's 200, and monitor's RATE of a download was 0. By
// default each now fits 100 columns, doctor ends with its verdict, monitor
// shows the download's rate down and its note once, and status leaves out
// the daemon's own UDP sockets.
func TestDefaultOutputFits100Columns(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p := testutil.NewVethPair(t)
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	coop := fmt.Sprintf("coop:\n  enabled: true\n  key: %q\n  ap_rate: 20gbit\n  state_file: %q\n", coopTestKey, filepath.Join(t.TempDir(), "replay.json")) +
		fmt.Sprintf("realtime:\n  enabled: true\n  socket: %s\n  rate: 10mbit\n", filepath.Join(t.TempDir(), "rt.sock"))
	d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA)+coop)
	url := fmt.Sprintf("http://%s:8080", p.AddrB)
	// a download paced at 2.5 MB/s for 20 s, and an upload paced as fast
	// until the test ends: an unpaced 200 MB POST over the veth pair took
	// as little as 0.1 s, under the one window (LINK_RATE_WIN_NS) that
	// the account reads a delivery rate over, and status said "link not
	// measured" in one run of three
	start(t, p.A, "lab", "helper", "get", "--url", url, "--bytes", "50000000", "--rate", "2500000")
	start(t, p.A, "lab", "helper", "bulk", "--url", url, "--rate", "2500000")
	pol := filepath.Join(filepath.Dir(sock), "policy.yaml")
	if err := os.WriteFile(pol, []byte(devicePolicy(p.LinkA)+coop+"rules:\n  - {lane: background, exe: /no/such/program, dscp: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the refused reload", func() bool { return status(t, sock).PolicyRefused != nil })

	mon, err := p.A.Command(lanesBin, "monitor", "--socket", sock, "--interval", "500ms", "--count", "7").Output()
	if err != nil {
		t.Fatalf("lanes monitor: %v\n%s", err, mon)
	}
	checkWidth(t, "lanes monitor", mon)
	if n, notes := strings.Count(string(mon), "lanes monitor  "), strings.Count(string(mon), "\nnote: "); n < 2 || notes > 1 {
		t.Errorf("lanes monitor to a pipe: %d views, its note %d times; want several views, the note at most once:\n%s", n, notes, mon)
	}
	if !downloadShown(string(mon), fmt.Sprintf("%s:8080", p.AddrB)) {
		t.Errorf("lanes monitor shows no download rate for the GET from %s:\n%s", url, mon)
	}

	st, err := p.A.Command(lanesBin, "status", "--socket", sock).Output()
	if err != nil {
		t.Fatalf("lanes status: %v\n%s", err, st)
	}
	checkWidth(t, "lanes status", st)
	if !strings.Contains(string(st), "POLICY REFUSED") {
		t.Errorf("lanes status does not say the policy was refused:\n%s", st)
	}
	if !regexp.MustCompile(`\n  interactive +TCP +[1-9][0-9]*  up +\S+  down +[0-9.]+[KMG]bit  `).Match(st) {
		t.Errorf("lanes status shows no download rate for the interactive lane:\n%s", st)
	}
	if !regexp.MustCompile(`\naccount up: link ~[0-9.]+[KMG]bit/s, queue: `).Match(st) {
		t.Errorf("lanes status shows no capacity estimate for the upload's interface:\n%s", st)
	}
	var js struct {
		UDP []udpflow.Flow `json:"udp_flows"`
	}
	out, err := p.A.Command(lanesBin, "status", "--json", "--socket", sock).Output()
	if err != nil || json.Unmarshal(out, &js) != nil {
		t.Fatalf("lanes status --json: %v\n%s", err, out)
	}
	own := 0
	for _, f := range js.UDP {
		if f.Daemon {
			own++
			if strings.Contains(string(st), f.Src) || strings.Contains(string(st), f.Peers()+" ") {
				t.Errorf("lanes status lists the daemon's own socket %s -> %s", f.Src, f.Peers())
			}
		}
	}
	if err := udpDiagErr(p.A); err != nil {
		t.Logf("no UDP sock_diag here (udp_diag): status lists no UDP flows (%v)", err)
	} else if own == 0 {
		t.Errorf("no UDP socket of the daemon marked in status --json (coop's announcements are one): %+v", js.UDP)
	}

	doc, err := p.A.Command(lanesBin, "doctor").Output()
	if err != nil {
		t.Fatalf("lanes doctor: %v\n%s", err, doc)
	}
	checkWidth(t, "lanes doctor", doc)
	lines := strings.Split(strings.TrimSpace(string(doc)), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "lanes will work here: ") {
		t.Errorf("lanes doctor's last line %q, want its verdict", last)
	}
}

// checkWidth fails for each line of out wider than 100 characters.
func checkWidth(t *testing.T, what string, out []byte) {
	t.Helper()
	widest := 0
	for _, l := range strings.Split(string(out), "\n") {
		n := utf8.RuneCountInString(l)
		widest = max(widest, n)
		if n > 100 {
			t.Errorf("%s: a line of %d characters: %s", what, n, l)
		}
	}
	t.Logf("%s: longest line %d characters:\n%s", what, widest, out)
}

// downloadShown says whether a row of the monitor's flow table for remote
// shows a rate down (its DOWN column, the sixth, is not 0bit).
func downloadShown(mon, remote string) bool {
	for _, l := range strings.Split(mon, "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[2] == remote && f[5] != "0bit" {
			return true
		}
	}
	return false
}

// realPython is python3's own executable (not a shim), or skips.
func realPython(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import os, sys; print(os.path.realpath(sys.executable))").Output()
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// udpFlowFrom is the daemon's UDP flow with local port port (asked again
// while the daemon's listing, reused for 250 ms, predates the socket).
func udpFlowFrom(t *testing.T, sock string, port int) udpflow.Flow {
	t.Helper()
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var flows []udpflow.Flow
	for deadline := time.Now().Add(testutil.Patience(5 * time.Second)); ; time.Sleep(100 * time.Millisecond) {
		if flows, _, err = c.UDPFlows(); err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			if strings.HasSuffix(f.Src, fmt.Sprintf(":%d", port)) {
				return f
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no UDP flow from port %d among %+v", port, flows)
		}
	}
}

// monitorTCP is `lanes monitor --json`'s flow to port in ns.
func monitorTCP(t *testing.T, ns *testutil.NetNS, sock string, port int) tcpmon.Flow {
	t.Helper()
	out, err := ns.Command(lanesBin, "monitor", "--socket", sock, "--json", "--count", "1", "--dport", fmt.Sprint(port)).Output()
	if err != nil {
		t.Fatalf("lanes monitor: %v %s", err, out)
	}
	flows, err := tcpmon.ReadFlows(strings.NewReader(string(out)))
	if err != nil || len(flows) != 1 {
		t.Fatalf("lanes monitor --json --dport %d: %v, want one flow:\n%s", port, err, out)
	}
	return flows[0]
}
