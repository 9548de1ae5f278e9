// examples_test.go: the example applications end to end. rt-echo, built
// as an application would against a staged `make install-rt-dev` (the
// flags of `pkg-config --cflags lanes-rt`, warnings as errors), runs in
// namespace A beside a realtime lane (the lanes
// tree shaped on A's veth); a UDP echo server runs in namespace B. The
// server must see rt-echo's own port, every admitted request must get its
// reply on rt-echo's socket, and the lane must close the socket when
// rt-echo is gone. IPv4 and IPv6; and refusals counted by reason.
package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/rt"
)

// build stages the C client's install (`make install-rt-dev` into a
// DESTDIR), builds rt-echo against it as an application would, with the
// flags `pkg-config --cflags lanes-rt` gives and warnings as errors, and
// builds lanes-rtd (`make rtd`); it returns rt-echo and lanes-rtd.
func build(t *testing.T) (echo, rtd string) {
	t.Helper()
	for _, tool := range []string{"make", "cc", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH", tool)
		}
	}
	out := t.TempDir()
	stage := filepath.Join(out, "stage")
	if b, err := exec.Command("make", "-s", "-C", "..", "install-rt-dev", "rtd", "OUT="+out,
		"DESTDIR="+stage, "PREFIX=/opt/lanes").CombinedOutput(); err != nil {
		t.Fatalf("make install-rt-dev rtd: %v\n%s", err, b)
	}
	pc := exec.Command("pkg-config", "--cflags", "lanes-rt")
	pc.Env = append(os.Environ(), "PKG_CONFIG_LIBDIR="+filepath.Join(stage, "opt/lanes/share/pkgconfig"),
		"PKG_CONFIG_PATH=", "PKG_CONFIG_SYSROOT_DIR="+stage)
	cflags, err := pc.Output()
	if err != nil {
		t.Fatalf("pkg-config --cflags lanes-rt against the staged install: %v", err)
	}
	if want := "-I" + filepath.Join(stage, "opt/lanes/include"); !strings.Contains(string(cflags), want) {
		t.Fatalf("pkg-config --cflags lanes-rt: %q, want %s", cflags, want)
	}
	echo = filepath.Join(publicDir(t), "rt-echo")
	args := append(append(append([]string{}, strictFlags...), strings.Fields(string(cflags))...), "-o", echo, "rt-echo/rt-echo.c")
	if b, err := exec.Command("cc", args...).CombinedOutput(); err != nil || len(b) > 0 {
		t.Fatalf("cc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return echo, filepath.Join(out, rtlane.HelperName)
}

// publicDir is a scratch folder others may read and search: ungranted
// clients run as nobody from there.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lanes-example")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkNotGranted runs app as nobody, whom the lane does not grant: it
// must exit 1 saying its attach was refused and what fixes it
// (realtime.grants).
func (b *bed) checkNotGranted(t *testing.T, app []string) {
	t.Helper()
	args := append([]string{"netns", "exec", b.p.A.Name, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}, app...)
	cmd := exec.Command("ip", append(args, b.p.AddrB.String(), "9", "1", "20000")...)
	cmd.Env = append(os.Environ(), "LANES_RT_SOCKET="+b.sock)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "attach refused: "+rt.MsgNotGranted) {
		t.Errorf("%s as nobody: %v, want exit 1 and attach refused: %s\n%s", app, err, rt.MsgNotGranted, out)
	} else {
		t.Logf("as nobody: %s", bytes.TrimSpace(out))
	}
}

// checkUnavailable runs app with no realtime socket: with nothing beside
// it, it must say that the daemon is not running; with the daemon's API
// socket answering beside it, that the lane is off; each time exit 1.
func checkUnavailable(t *testing.T, app []string) {
	t.Helper()
	dir := t.TempDir()
	for _, want := range []string{rt.MsgNoDaemon, rt.MsgLaneOff} {
		if want == rt.MsgLaneOff {
			api, err := net.Listen("unix", filepath.Join(dir, "lanes.sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer api.Close()
		}
		cmd := exec.Command(app[0], append(app[1:], "127.0.0.1", "9", "1", "1000")...)
		cmd.Env = append(os.Environ(), "LANES_RT_SOCKET="+filepath.Join(dir, "rt.sock"))
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), want) {
			t.Errorf("%s without a realtime socket: %v, want exit 1 and %q\n%s", app, err, want, out)
		}
	}
}

// buildRTD builds lanes-rtd (`make rtd`) into a scratch folder.
func buildRTD(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	out := t.TempDir()
	if b, err := exec.Command("make", "-s", "-C", "..", "rtd", "OUT="+out).CombinedOutput(); err != nil {
		t.Fatalf("make rtd: %v\n%s", err, b)
	}
	return filepath.Join(out, rtlane.HelperName)
}

