// livemove_parts_test.go: parts of TestMoveOpenConnections run once per
// upload (a bulk TCP upload, a QUIC upload by quic-go): the move of its
// cgroup, and an exe: or uid: rule added by a reload.
package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

// upload is a running bulk upload from A to B, a process of its own.
type upload struct {
	pid  int
	stop func() // idempotent; the test's cleanup calls it too
}

// uploadName and reportSockets: what the tests and `lanes move` call each.
var (
	uploadName    = map[string]string{"tcp": "bulk TCP upload", "quic": "QUIC upload (quic-go)"}
	reportSockets = map[string]string{"tcp": "[1-9][0-9]* tcp", "quic": "[0-9]+ tcp, [1-9][0-9]* udp"}
)

// startUpload starts a tcp (`lab helper bulk` to base) or quic (`lab
// helper quic-bulk` to B's quic-serve) upload under prefix.
func startUpload(t *testing.T, p *testutil.Path, base, proto string, prefix ...string) upload {
	t.Helper()
	if proto == "quic" {
		q := startQUICBulk(t, p, "up", prefix...)
		return upload{pid: q.cmd.Process.Pid, stop: q.stop}
	}
	b, _ := bulk(t, p.A, base, prefix...)
	return upload{pid: b.cmd.Process.Pid, stop: func() { _ = b.cmd.Process.Kill(); _ = b.cmd.Wait() }}
}

// moveByCgroup: the upload in a cgroup of its own, moved by `lanes move
// --cgroup` 4 times.
func moveByCgroup(t *testing.T, p *testutil.Path, cb *classBytes, d *proc, sock, base, proto string) {
	u := startUpload(t, p, base, proto)
	root := "/sys/fs/cgroup"
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
		root = "/sys/fs/cgroup/unified" // a hybrid system's cgroup v2
	}
	dir := filepath.Join(root, "lanes-test-move-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(u.pid)), 0)
		u.stop()
		removeCgroupTree(t, dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(u.pid)), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	var lat []moveTime
	for i := 0; i < 4; i++ {
		ln := []string{"background", "interactive"}[i%2]
		// the process now lives in the lane group nested in dir
		m, out := moveOnce(t, p, cb, d, sock, ln, "--cgroup", filepath.Join(dir, nestedOf(t, u.pid, root, dir)))
		if !regexp.MustCompile("open sockets " + reportSockets[proto]).MatchString(out) {
			t.Errorf("lanes move --cgroup: %q, want its %s socket(s)", out, proto)
		}
		lat = append(lat, m)
	}
	logMoves(t, uploadName[proto]+", lanes move --cgroup", lat)
}

// ruleByReload: a rule added by a reload (SIGHUP) reaches the running
// upload (its first byte in background timed; TCP: its congestion
// control); an exe: rule then puts a new TCP upload's first packets there.
func ruleByReload(t *testing.T, p *testutil.Path, cb *classBytes, d *proc, sock, base, bgCC, rule, proto string) {
	u := startUpload(t, p, base, proto)
	time.Sleep(time.Second)
	pol := filepath.Join(filepath.Dir(sock), "policy.yaml")
	t.Cleanup(func() {
		if err := os.WriteFile(pol, policy.DefaultYAML(), 0o644); err != nil {
			t.Error(err)
		}
		_ = d.cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(500 * time.Millisecond)
	})
	yaml := string(policy.DefaultYAMLWithout("rules")) + "\nrules:\n  - {name: mover, lane: background, " + rule + "}\n"
	if err := os.WriteFile(pol, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	before := cb.of(minorBackground)
	t0 := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	at, ok := cb.untilBytes(minorBackground, before, testutil.Patience(5*time.Second))
	if !ok {
		t.Fatalf("%s added by a reload: the running %s sent nothing in background within 5 s\n%s", rule, uploadName[proto], d.out)
	}
	t.Logf("%s added by a reload (SIGHUP): the running %s's first byte in background %v later", rule, uploadName[proto], at.Sub(t0).Round(time.Millisecond))
	if proto == "tcp" {
		time.Sleep(300 * time.Millisecond)
		if cc := ccOf(t, p, 8080); cc != bgCC {
			t.Errorf("after the reload: the open connection runs %q, want %q", cc, bgCC)
		}
	}
	u.stop()
	if proto == "tcp" && strings.HasPrefix(rule, "exe") {
		newProcessFollows(t, p, cb, sock, base)
	}
}

// tcpOptOf is the TCP option opt (TCP_NOTSENT_LOWAT: 0 where the socket
// has none of its own; TCP_WINDOW_CLAMP) of pid's TCP socket to port, read
// from a copy of the process's own descriptor (pidfd_getfd).
func tcpOptOf(t *testing.T, pid, port, opt int) int {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name())); err != nil || !strings.HasPrefix(l, "socket:") {
			continue
		}
		fd, err := unix.PidfdGetfd(pidfd, n, 0)
		if err != nil {
			continue
		}
		proto, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
		peer, _ := unix.Getpeername(fd)
		v, verr := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, opt)
		unix.Close(fd)
		if a, ok := peer.(*unix.SockaddrInet4); ok && proto == unix.IPPROTO_TCP && a.Port == port && verr == nil {
			return v
		}
	}
	t.Fatalf("pid %d holds no TCP socket to port %d", pid, port)
	return 0
}

// monitorFlow is A's busiest connection to B's port as `lanes monitor
// --json` shows it, with its lane and why.
func monitorFlow(t *testing.T, p *testutil.Path, sock string, port int) tcpmon.Flow {
	t.Helper()
	out, err := p.A.Command(lanesBin, "monitor", "--socket", sock, "--json", "--count", "1", "--dport", strconv.Itoa(port)).Output()
	if err != nil {
		t.Fatalf("lanes monitor: %v %s", err, out)
	}
	flows, err := tcpmon.ReadFlows(strings.NewReader(string(out)))
	if err != nil || len(flows) == 0 {
		t.Fatalf("lanes monitor --json: %v %s", err, out)
	}
	return slices.MaxFunc(flows, func(a, b tcpmon.Flow) int { return int(int64(a.BytesAcked) - int64(b.BytesAcked)) })
}

// probeBeside is the foreground's 40 probes and the background class's
// rate on A (bit/s) while they ran: a probe beside an upload that sent
// nothing says nothing of its yield.
func probeBeside(t *testing.T, p *testutil.Path, cb *classBytes) ([]time.Duration, float64) {
	t.Helper()
	b0, t0 := cb.of(minorBackground), time.Now()
	d := probe(t, p, 40)
	return d, float64(cb.of(minorBackground)-b0) * 8 / time.Since(t0).Seconds()
}
