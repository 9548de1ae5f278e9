// bgquic_remote_test.go: the background QUIC/UDP class at a remote
// bottleneck (remote_test.go's path) where the delay controller's ICMP
// echo gets no answer: a server that ignores echo requests (its
// namespace's net.ipv4.icmp_echo_ignore_all), alone and beside a second
// server that answers them; and a second QUIC implementation (ngtcp2's
// example client and server, Debian's ngtcp2-client and ngtcp2-server)
// beside quic-go. Each prints the background's share of the link alone
// and the probe's p95 over idle, with the goals.
package daemon_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

// silenceICMP makes ns ignore ICMP echo requests.
func silenceICMP(t *testing.T, ns *testutil.NetNS) {
	t.Helper()
	if out, err := ns.Command("sysctl", "-qw", "net.ipv4.icmp_echo_ignore_all=1").CombinedOutput(); err != nil {
		t.Fatalf("sysctl: %v %s", err, out)
	}
}

// episodes reads the background-udp component's running episodes.
func episodes(t *testing.T, sock string) map[int]bgudp.Episode {
	t.Helper()
	var bs bgudp.Status
	if err := json.Unmarshal(status(t, sock).Details["background-udp"], &bs); err != nil {
		t.Fatalf("background-udp status: %v", err)
	}
	return bs.Running
}

// heldJudge checks that the class was held: the probe's p95 over idle and
// no probe lost; the share alone is logged beside its goal.
func heldJudge(t *testing.T, what string, idle, on []time.Duration, lost int, share float64) {
	t.Helper()
	infl := pct(on, .95) - pct(idle, .95)
	t.Logf("%s: background alone %.2f of the link (goal >= 0.90); probe p95 over idle +%v (goal <= 25ms), p50 %v; lost %d of %d",
		what, share, infl, pct(on, .5), lost, probeN)
	if infl > 60*time.Millisecond {
		testutil.TimingErrorf(t, "%s: probe p95 +%v over idle: the class is not held", what, infl)
	}
	if lost > 0 {
		t.Errorf("%s: %d probes lost", what, lost)
	}
	if share < 0.4 {
		testutil.TimingErrorf(t, "%s: background alone %.2f of the link, want >= 0.40", what, share)
	}
}

// TestBackgroundQUICSilentPeerRemote: a QUIC upload to a server that
// answers no ICMP echo. The controller probes the flow's UDP port with
// QUIC version probes instead; without them (no answer at all) it holds
// the class at the floor.
func TestBackgroundQUICSilentPeerRemote(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, _ := remotePath(t, uplinkBottleneck)
	silenceICMP(t, p.B)
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	idle, _ := probeAll(t, p)
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String())
		}
	}()
	q := startQUICBulk(t, p, "up", lanesBin, "run", "--socket", sock, "--lane", "background", "--")
	time.Sleep(4 * time.Second)
	b0, t0 := q.bytes.Load(), time.Now()
	time.Sleep(3 * time.Second)
	share := float64(q.bytes.Load()-b0) * 8 / time.Since(t0).Seconds() / remoteLinkBps
	on, lost := probeAll(t, p)
	st := status(t, sock)
	t.Logf("background-udp: %s", st.Components["background-udp"])
	probeCost(t, st)
	for _, e := range episodes(t, sock) {
		if e.Rate == 0 {
			t.Errorf("the class is not policed beside a peer silent to ICMP: %+v", e)
		}
		if e.Version == 0 {
			t.Errorf("no version probes to the peer silent to ICMP: %+v", e)
		}
	}
	heldJudge(t, "QUIC upload, the server silent to ICMP", idle, on, lost, share)
}