// TestRTEchoGo: examples/rt-echo-go, rt-echo in Go on package rt, as
// TestRTEcho runs rt-echo.
func TestRTEchoGo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs traffic between namespaces")
	}
	testutil.RequireRoot(t)
	bin := filepath.Join(publicDir(t), "rt-echo-go")
	if out, err := exec.Command("../scripts/go", "build", "-o", bin, "./rt-echo-go").CombinedOutput(); err != nil {
		t.Fatalf("go build ./rt-echo-go: %v\n%s", err, out)
	}
	b := newBed(t, buildRTD(t))
	b.checkEchoApp(t, []string{bin})
	b.checkNotGranted(t, []string{bin})
	checkUnavailable(t, []string{bin})
}

// echoServer answers every datagram to its sender and records the senders.
type echoServer struct {
	conn *net.UDPConn
	mu   sync.Mutex
	from map[netip.AddrPort]int
}

func startEcho(t *testing.T, ns *testutil.NetNS, addr netip.Addr) *echoServer {
	t.Helper()
	e := &echoServer{from: map[netip.AddrPort]int{}}
	ns.Do(t, func() (err error) {
		e.conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		return err
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := e.conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			e.mu.Lock()
			e.from[from]++
			e.mu.Unlock()
			_, _ = e.conn.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	t.Cleanup(func() { e.conn.Close(); <-done })
	return e
}

// bed is A (lane, lanes tree, rt-echo) and B (echo servers).
type bed struct {
	p    *testutil.Pair
	lane *rtlane.Lane
	dp   *datapath.Datapath
	sock string
	v6A  netip.Addr
	v6B  netip.Addr
}

func newBed(t *testing.T, rtd string) *bed {
	t.Helper()
	testutil.RequireRoot(t)
	b := &bed{p: testutil.NewVethPair(t), v6A: netip.MustParseAddr("fd6c:6e65::1"), v6B: netip.MustParseAddr("fd6c:6e65::2")}
	b.p.A.Do(t, func() error { return addV6(b.p.LinkA, b.v6A) })
	b.p.B.Do(t, func() error { return addV6(b.p.LinkB, b.v6B) })
	b.p.A.Do(t, func() (err error) {
		b.dp, err = datapath.Open(datapath.Config{Interface: b.p.LinkA, Mode: datapath.Shaped,
			UplinkBps: 100_000_000, Instance: testutil.UniqueName("rtecho")})
		return err
	})
	t.Cleanup(func() { b.dp.Close() })
	dir, err := os.MkdirTemp("", "lanes-rtecho")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // ungranted clients run as nobody
		t.Fatal(err)
	}
	cfg := config.DefaultRealtime()
	cfg.Enabled, cfg.Socket, cfg.Rate = true, filepath.Join(dir, "rt.sock"), 95_000_000
	b.sock = cfg.Socket
	b.p.A.Do(t, func() (err error) { b.lane, err = rtlane.New(cfg, rtlane.WithHelper(rtd)); return err })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.lane.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("lane: %v", err)
		}
		b.lane.Close()
	})
	return b
}

// addV6 gives link an IPv6 address without duplicate detection.
func addV6(link string, a netip.Addr) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(64, 128)}, Flags: unix.IFA_F_NODAD})
}

var (
	resultLine = regexp.MustCompile(`^sent (\d+) admitted (\d+) refused (\d+) replies (\d+)\n((?:refused [a-z-]+ \d+\n)*)$`)
	reasonLine = regexp.MustCompile(`refused ([a-z-]+) (\d+)\n`)
	portLine   = regexp.MustCompile(`rt[-_]echo: local port (\d+)`)
)

// echoResult is what rt-echo printed.
type echoResult struct {
	sent, admitted, refused, replies, port int
	reasons                                map[string]int // refusals by reason
}

// runEcho runs app (rt-echo, or the same application in another language:
// its command line before the arguments) in A against srv, each request
// with a deadline of deadlineUS after its send call, and returns what it
// printed.
func (b *bed) runEcho(t *testing.T, app []string, srv netip.AddrPort, count, deadlineUS int) echoResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(60*time.Second))
	defer cancel()
	args := append(append([]string{"netns", "exec", b.p.A.Name}, app...),
		srv.Addr().String(), strconv.Itoa(int(srv.Port())), strconv.Itoa(count), strconv.Itoa(deadlineUS))
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Env = append(os.Environ(), "LANES_RT_SOCKET="+b.sock)
	var stderr, stdout safeBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "attach refused: unsupported") {
			t.Skip("the kernel lacks per-datagram priorities (SO_PRIORITY control messages, Linux 6.14)")
		}
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", app, err, stdout.String(), stderr.String())
	}
	m, pm := resultLine.FindStringSubmatch(stdout.String()), portLine.FindStringSubmatch(stderr.String())
	if m == nil || pm == nil {
		t.Fatalf("%s's output:\nstdout: %q\nstderr: %q", app, stdout.String(), stderr.String())
	}
	t.Logf("%s %v: %s", filepath.Base(app[len(app)-1]), srv, stdout.String())
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	r := echoResult{atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4]), atoi(pm[1]), map[string]int{}}
	sum := 0
	for _, rm := range reasonLine.FindAllStringSubmatch(m[5], -1) {
		r.reasons[rm[1]] += atoi(rm[2])
		sum += atoi(rm[2])
	}
	if sum != r.refused {
		t.Errorf("%s: %d refused, its reasons count %d (%v)", app, r.refused, sum, r.reasons)
	}
	return r
}

