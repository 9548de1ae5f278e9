// lab_test.go: the testbed's tests. Integration tests run as root in fresh
// namespaces with real traffic; the slow ones are skipped with -short.
package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestMain lets the test binary act as the lab's helper programs, which
// topologies start as `ip netns exec NS <this binary> lab helper ...`.
func TestMain(m *testing.M) {
	if os.Getenv("LANES_LAB_HELPER") == "1" {
		os.Exit(HelperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func testEnv(t *testing.T) *Env {
	return &Env{Out: testWriter{t}, Quick: true, RealTime: emu.DefaultRealTimePriority}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

func TestFixedLinkAccuracy(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("15 s of real traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fa, err := MeasureFixedLink(ctx, testEnv(t), 10e6, 50*time.Millisecond, 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("goodput %.3f Mbit/s (expected %.3f, %+.2f%%; link busy %.3f of the window, %+.2f%% of the rate over that), RTT median %.2f ms %v, up stats %+v",
		fa.GoodputBps/1e6, fa.ExpectedBps/1e6, fa.GoodputErrPct, fa.BusyFraction, fa.BusyGoodputErrPct, fa.RTTMedianMs, fa.RTTms, fa.UpStats)
	// The emulator's rate error is the goodput against the payload rate
	// over the time its serialiser had something to send: at load 28 the
	// hosts left the link idle part of the time and the goodput fell 11.7 %
	// below the rate, which is the machine's doing, not the emulator's.
	// A link that ran slow or fast fails whatever the load.
	if fa.BusyGoodputErrPct < -5 || fa.BusyGoodputErrPct > 5 {
		// A stall of the emulator (its real-time thread starved, e.g. by
		// other real-time work on the machine) fills the queue and costs
		// goodput: name it, so the failure says where to look.
		t.Errorf("goodput %.3f Mbit/s not within 5%% of %.3f x %.3f busy (emulator: %d stalls, worst %v late)",
			fa.GoodputBps/1e6, fa.ExpectedBps/1e6, fa.BusyFraction, fa.UpStats.StallEvents, fa.UpStats.MaxLate)
	}
	if fa.BusyFraction < 0.5 {
		t.Errorf("the link was busy only %.3f of the window: the bulk upload did not keep it busy", fa.BusyFraction)
	}
	// The emulator's delay accuracy is the least RTT seen: scheduling delays
	// of a loaded machine only add to single samples (the median is logged).
	if len(fa.RTTms) == 0 {
		t.Fatal("no RTT samples")
	}
	minRTT := fa.RTTms[0]
	for _, r := range fa.RTTms {
		minRTT = min(minRTT, r)
	}
	if minRTT < 99 || minRTT > 101 {
		t.Errorf("idle RTT %.2f ms (least of %d) not within 1 ms of 100 ms", minRTT, len(fa.RTTms))
	}
}

// The stall check: a 15 s upload through 20 Mbit/s, RTT 256 ms (the coop
// experiments' AP) sees no spurious RTO and at most 0.5 % of packets
// delivered emu.StallLate late. Without real-time scheduling of the emulator
// it failed on this machine at load 15 (4.6 % late, worst 154 ms); with it,
// 0–0.014 % (stalls.go).
func TestStallCheck(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("15 s of real traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sc, err := MeasureStalls(ctx, testEnv(t), 20e6, 128*time.Millisecond, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", sc)
	if !sc.RealTime {
		t.Log("the emulator ran at normal priority (real-time scheduling refused)")
	}
	if sc.SpuriousRTOs > 0 {
		t.Errorf("%d spurious retransmission timeouts", sc.SpuriousRTOs)
	}
	if f := sc.LateFraction(); f > 0.005 {
		t.Errorf("emulator stalled: %.2f%% of %d packets >= %v late (worst %v)", 100*f, sc.Packets, emu.StallLate, sc.MaxLate)
	}
	if sc.GoodputBps < 10e6 {
		t.Errorf("goodput %.2f Mbit/s: the upload hardly ran", sc.GoodputBps/1e6)
	}
}

func TestTraceReplayAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("8 s real-time replay")
	}
	tr, err := loadTrace("TMobile-LTE-short.up")
	if err != nil {
		t.Fatal(err)
	}
	ta, err := MeasureTrace(context.Background(), tr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", ta)
	if ta.ErrPct < -1 || ta.ErrPct > 1 {
		t.Errorf("delivered %d packets, trace offers %d (%+.2f%%, want within 1%%)", ta.Delivered, ta.Expected, ta.ErrPct)
	}
	if ta.LostOpportunities != 0 {
		t.Errorf("%d opportunities passed with packets waiting", ta.LostOpportunities)
	}
}

func nsExists(name string) bool {
	_, err := os.Stat("/var/run/netns/" + name)
	return err == nil
}

// TestSetupTeardown: a run's namespaces and processes disappear when its
// context is cancelled (what Ctrl-C/SIGTERM do to `lanes lab run`).
func TestSetupTeardown(t *testing.T) {
	testutil.RequireRoot(t)
	c := &LBEConfig{UpRate: 2e6, DownRate: 4e6, Delay: 10 * time.Millisecond, DownQueuePackets: 100,
		Warmup: 30 * time.Second, CC: "cubic", Reps: 1, SizesKB: []int{10}, Dirs: []string{"upload"},
		Methods: []LBEMethod{LBEMethods[1]}}
	ctx, cancel := context.WithCancel(context.Background())
	var seen []string
	var pids []int
	done := make(chan error, 1)
	go func() { _, _, err := RunLBE(ctx, testEnv(t), c); done <- err }()
	// Wait until the testbed is up with its background uploader running.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(pids) < 3 {
		seen, pids = nil, nil
		ents, _ := os.ReadDir("/var/run/netns")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), topo.NSPrefix+strconv.Itoa(os.Getpid())+"-") {
				seen = append(seen, e.Name())
			}
		}
		pids = helperPids(t)
		time.Sleep(200 * time.Millisecond)
	}
	if len(seen) != 3 || len(pids) < 3 {
		cancel()
		t.Fatalf("testbed not up: namespaces %v, helper pids %v", seen, pids)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run ended with %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop within 20 s of cancellation")
	}
	for _, n := range seen {
		if nsExists(n) {
			t.Errorf("namespace %s left behind", n)
		}
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); !strings.Contains(string(b), ") Z") {
				t.Errorf("helper process %d left running", p)
			}
		}
	}
}