// addServer joins a second server namespace C to p's router on its own
// link (10.k.3.0/24) and returns it with its address.
func addServer(t *testing.T, p *testutil.Path) (*testutil.NetNS, net.IP) {
	t.Helper()
	c := testutil.NewNetNS(t)
	k := p.AddrB.To4()[1]
	rc, cc := fmt.Sprintf("10.%d.3.1", k), net.IPv4(10, k, 3, 2).To4()
	link := testutil.UniqueName("rc")
	for _, cmd := range [][]string{
		{"ip", "link", "add", link, "type", "veth", "peer", "name", "veth-c", "netns", c.Name},
		{"ip", "addr", "add", rc + "/24", "dev", link},
		{"ip", "link", "set", link, "up"},
	} {
		if out, err := p.R.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", cmd, err, out)
		}
	}
	for _, cmd := range [][]string{
		{"ip", "addr", "add", cc.String() + "/24", "dev", "veth-c"},
		{"ip", "link", "set", "veth-c", "up"},
		{"ip", "route", "add", "default", "via", rc},
	} {
		if out, err := c.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", cmd, err, out)
		}
	}
	return c, cc
}

// TestBackgroundQUICTwoPeersOneSilentRemote: two QUIC downloads through
// one bottleneck (R's link toward A), from B, which answers no ICMP echo,
// and from C, which does: both flows are held.
func TestBackgroundQUICTwoPeersOneSilentRemote(t *testing.T) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	p, _ := remotePath(t, downlinkBottleneck)
	c, addrC := addServer(t, p)
	silenceICMP(t, p.B)
	start(t, p.B, "lab", "helper", "quic-serve", "--listen", ":4433")
	start(t, c, "lab", "helper", "quic-serve", "--listen", ":4433")
	idle, _ := probeAll(t, p)
	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String())
		}
	}()
	run := []string{lanesBin, "run", "--socket", sock, "--lane", "background", "--"}
	qb := startQUICBulk(t, p, "down", run...)
	qc := startQUICBulkTo(t, p.A, fmt.Sprintf("%s:4433", addrC), "down", run...)
	time.Sleep(4 * time.Second)
	b0, c0, t0 := qb.bytes.Load(), qc.bytes.Load(), time.Now()
	time.Sleep(3 * time.Second)
	secs := time.Since(t0).Seconds()
	fromB, fromC := float64(qb.bytes.Load()-b0)*8/secs/remoteLinkBps, float64(qc.bytes.Load()-c0)*8/secs/remoteLinkBps
	on, lost := probeAll(t, p)
	st := status(t, sock)
	t.Logf("background-udp: %s", st.Components["background-udp"])
	probeCost(t, st)
	t.Logf("from the silent server %.2f, from the other %.2f of the link", fromB, fromC)
	for _, e := range episodes(t, sock) {
		if len(e.Peers) < 2 || e.Version == 0 {
			t.Errorf("not both peers probed, or no version probe to the one silent to ICMP: %+v", e)
		}
	}
	if fromB < 0.01 || fromC < 0.01 {
		t.Errorf("a download stalled: %.2f and %.2f of the link", fromB, fromC)
	}
	heldJudge(t, "two QUIC downloads, one server silent to ICMP", idle, on, lost, fromB+fromC)
}

// tbfSent is the bytes R's TBF on dev has sent.
func tbfSent(t *testing.T, p *testutil.Path, dev string) float64 {
	t.Helper()
	out, err := p.R.Command("tc", "-s", "qdisc", "show", "dev", dev).Output()
	m := regexp.MustCompile(`Sent (\d+) bytes`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("tc -s qdisc: %v %s", err, out)
	}
	n, _ := strconv.ParseFloat(string(m[1]), 64)
	return n
}

// quicCert writes a self-signed key and certificate for the ngtcp2 server.
func quicCert(t *testing.T) (key, cert string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lanes-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"lanes-test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, cert = filepath.Join(dir, "key.pem"), filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return key, cert
}