// safeBuffer is a bytes buffer for a command's output.
type safeBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

func (s *safeBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return string(s.b) }

func TestRTEcho(t *testing.T) {
	if testing.Short() {
		t.Skip("runs traffic between namespaces")
	}
	bin, rtd := build(t)
	b := newBed(t, rtd)
	if got := b.lane.DataPath(); got != rtlane.HelperName {
		t.Fatalf("data path %s, want %s", got, rtlane.HelperName)
	}
	if st := b.lane.Stats(); st.RateBps == 0 {
		t.Fatal("lane without a rate")
	}
	b.checkEchoApp(t, []string{bin})
	b.checkNotGranted(t, []string{bin})
	checkUnavailable(t, []string{bin})
}

// checkEchoApp runs app (rt-echo or its like) over IPv4 and IPv6, then with
// deadlines it cannot meet: every admitted request must leave from the
// application's own socket and get its echo, the lane's and the realtime
// class's counters must agree, every refusal must be counted by its reason,
// and the lane must let go of the socket when app is gone.
func (b *bed) checkEchoApp(t *testing.T, app []string) {
	t.Helper()
	const count = 200
	sent0 := b.lane.Stats().Totals.Sent
	var sentTotal uint64
	for _, fam := range []struct {
		name     string
		srv, src netip.Addr
	}{{"IPv4", netip.AddrFrom4([4]byte(b.p.AddrB)), netip.AddrFrom4([4]byte(b.p.AddrA))}, {"IPv6", b.v6B, b.v6A}} {
		t.Run(fam.name, func(t *testing.T) {
			srv := startEcho(t, b.p.B, fam.srv)
			r := b.runEcho(t, app, srv.conn.LocalAddr().(*net.UDPAddr).AddrPort(), count, 20000)
			sent, admitted, refused, replies, port := r.sent, r.admitted, r.refused, r.replies, r.port
			if sent != count || admitted+refused != sent || admitted == 0 {
				t.Fatalf("sent %d admitted %d refused %d, want %d sent, some admitted", sent, admitted, refused, count)
			}
			if replies != admitted {
				t.Errorf("%d replies of %d admitted requests", replies, admitted)
			}
			srv.mu.Lock()
			from := fmt.Sprint(srv.from)
			want := netip.AddrPortFrom(fam.src, uint16(port))
			got := srv.from[want]
			srv.mu.Unlock()
			if got != admitted {
				t.Errorf("the server got %d requests from the application's %v (all senders: %s), want %d", got, want, from, admitted)
			}
			t.Logf("the server saw %s; the application's socket %v", from, want)
			sentTotal += uint64(admitted)
		})
	}
	t.Run("refusals", func(t *testing.T) {
		// A deadline 1 µs after the send call: less than the datagram's
		// own time on the wire, so each is refused, and app says why;
		// 0 alike (every client's example sends it).
		srv := startEcho(t, b.p.B, netip.AddrFrom4([4]byte(b.p.AddrB)))
		for _, us := range []int{1, 0} {
			r := b.runEcho(t, app, srv.conn.LocalAddr().(*net.UDPAddr).AddrPort(), 20, us)
			if r.sent != 20 || r.refused != 20 || r.reasons["own-deadline-unmeetable"] != 20 {
				t.Errorf("deadline %d µs: sent %d refused %d by reason %v, want all 20 refused own-deadline-unmeetable",
					us, r.sent, r.refused, r.reasons)
			}
		}
	})
	st := b.lane.Stats()
	if st.Totals.Sent-sent0 != sentTotal {
		t.Errorf("lane sent %d, the application's admitted %d", st.Totals.Sent-sent0, sentTotal)
	}
	ds, err := b.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if rt := ds.Lanes[lane.Realtime]; rt.Packets < st.Totals.Sent {
		t.Errorf("realtime class carried %d packets, lane sent %d", rt.Packets, st.Totals.Sent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.lane.Stats().AppSocks != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the application gone, the lane still holds %d of its sockets", b.lane.Stats().AppSocks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