// helperPids lists this test binary's helper children (LANES_LAB_HELPER=1).
func helperPids(t *testing.T) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	me := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(b, []byte("LANES_LAB_HELPER=1")) {
			continue
		}
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(me) { // ppid
			out = append(out, pid)
		}
	}
	return out
}

// TestSharedMedium: three hosts behind one access point share one uplink
// (one rate, one queue); together they fill it and none is starved.
func TestSharedMedium(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("12 s of real traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bed, err := NewBed(testEnv(t), "cubic")
	if err != nil {
		t.Fatal(err)
	}
	defer bed.Close()
	rate := 6e6
	apUp := bed.Emu.NewUplink(emu.LinkConfig{Rate: rate, Delay: 20 * time.Millisecond, QueueBytes: 60000})
	apDown := bed.Emu.NewDownlink(emu.LinkConfig{Rate: rate, Delay: 20 * time.Millisecond, QueueBytes: 60000})
	hosts, srv := addSharedHosts(t, bed, apUp, apDown)
	trackers := make([]*seqTracker, len(hosts))
	for i, h := range hosts {
		trackers[i] = &seqTracker{src: h.Addr, dport: 80}
	}
	bed.Emu.OnUp = func(b []byte) {
		for _, tr := range trackers {
			tr.see(b)
		}
	}
	bed.Start(ctx)
	startBulkUploads(t, ctx, srv, hosts)
	time.Sleep(4 * time.Second)
	goodput := measureGoodput(trackers, 8*time.Second)
	var total, sumSq float64
	for i, g := range goodput {
		t.Logf("%s: %.2f Mbit/s", hosts[i].Name, g/1e6)
		total += g
		sumSq += g * g
	}
	jain := total * total / (float64(len(goodput)) * sumSq)
	want := rate * 1448 / 1500
	t.Logf("total %.2f Mbit/s (link %.2f after headers), Jain %.3f, shared uplink %+v", total/1e6, want/1e6, jain, apUp.Stats())
	if total < 0.93*want || total > 1.02*want {
		t.Errorf("hosts together got %.2f Mbit/s through one %.2f Mbit/s medium", total/1e6, want/1e6)
	}
	// Three cubic flows in one drop-tail queue share it only roughly over
	// 8 s (Jain 0.77-0.99 in our runs); what must hold is that nobody is
	// starved, i.e. they really compete in one queue at one rate.
	for i, g := range goodput {
		if g < 0.1*total {
			t.Errorf("%s got %.2f Mbit/s of %.2f: starved", hosts[i].Name, g/1e6, total/1e6)
		}
	}
	if jain < 0.6 {
		t.Errorf("Jain's index %.3f", jain)
	}
}

// addSharedHosts adds three hosts behind the access point's links and a
// wired server.
func addSharedHosts(t *testing.T, bed *Bed, apUp, apDown *emu.Link) ([]*topo.Node, *topo.Node) {
	t.Helper()
	var hosts []*topo.Node
	for _, name := range []string{"h1", "h2", "h3"} {
		n, err := bed.AddHost(name, "cubic", apUp, apDown, HostOpts{})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, n)
	}
	srv, err := bed.AddHost("server", "cubic", bed.Emu.NewUplink(emu.LinkConfig{}), bed.Emu.NewDownlink(emu.LinkConfig{}), HostOpts{})
	if err != nil {
		t.Fatal(err)
	}
	return hosts, srv
}