// runBg starts a command in ns, killed at the end of the test.
func runBg(t *testing.T, ns *testutil.NetNS, args ...string) *exec.Cmd {
	t.Helper()
	cmd := ns.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// ngtcp2Remote runs ngtcp2's HTTP/3 client against its server on B (each
// CUBIC), in dir, without lanes and in the background lane; the share is
// what R's bottleneck sent.
func ngtcp2Remote(t *testing.T, dir string, bottleneck bool) {
	sideBySide(t)
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("traffic test")
	}
	for _, b := range []string{"gtlsclient", "gtlsserver"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not installed (ngtcp2-client, ngtcp2-server: scripts/deps.sh test)", b)
		}
	}
	p, _ := remotePath(t, bottleneck)
	dev := "r-a"
	if bottleneck == uplinkBottleneck {
		dev = p.LinkRB
	}
	key, cert := quicCert(t)
	tmp := t.TempDir()
	// B stands for another machine: the suite's other streams must not
	// starve its server (two busy loops beside the test: p95 +27 to +35 ms
	// in 3 of 5 runs; with the server at nice -15, +15 to +23 ms in 5 of
	// 5). Real-time, as its own machine's CPU would be: the suite's three
	// streams load both cores more than two busy loops do.
	runBg(t, p.B, append(append([]string{}, realTime...), "gtlsserver", "-q", "--max-dyn-length=4G", "-d", tmp, p.AddrB.String(), "4433", key, cert)...)
	body := filepath.Join(tmp, "up.bin") // 1 GiB, sparse: more than the test sends
	if err := os.WriteFile(body, nil, 0o644); err != nil || os.Truncate(body, 1<<30) != nil {
		t.Fatalf("upload body: %v", err)
	}
	// The client real-time too: starved, it acknowledged in batches, each
	// letting the server send a window-sized burst (R's backlog sampled
	// every 36 ms: p95 27 ms with lanes), and read so late that its window
	// without lanes stood at +31 to +56 ms instead of +74. Beside two busy
	// loops and two other traffic tests the download read +12 to +34 ms in
	// 3 runs (one failed); real-time, +5 to +12 ms at 0.95-0.96 of the
	// link, +74 to +76 ms without lanes.
	client := func(prefix ...string) *exec.Cmd {
		args := append(append(append([]string{}, prefix...), realTime...), "gtlsclient", "-q", "--exit-on-all-streams-close")
		if dir == "up" {
			args = append(args, "-d", body, p.AddrB.String(), "4433", fmt.Sprintf("https://%s:4433/", p.AddrB))
		} else {
			args = append(args, "--download", t.TempDir(), p.AddrB.String(), "4433", fmt.Sprintf("https://%s:4433/4000000000", p.AddrB))
		}
		return runBg(t, p.A, args...)
	}
	time.Sleep(500 * time.Millisecond) // the server binds
	idle, _ := probeAll(t, p)
	c := client()
	time.Sleep(3 * time.Second)
	off, _ := probeAll(t, p)
	_ = c.Process.Kill()
	_ = c.Wait()
	time.Sleep(2 * time.Second) // R's queue drains

	d, sock := startDaemon(t, p.A, string(policy.DefaultYAML()), "--log-level", "debug")
	defer func() {
		if t.Failed() || os.Getenv("LANES_BGUDP_STEPS") != "" {
			t.Log(d.out.String())
		}
	}()
	client(lanesBin, "run", "--socket", sock, "--lane", "background", "--") // stopped at cleanup (runBg)
	time.Sleep(4 * time.Second)
	s0, t0 := tbfSent(t, p, dev), time.Now()
	time.Sleep(3 * time.Second)
	share := (tbfSent(t, p, dev) - s0) * 8 / time.Since(t0).Seconds() / remoteLinkBps
	on, lost := probeAll(t, p)
	st := status(t, sock)
	t.Logf("background-udp: %s", st.Components["background-udp"])
	probeCost(t, st)
	what := "QUIC (ngtcp2) " + dir + "load"
	t.Logf("%s alone: the bottleneck busy %.2f of the time (goal >= 0.90); probe p95 over idle +%v (goal <= 25ms)", what, share, pct(on, .95)-pct(idle, .95))
	// no rate is asked of the controller: a flow its own window limits
	// (ngtcp2's download, +73 ms without lanes) may keep the queue below
	// the target, unpoliced; the probe judges
	bgJudge(t, what, idle, off, on, lost, probeN, share)
}

func TestBackgroundNgtcp2UploadRemote(t *testing.T) { ngtcp2Remote(t, "up", uplinkBottleneck) }

func TestBackgroundNgtcp2DownloadRemote(t *testing.T) { ngtcp2Remote(t, "down", downlinkBottleneck) }
