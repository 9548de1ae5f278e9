// udpflows_test.go: every UDP flow visible with its lane and why. A real
// QUIC upload (quic-go) in background by `lanes run --lane background`
// and a plain UDP flow (a connected echo client) in interactive, through
// a real daemon on the routed path A ── R ── B: both appear in `lanes
// monitor --json` and `lanes status --json` with the right lane and why,
// and every UDP socket the kernel lists in A (/proc/net/udp, udp6; with
// 600 idle ones beside, more than a page of the daemon's reply) is in the
// monitor's records.
package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// kernelUDPInodes lists the inodes of ns's UDP sockets from /proc/net/udp
// and udp6 (read apart from sock_diag).
func kernelUDPInodes(t *testing.T, ns *testutil.NetNS) map[uint32]bool {
	t.Helper()
	out, err := ns.Command("cat", "/proc/net/udp", "/proc/net/udp6").Output()
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint32]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[0] == "sl" {
			continue
		}
		var ino uint32
		if _, err := fmt.Sscan(f[9], &ino); err == nil {
			inodes[ino] = true
		}
	}
	return inodes
}

// monitorUDP runs `lanes monitor --json` in ns for a few samples and
// returns the UDP records of its first sample.
func monitorUDP(t *testing.T, ns *testutil.NetNS, sock string) []udpflow.Flow {
	t.Helper()
	out, err := ns.Command(lanesBin, "monitor", "--json", "--count", "3", "--interval", "100ms", "--socket", sock).Output()
	if err != nil {
		t.Fatalf("lanes monitor --json: %v\n%s", err, out)
	}
	var first time.Time
	var flows []udpflow.Flow
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct {
			Time time.Time `json:"time"`
			udpflow.Flow
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("monitor line %q: %v", sc.Bytes(), err)
		}
		if r.Proto != udpflow.Proto {
			continue
		}
		if first.IsZero() {
			first = r.Time
		}
		if r.Time.Equal(first) {
			flows = append(flows, r.Flow)
		}
	}
	return flows
}

// findUDP returns the record whose remote (or one of the class table's
// remotes) is remote.
func findUDP(flows []udpflow.Flow, remote string) *udpflow.Flow {
	for i := range flows {
		if flows[i].Dst == remote || strings.Contains(strings.Join(flows[i].Remotes, ","), remote) {
			return &flows[i]
		}
	}
	return nil
}

// checkUDPFlows judges the QUIC and the plain UDP flow of one listing.
func checkUDPFlows(t *testing.T, what string, flows []udpflow.Flow, quicRemote, udpRemote string) {
	t.Helper()
	q, u := findUDP(flows, quicRemote), findUDP(flows, udpRemote)
	if q == nil || u == nil {
		t.Fatalf("%s: the QUIC (%s) or the UDP flow (%s) is missing: %+v", what, quicRemote, udpRemote, flows)
	}
	if q.Lane != lane.Background || q.Why != "lanes run: process moved to background" || !q.BgClass || q.Cookie == 0 {
		t.Errorf("%s: QUIC upload %+v; want a socket in background by lanes run, named in its why, in the background class", what, *q)
	}
	if u.Lane != lane.Interactive || !strings.HasPrefix(u.Why, "no rule") || u.BgClass || !u.Connected() {
		t.Errorf("%s: UDP flow %+v; want a connected socket in interactive (no rule), not in the background class", what, *u)
	}
}

// idleSockets is how many idle UDP sockets the test adds, more than one
// page of the daemon's reply (512).
const idleSockets = 600

// idleUDPSockets binds n UDP sockets in ns (IPv4 and IPv6 in turn),
// closed at the end of the test.
func idleUDPSockets(t *testing.T, ns *testutil.NetNS, n int) {
	t.Helper()
	ns.Do(t, func() error {
		for i := range n {
			network, addr := "udp4", "127.0.0.1:0"
			if i%2 == 1 {
				network, addr = "udp6", "[::1]:0"
			}
			c, err := net.ListenPacket(network, addr)
			if err != nil {
				return err
			}
			t.Cleanup(func() { c.Close() })
		}
		return nil
	})
}