// startBulkUploads starts the lab's server on srv:80 and a bulk upload to it
// from each host.
func startBulkUploads(t *testing.T, ctx context.Context, srv *topo.Node, hosts []*topo.Node) {
	t.Helper()
	p, err := srv.Start("serve", "--listen", ":80")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := p.Line(ctx, 10*time.Second); err != nil || l != "ready" {
		t.Fatalf("server: %q %v", l, err)
	}
	for _, h := range hosts {
		b, err := h.Start("bulk", "--url", "http://"+srv.Addr.String()+":80")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Line(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// measureGoodput is each tracker's goodput, bit/s, over the next d.
func measureGoodput(trackers []*seqTracker, d time.Duration) []float64 {
	s1 := make([]int64, len(trackers))
	for i, tr := range trackers {
		s1[i] = tr.value()
	}
	t1 := time.Now()
	time.Sleep(d)
	el := time.Since(t1).Seconds()
	g := make([]float64, len(trackers))
	for i, tr := range trackers {
		g[i] = float64(tr.value()-s1[i]) * 8 / el
	}
	return g
}

// TestSharedMediumBroadcast: a host's IPv4 broadcast and IPv6 link-local
// multicast cross the shared medium once up and once down and reach every
// other host behind it, not the sender and not the wired server.
func TestSharedMediumBroadcast(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bed, err := NewBed(testEnv(t), "cubic")
	if err != nil {
		t.Fatal(err)
	}
	defer bed.Close()
	cfg := emu.LinkConfig{Rate: 10e6, Delay: 2 * time.Millisecond, QueueBytes: 60000}
	apUp, apDown := bed.Emu.NewUplink(cfg), bed.Emu.NewDownlink(cfg)
	names := []string{"h1", "h2", "h3", "server"}
	for _, name := range names {
		up, down := apUp, apDown
		if name == "server" {
			up, down = bed.Emu.NewUplink(emu.LinkConfig{}), bed.Emu.NewDownlink(emu.LinkConfig{})
		}
		if _, err := bed.AddHost(name, "cubic", up, down, HostOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	var upB, downB atomic.Int64 // broadcasts leaving the medium's two directions
	bed.Emu.OnUp = func(b []byte) {
		if isTestBroadcast(b) {
			upB.Add(1)
		}
	}
	bed.Emu.OnDown = func(b []byte) {
		if isTestBroadcast(b) {
			downB.Add(1)
		}
	}
	bed.Start(ctx)
	for _, family := range []string{"udp4", "udp6"} {
		upB.Store(0)
		downB.Store(0)
		socks := map[string]*net.UDPConn{}
		for _, name := range names {
			c, err := broadcastSocket(ctx, bed.Nodes[name], family, testBroadcastPort)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			socks[name] = c
		}
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), testBroadcastPort)
		if family == "udp6" {
			dst = netip.AddrPortFrom(netip.MustParseAddr("ff02::1").WithZone(TUNName), testBroadcastPort)
		}
		if _, err := socks["h1"].WriteToUDPAddrPort([]byte("hello"), dst); err != nil {
			t.Fatalf("%s: %v", family, err)
		}
		for _, name := range names {
			// the sender's own kernel loops its broadcast back, the medium does not
			want := 1
			if name == "server" {
				want = 0
			}
			if got := countDatagrams(socks[name], 500*time.Millisecond); got != want {
				t.Errorf("%s: %s heard the broadcast %d times, want %d", family, name, got, want)
			}
		}
		if up, down := upB.Load(), downB.Load(); up != 1 || down != 1 {
			t.Errorf("%s: the broadcast crossed the medium %d times up and %d times down, want once each", family, up, down)
		}
	}
	// the hosts' own link-local multicast (MLD, router solicitations) is
	// relayed as well
	if n := bed.Emu.Broadcast.Load(); n < 2 {
		t.Errorf("emulator counted %d relayed broadcasts, want at least the test's 2", n)
	}
}

const testBroadcastPort = 7499

// isTestBroadcast reports whether b is a UDP datagram of the test's port
// to 255.255.255.255 or ff02::1.
func isTestBroadcast(b []byte) bool {
	switch {
	case len(b) >= 28 && b[0]>>4 == 4 && b[9] == 17 && [4]byte(b[16:20]) == [4]byte{255, 255, 255, 255}:
		ihl := int(b[0]&0xf) * 4
		return len(b) >= ihl+4 && int(b[ihl+2])<<8|int(b[ihl+3]) == testBroadcastPort
	case len(b) >= 48 && b[0]>>4 == 6 && b[6] == 17:
		return netip.AddrFrom16([16]byte(b[24:40])) == netip.MustParseAddr("ff02::1") && int(b[42])<<8|int(b[43]) == testBroadcastPort
	}
	return false
}

// broadcastSocket opens a UDP socket on the node's TUN that sends and
// hears IPv4 broadcasts (udp4) or link-local multicast (udp6; it first
// waits until the TUN's link-local address has passed duplicate address
// detection, so that it can be the source).
func broadcastSocket(ctx context.Context, n *topo.Node, family string, port int) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := n.Do(func() error {
		if family == "udp6" {
			if err := waitLinkLocal(ctx, TUNName); err != nil {
				return err
			}
		}
		lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.BindToDevice(int(fd), TUNName)
				if family == "udp4" {
					serr = errors.Join(serr, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1))
				}
			})
			return errors.Join(err, serr)
		}}
		addr := fmt.Sprintf("0.0.0.0:%d", port)
		if family == "udp6" {
			addr = fmt.Sprintf("[::]:%d", port)
		}
		pc, err := lc.ListenPacket(ctx, family, addr)
		if err == nil {
			c = pc.(*net.UDPConn)
		}
		return err
	})
	return c, err
}

// waitLinkLocal waits until dev (in the calling thread's namespace) has a
// usable IPv6 link-local address.
func waitLinkLocal(ctx context.Context, dev string) error {
	for {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s has no usable IPv6 link-local address (%v): %w", dev, addrs, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// countDatagrams counts what c receives within d.
func countDatagrams(c *net.UDPConn, d time.Duration) int {
	n := 0
	buf := make([]byte, 2048)
	c.SetReadDeadline(time.Now().Add(d))
	for {
		if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
			return n
		}
		n++
	}
}
