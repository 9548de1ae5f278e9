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
	"strings"
	"syscall"
	"testing"

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
// classifier gives) and names the rule; the daemon logs the reload's move.
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
sys.stdin.read()
`, p.AddrB.String())
	cmd := p.A.Command(python, "-c", script)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var marked, plain int
	if _, err := fmt.Fscan(bufio.NewReader(stdout), &marked, &plain); err != nil {
		t.Fatalf("the python sockets' ports: %v", err)
	}
	go io.Copy(io.Discard, stdout)

	if f := udpFlowFrom(t, sock, marked); f.Lane.String() != "background" || !strings.HasPrefix(f.Why, "DSCP LE") {
		t.Errorf("UDP socket marked LE: lane %v, why %q; want background, DSCP LE", f.Lane, f.Why)
	}
	if f := monitorTCP(t, p.A, sock, 8080); f.Lane.String() != "background" || !strings.HasPrefix(f.Why, "DSCP LE") {
		t.Errorf("TCP socket marked LE in lanes monitor: lane %v, why %q; want background, DSCP LE", f.Lane, f.Why)
	}
	if f := udpFlowFrom(t, sock, plain); f.Lane.String() != "interactive" || f.Why != "no rule: interactive" {
		t.Errorf("plain UDP socket: lane %v, why %q; want interactive, no rule", f.Lane, f.Why)
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
	if log := d.out.String(); !strings.Contains(log, `msg="process moved"`) || !strings.Contains(log, `by="rule py-bg (exe)"`) {
		t.Errorf("the reload's move is not logged with its rule:\n%s", log)
	}
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
	if err == nil || !strings.Contains(string(out), "no process "+pid) || strings.Contains(string(out), "/proc/") {
		t.Errorf("lanes move --lane background %s: %v\n%s\nwant an error saying no process %s", pid, err, out, pid)
	}
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

// udpFlowFrom is the daemon's UDP flow with local port port.
func udpFlowFrom(t *testing.T, sock string, port int) udpflow.Flow {
	t.Helper()
	c, err := api.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	flows, _, err := c.UDPFlows()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range flows {
		if strings.HasSuffix(f.Src, fmt.Sprintf(":%d", port)) {
			return f
		}
	}
	t.Fatalf("no UDP flow from port %d among %+v", port, flows)
	return udpflow.Flow{}
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