func TestUDPFlowsVisible(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p := testutil.NewRoutedPath(t)
	if err := udpDiagErr(p.A); err != nil {
		t.Skipf("no UDP sock_diag here (udp_diag, a module this kernel cannot load): the monitor lists no UDP flows (%v)", err)
	}
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	start(t, p.B, "lab", "helper", "echo", "--listen", ":7")
	_, sock := startDaemon(t, p.A, string(policy.DefaultYAML()))
	q := startQUICBulk(t, p, "up", lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	udpRemote, quicRemote := fmt.Sprintf("%s:7", p.AddrB), fmt.Sprintf("%s:4433", p.AddrB)
	ping := start(t, p.A, "lab", "helper", "ping", "--to", udpRemote, "--count", "600", "--interval", "50ms")
	waitFor(t, "QUIC upload bytes", func() bool { return q.bytes.Load() > 0 })
	idleUDPSockets(t, p.A, idleSockets)

	before := kernelUDPInodes(t, p.A)
	mon := monitorUDP(t, p.A, sock)
	after := kernelUDPInodes(t, p.A)
	checkUDPFlows(t, "monitor --json", mon, quicRemote, udpRemote)
	listed := checkEverySocket(t, mon, before, after)
	st := statusUDP(t, p.A, sock)
	checkUDPFlows(t, "status --json", st, quicRemote, udpRemote)
	if len(st) < listed {
		t.Errorf("status --json lists %d UDP flows; the kernel listed %d sockets", len(st), listed)
	}
	for _, args := range [][]string{{"status", "--socket", sock}, {"monitor", "--count", "1", "--socket", sock}} {
		text, err := p.A.Command(lanesBin, args...).Output()
		if err != nil || !bytes.Contains(text, []byte("UDP flows (QUIC included)")) || !bytes.Contains(text, []byte(udpRemote)) {
			t.Errorf("lanes %s: %v; want its UDP section with %s:\n%s", args[0], err, udpRemote, text)
			continue
		}
		sect := text[bytes.Index(text, []byte("UDP flows")):]
		t.Logf("lanes %s's UDP section (its first lines):\n%s", args[0], bytes.Join(bytes.SplitN(sect, []byte("\n"), 5)[:4], []byte("\n")))
	}
	checkMoveAndRegistration(t, p, sock, ping.cmd.Process.Pid, udpRemote)
}

// checkEverySocket fails for each socket of both kernel listings missing
// from the monitor's records; it returns how many the kernel listed.
func checkEverySocket(t *testing.T, mon []udpflow.Flow, before, after map[uint32]bool) int {
	t.Helper()
	shown := map[uint32]bool{}
	for _, f := range mon {
		if f.Cookie != 0 {
			shown[f.Inode] = true
		}
	}
	listed, missing := 0, 0
	for ino := range before {
		if !after[ino] {
			continue // closed meanwhile
		}
		listed++
		if !shown[ino] {
			missing++
			if missing <= 10 {
				t.Errorf("UDP socket inode %d is in /proc/net/udp but not in monitor --json", ino)
			}
		}
	}
	t.Logf("UDP sockets: the kernel listed %d in A (/proc/net/udp{,6}), monitor --json showed %d of them (%d records)", listed, listed-missing, len(mon))
	return listed
}

// statusUDP is `lanes status --json`'s UDP flows, run in ns.
func statusUDP(t *testing.T, ns *testutil.NetNS, sock string) []udpflow.Flow {
	t.Helper()
	out, err := ns.Command(lanesBin, "status", "--json", "--socket", sock).Output()
	if err != nil {
		t.Fatalf("lanes status --json: %v\n%s", err, out)
	}
	var st struct {
		UDPFlows []udpflow.Flow `json:"udp_flows"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	return st.UDPFlows
}

// byPID is the record of the socket process pid holds.
func byPID(flows []udpflow.Flow, pid int) *udpflow.Flow {
	for i := range flows {
		if flows[i].PID == pid {
			return &flows[i]
		}
	}
	return nil
}

// checkMoveAndRegistration: the echo client moved by `lanes move` shows
// background "process moved" (and enters the background class), a second
// echo client's registered UDP flow shows background by its registration.
func checkMoveAndRegistration(t *testing.T, p *testutil.Path, sock string, pid int, udpRemote string) {
	t.Helper()
	if out, err := p.A.Command(lanesBin, "move", "--socket", sock, "--lane", "background", fmt.Sprint(pid)).CombinedOutput(); err != nil {
		t.Fatalf("lanes move: %v\n%s", err, out)
	}
	second := start(t, p.A, "lab", "helper", "ping", "--to", udpRemote, "--count", "600", "--interval", "50ms")
	var reg *udpflow.Flow
	waitFor(t, "the second echo client's socket", func() bool { reg = byPID(statusUDP(t, p.A, sock), second.cmd.Process.Pid); return reg != nil })
	src, err := netip.ParseAddrPort(reg.Src)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Register(api.Flow{Dst: p.AddrB.String(), DPort: 7, SPort: src.Port(), Proto: "udp"}, lane.Background); err != nil {
		t.Fatal(err)
	}
	var moved *udpflow.Flow
	ok := func() bool {
		st := statusUDP(t, p.A, sock)
		moved, reg = byPID(st, pid), byPID(st, second.cmd.Process.Pid)
		return moved != nil && reg != nil && moved.Lane == lane.Background && moved.BgClass && reg.Lane == lane.Background && reg.BgClass
	}
	for deadline := time.Now().Add(testutil.Patience(10 * time.Second)); !ok() && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if moved == nil || moved.Lane != lane.Background || moved.Why != "lanes move: process moved to background" || !moved.BgClass {
		t.Errorf("the moved echo client: %+v; want background, moved by lanes move, in the background class", moved)
	}
	if reg == nil || reg.Lane != lane.Background || !strings.HasPrefix(reg.Why, "flow ") || !reg.BgClass {
		t.Errorf("the registered echo client: %+v; want background by its flow registration, in the background class", reg)
	}
	t.Logf("moved: %s; registered: %s", moved.Why, reg.Why)
}

// udpDiagErr is why UDP sock_diag does not work in ns (nil: it does):
// udp_diag is a module some kernels (and scripts/kernel-vm.sh's VMs) lack.
func udpDiagErr(ns *testutil.NetNS) error {
	return ns.Run(func() error { return tcpmon.DumpSockets(unix.IPPROTO_UDP, func(*tcpmon.Sock) {}) })
}
