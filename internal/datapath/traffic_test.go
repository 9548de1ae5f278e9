// traffic_test.go is the datapath's integration test with real TCP traffic
// between two namespaces over a veth pair whose A->B direction is a 10
// Mbit/s link with a 200 ms FIFO (TBF on an IFB behind B's ingress, like a
// modem upstream):
//
//	ns A: bulk sender (process in the background lane cgroup),
//	      request/response client, 1 MB uploader     -- veth-a (lanes here)
//	ns B: sink, echo server                           -- veth-b -> ifb: tbf 10mbit
//
// It compares foreground request/response latency under background load
// without and with the datapath (Shaped at 10 Mbit/s), checks that a
// foreground 1 MB upload and the background alone each get at least 80% of
// the link, and that the classifier and sock_ops counters agree (background
// hits by socket cookie, registered 3-tuples by tuple, SO_PRIORITY realtime).
package datapath

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

const (
	linkBps   = 10_000_000
	linkQueue = linkBps / 8 / 5 // 200 ms of FIFO at the link
)

// helperCgroupMount is where a helper process opening a datapath under
// `ip netns exec` (no cgroup mount visible) mounts cgroup2: its own path,
// not the shared ownCgroupMount, which another test process's cleanup
// could remove between its mkdir and its mount (ENOENT under load).
func helperCgroupMount(instance string) string { return "/run/lanes/cgroup2.dptest-" + instance }

// TestHelperProcess is the bulk sender run as a child process, so that it
// can live in a lane cgroup. It is not a test by itself.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv("LANES_DP_HELPER") {
	case "bulk":
	case "open": // open a datapath, say so, wait to be killed
		ownCgroupMount = helperCgroupMount(os.Getenv("LANES_DP_INSTANCE"))
		cfg := Config{StateDir: os.Getenv("LANES_DP_STATEDIR"), Interface: os.Getenv("LANES_DP_IFACE"), Instance: os.Getenv("LANES_DP_INSTANCE"), Yield: os.Getenv("LANES_DP_YIELD") != ""}
		if os.Getenv("LANES_DP_STRUCTOPS") == "update" {
			cfg.StructOps = structops.Update
		}
		d, err := Open(cfg)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if os.Getenv("LANES_DP_YIELD") != "" { // root's sockets background, held by a yield
			l, err := netlink.LinkByName(cfg.Interface)
			if err == nil {
				err = d.Host.Lanes.SetUIDLane(0, lane.Background)
			}
			if err == nil {
				stampForeground(t, d.Host, l.Attrs().Index) // until killed
			}
			if err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
		info, _ := d.ops.LanesSockops.Info()
		id, _ := info.ID()
		// "-" for a congestion control this kernel cannot run (capcc
		// before 5.13), so the line always has four fields.
		fmt.Println("ready", id, orDash(d.Host.Caps.CapCC().Name), orDash(d.Host.CCs.BackgroundCC().Name))
		time.Sleep(time.Minute)
		os.Exit(0)
	default:
		t.Skip("helper process only")
	}
	secs, _ := strconv.Atoi(os.Getenv("LANES_DP_SECONDS"))
	// cubic, Linux's default loss-based congestion control: it fills
	// whatever FIFO the link has (this machine may default to bbr).
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, "cubic")
		})
		return serr
	}}
	c, err := d.Dial("tcp", os.Getenv("LANES_DP_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]byte, 64<<10)
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for time.Now().Before(end) {
		c.SetWriteDeadline(end)
		if _, err := c.Write(buf); err != nil {
			break
		}
	}
	c.Close()
	os.Exit(0)
}

// emulateLink makes B's ingress a linkBps link with a linkQueue-byte FIFO.
func emulateLink(t *testing.T, ns *testutil.NetNS, ifname string) {
	t.Helper()
	ns.Do(t, func() error {
		veth, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		ifb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "ifb-lanes", TxQLen: 1000}}
		if err := netlink.LinkAdd(ifb); err != nil {
			return fmt.Errorf("add ifb (needs IFB): %w", err)
		}
		l, err := netlink.LinkByName("ifb-lanes")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		rate := uint64(linkBps / 8)
		tbf := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
			Rate: rate, Limit: linkQueue, Buffer: netlink.Xmittime(rate, 3028)}
		if err := netlink.QdiscAdd(tbf); err != nil {
			return fmt.Errorf("tbf on ifb: %w", err)
		}
		ing := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: veth.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
		if err := netlink.QdiscAdd(ing); err != nil {
			return fmt.Errorf("ingress qdisc: %w", err)
		}
		f := &netlink.U32{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: veth.Attrs().Index, Parent: netlink.MakeHandle(0xffff, 0), Priority: 1, Protocol: unix.ETH_P_ALL},
			Sel:         &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Keys: []netlink.TcU32Key{{Mask: 0, Val: 0}}},
			Actions:     []netlink.Action{netlink.NewMirredAction(l.Attrs().Index)},
		}
		if err := netlink.FilterAdd(f); err != nil {
			return fmt.Errorf("redirect ingress to ifb: %w", err)
		}
		return nil
	})
}

// sink counts bytes received on port in ns. Its sockets get a 4 MB receive
// buffer, as an Internet server's would, so that a bulk sender's window is
// not what limits the link's queue.
type sink struct{ n atomic.Int64 }

func startSink(t *testing.T, ns *testutil.NetNS, ip net.IP, port int) (*sink, string) {
	t.Helper()
	s := &sink{}
	var ln net.Listener
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	ns.Do(t, func() (err error) { ln, err = lc.Listen(context.Background(), "tcp", addr); return err })
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					s.n.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return s, addr
}

// rate measures the sink's receive rate in bit/s over d.
func (s *sink) rate(d time.Duration) float64 {
	a := s.n.Load()
	time.Sleep(d)
	return float64(s.n.Load()-a) * 8 / d.Seconds()
}

// settledRate measures rate over 1 s windows until one reaches want or
// within has passed; it returns the best window and all of them (in
// Mbit/s, for the log).
func settledRate(rate func(time.Duration) float64, want float64, within time.Duration) (float64, []float64) {
	best, all := 0.0, []float64(nil)
	for end := time.Now().Add(within); best < want && time.Now().Before(end); {
		all = append(all, rate(time.Second)/1e6)
		best = max(best, all[len(all)-1]*1e6)
	}
	return best, all
}

// startBulk runs the bulk sender in ns (in cgroup dir if not empty).
func startBulk(t *testing.T, ns *testutil.NetNS, addr, cgroupDir string, secs int) *exec.Cmd {
	t.Helper()
	cmd := ns.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "LANES_DP_HELPER=bulk", "LANES_DP_ADDR="+addr, "LANES_DP_SECONDS="+strconv.Itoa(secs))
	cmd.Stderr = os.Stderr
	if cgroupDir != "" {
		f, err := os.Open(cgroupDir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bulk sender: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// rrLatency measures n 1 KB request/response round trips on one connection
// from ns to an echo server and returns them sorted.
func rrLatency(t *testing.T, ns *testutil.NetNS, addr string, n int, gap time.Duration) []time.Duration {
	t.Helper()
	return rrOn(t, dialIn(t, ns, addr), n, gap)
}

func dialIn(t *testing.T, ns *testutil.NetNS, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	ns.Do(t, func() (err error) { c, err = net.DialTimeout("tcp", addr, 5*time.Second); return err })
	t.Cleanup(func() { c.Close() })
	return c
}

func rrOn(t *testing.T, c net.Conn, n int, gap time.Duration) []time.Duration {
	t.Helper()
	req, resp := make([]byte, 1024), make([]byte, 1024)
	var out []time.Duration
	for range n {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			t.Fatalf("request: %v", err)
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			t.Fatalf("response: %v", err)
		}
		out = append(out, time.Since(t0))
		time.Sleep(gap)
	}
	c.Close()
	slices.Sort(out)
	return out
}

func pct(d []time.Duration, p float64) time.Duration { return d[int(float64(len(d)-1)*p)] }

// upload sends size bytes from ns to a sink and returns the sink-side rate
// and whether all of it arrived within limit (else the rate so far).
func upload(t *testing.T, ns *testutil.NetNS, s *sink, addr string, size int, limit time.Duration) (float64, bool) {
	t.Helper()
	var c net.Conn
	ns.Do(t, func() (err error) { c, err = net.DialTimeout("tcp", addr, 5*time.Second); return err })
	defer c.Close()
	start := s.n.Load()
	t0 := time.Now()
	go func() {
		c.SetWriteDeadline(t0.Add(limit))
		c.Write(make([]byte, size))
	}()
	for s.n.Load()-start < int64(size) {
		if time.Since(t0) > limit {
			return float64((s.n.Load()-start)*8) / time.Since(t0).Seconds(), false
		}
		time.Sleep(time.Millisecond)
	}
	return float64(size*8) / time.Since(t0).Seconds(), true
}

func TestShapedForegroundUnderBackground(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: real traffic at 10 Mbit/s")
	}
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	emulateLink(t, p.B, p.LinkB)
	r := shapedRun{p: p, rounds: 25, gap: 40 * time.Millisecond}
	r.bulkSink, r.bulkAddr = startSink(t, p.B, p.AddrB, 9001)
	r.upSink, r.upAddr = startSink(t, p.B, p.AddrB, 9003)
	r.echoAddr = tcpEcho(t, p.B, p.AddrB, 9002)
	r.withoutLanes(t)
	r.shaped(t)
	r.log(t)
	r.check(t)
}

// shapedRun is TestShapedForegroundUnderBackground's bed (a veth whose far
// end emulates a 10 Mbit/s link with a 200 ms FIFO, a bulk sink, an upload
// sink and an echo server) and what it measured: the foreground's
// request/response latency and 1 MB upload idle, under a cubic background
// upload without lanes, and with lanes shaped just below the link.
type shapedRun struct {
	p                *testutil.Pair
	rounds           int
	gap              time.Duration
	bulkSink, upSink *sink
	bulkAddr, upAddr string
	echoAddr         string
	idle, off, on    []time.Duration
	idleUp, offUp    float64
	fgRate, bulkRate float64
	offDone, fgDone  bool
	windows          []float64
	st               Stats
}

// withoutLanes measures the idle link, then the background upload filling
// the link's FIFO without lanes.
func (r *shapedRun) withoutLanes(t *testing.T) {
	r.idle = rrLatency(t, r.p.A, r.echoAddr, r.rounds, r.gap)
	r.idleUp, _ = upload(t, r.p.A, r.upSink, r.upAddr, 1<<20, 10*time.Second)
	bulk := startBulk(t, r.p.A, r.bulkAddr, "", 30)
	time.Sleep(1500 * time.Millisecond)
	r.off = rrLatency(t, r.p.A, r.echoAddr, r.rounds, r.gap)
	if os.Getenv("LANES_DP_DEBUG") != "" {
		o, _ := r.p.B.Command("tc", "-s", "qdisc", "show", "dev", "ifb-lanes").CombinedOutput()
		t.Logf("link queue without lanes:\n%s", o)
	}
	r.offUp, r.offDone = upload(t, r.p.A, r.upSink, r.upAddr, 1<<20, 6*time.Second)
	bulk.Process.Kill()
	bulk.Wait()
	time.Sleep(500 * time.Millisecond)
}

// shaped measures the same with lanes shaped just below the link (the
// queue moves to our tree), the background upload in its lane, and then
// the background alone.
func (r *shapedRun) shaped(t *testing.T) {
	d := openIn(t, r.p.A, Config{Interface: r.p.LinkA, Instance: "tr1", Mode: Shaped, UplinkBps: linkBps})
	bgDir, _, err := d.LaneCgroup(lane.Background)
	if err != nil {
		t.Fatal(err)
	}
	bulk := startBulk(t, r.p.A, r.bulkAddr, bgDir, 30)
	time.Sleep(1500 * time.Millisecond)
	r.on = rrLatency(t, r.p.A, r.echoAddr, r.rounds, r.gap)
	r.fgRate, r.fgDone = upload(t, r.p.A, r.upSink, r.upAddr, 1<<20, 10*time.Second)
	if r.st, err = d.Stats(); err != nil {
		t.Fatal(err)
	}
	// Background alone now. The claim is work conservation, so the rate
	// is read over 1 s windows until one reaches 80 % of the link (10 s
	// at most), not over the 2 s right after the foreground: then the
	// background is still ramping up (sock_ops held it at 2 segments for
	// 500 ms after the foreground connection opened, and LEDBAT++ backed
	// off while the foreground's queue delayed it), and how long that
	// takes depends on the machine's load (6.9-9.1 Mbit/s measured in those
	// 2 s). A lane capped below 80 % of the link never gets there.
	r.bulkRate, r.windows = settledRate(r.bulkSink.rate, 0.8*linkBps, 10*time.Second)
	bulk.Process.Kill()
	bulk.Wait()
}

// log prints the run's table.
func (r *shapedRun) log(t *testing.T) {
	mb := func(bps float64, done bool) string {
		if !done {
			return fmt.Sprintf("unfinished after 6 s (%.2f Mbit/s)", bps/1e6)
		}
		return fmt.Sprintf("%.2f s (%.2f Mbit/s)", float64(8<<20)/bps, bps/1e6)
	}
	row := func(name string, rtt []time.Duration, up string) string {
		return fmt.Sprintf("\n  %-26s %10v %10v   %s", name, pct(rtt, .5).Round(time.Microsecond), pct(rtt, .99).Round(time.Microsecond), up)
	}
	t.Logf("foreground at %d Mbit/s, 200 ms link FIFO, cubic background upload (%d rounds):\n  %-26s %10s %10s   %s%s%s%s",
		linkBps/1_000_000, r.rounds, "", "1KB p50", "1KB p99", "1 MB upload",
		row("idle", r.idle, mb(r.idleUp, true)),
		row("background, no lanes", r.off, mb(r.offUp, r.offDone)),
		row("background, lanes shaped", r.on, mb(r.fgRate, r.fgDone)))
	t.Logf("background alone with lanes: %.2f Mbit/s (1 s windows after the foreground: %.2f Mbit/s)", r.bulkRate/1e6, r.windows)
	t.Logf("stats: %+v", r.st)
}

// check judges the run: the foreground protected, the background work
// conserving, each lane's class carrying its traffic.
func (r *shapedRun) check(t *testing.T) {
	if ratio := float64(pct(r.off, .5)) / float64(pct(r.on, .5)); ratio < 5 {
		testutil.TimingErrorf(t, "foreground p50 latency without lanes / with lanes = %.1f, want >= 5", ratio)
	}
	// The foreground's rate is held against the same 1 MB upload on the
	// idle link in this run, not against the link's nominal rate: on a
	// loaded 2-core machine the foreground under a shaped tree got 7.27
	// Mbit/s beside 9.57 idle in the same run (make stress-test, 2 busy
	// loops and other builds on the machine), while a foreground
	// that lanes fails to protect gets a few percent (0.22 Mbit/s above).
	// Under qemu without KVM (LANES_TIMING=unjudged) the rates are logged
	// only, but a foreground lanes fails to protect (a few percent) still
	// fails there.
	switch {
	case !r.fgDone || r.fgRate < 0.25*r.idleUp:
		t.Errorf("foreground 1 MB upload got %.2f Mbit/s, want >= 60%% of the %.2f Mbit/s it got on the idle link", r.fgRate/1e6, r.idleUp/1e6)
	case r.fgRate < 0.6*r.idleUp:
		testutil.TimingErrorf(t, "foreground 1 MB upload got %.2f Mbit/s, want >= 60%% of the %.2f Mbit/s it got on the idle link", r.fgRate/1e6, r.idleUp/1e6)
	}
	if r.bulkRate < 0.8*linkBps {
		testutil.TimingErrorf(t, "background alone got at most %.2f Mbit/s in 1 s windows over 10 s, want >= 80%% of %d Mbit/s (work conserving)", r.bulkRate/1e6, linkBps/1_000_000)
	}
	bg, in := r.st.Lanes[lane.Background], r.st.Lanes[lane.Interactive]
	if bg.Lane != lane.Background || bg.Bytes < 1<<20 {
		t.Errorf("background class carried %d bytes, want the bulk upload", bg.Bytes)
	}
	if in.Packets < uint64(r.rounds) {
		t.Errorf("interactive class carried %d packets, want at least %d", in.Packets, r.rounds)
	}
	if r.st.Classifier["cookie"] == 0 || r.st.Sockops["by_cgroup"] == 0 || r.st.Sockops["notsent_lowat"] == 0 {
		t.Errorf("background socket not resolved by sock_ops (cgroup -> cookie): match %v sockops %v", r.st.Classifier, r.st.Sockops)
	}
}

// TestRegisteredFlowAndPriority checks the 3-tuple path on real sockets (a
// flow registered before it connects goes to its lane, by cookie for TCP
// through sock_ops and by tuple for UDP) and that SO_PRIORITY = a lane's
// classid selects that class without the classifier.
func TestRegisteredFlowAndPriority(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "tr2"})
	addr := tcpEcho(t, p.B, p.AddrB, 9101)
	dst := netipAddr(p.AddrB)

	// TCP from a fixed source port, registered as background.
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: dst, DPort: 9101, SPort: 40123}, lane.Background); err != nil {
		t.Fatal(err)
	}
	echoFrom(t, p, addr, 40123)
	// UDP to a registered 3-tuple (no socket cookie entry: tuple match).
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: dst, DPort: 9102, SPort: 40124, Proto: unix.IPPROTO_UDP}, lane.Realtime); err != nil {
		t.Fatal(err)
	}
	// 10 datagrams from that tuple, 7 from a socket with SO_PRIORITY =
	// realtime's classid (HTB picks the class itself).
	sendRealtimeUDP(t, p, 40124, 9102, 9103)
	flows, err := d.Lanes.Flows()
	if err != nil || len(flows) != 2 {
		t.Fatalf("Flows() = %v, %v", flows, err)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats: %+v", st)
	if st.Sockops["by_tuple"] != 1 || st.Classifier["cookie"] == 0 {
		t.Errorf("registered TCP flow not resolved by sock_ops: %v %v", st.Sockops, st.Classifier)
	}
	if st.Lanes[lane.Background].Packets == 0 {
		t.Error("background class empty")
	}
	if st.Classifier["tuple"] != 10 {
		t.Errorf("tuple matches %d, want the 10 UDP datagrams", st.Classifier["tuple"])
	}
	// realtime class: 10 by tuple + 7 by SO_PRIORITY (not seen by the classifier)
	if rt := st.Lanes[lane.Realtime]; rt.Packets != 17 || rt.Classified != 10 {
		t.Errorf("realtime class %d packets (%d classified), want 17 (10)", rt.Packets, rt.Classified)
	}
	if err := d.Lanes.DeleteFlow(flows[0].FlowKey); err != nil {
		t.Fatal(err)
	}
	if f, _ := d.Lanes.Flows(); len(f) != 1 {
		t.Errorf("after delete: %v", f)
	}
}

// echoFrom sends 32 KB from the given source port to the echo server at
// addr and reads them back.
func echoFrom(t *testing.T, p *testutil.Pair, addr string, sport int) {
	t.Helper()
	p.A.Do(t, func() error {
		dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.AddrA, Port: sport}, Timeout: 3 * time.Second}
		c, err := dl.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		buf := make([]byte, 32<<10)
		if _, err := c.Write(buf); err != nil {
			return err
		}
		_, err = io.ReadFull(c, buf)
		return err
	})
}

// sendRealtimeUDP sends 10 datagrams from sport to tuplePort and 7 from a
// socket with SO_PRIORITY = realtime's classid to prioPort, each received
// by a listener in B (so no ICMP port unreachable fails the next send).
func sendRealtimeUDP(t *testing.T, p *testutil.Pair, sport, tuplePort, prioPort int) {
	t.Helper()
	for _, port := range []int{tuplePort, prioPort} {
		var pc net.PacketConn
		p.B.Do(t, func() (err error) {
			pc, err = net.ListenPacket("udp", net.JoinHostPort(p.AddrB.String(), strconv.Itoa(port)))
			return err
		})
		t.Cleanup(func() { pc.Close() })
	}
	p.A.Do(t, func() error {
		u, err := net.DialUDP("udp", &net.UDPAddr{IP: p.AddrA, Port: sport}, &net.UDPAddr{IP: p.AddrB, Port: tuplePort})
		if err != nil {
			return err
		}
		defer u.Close()
		for range 10 {
			u.Write([]byte("rt"))
		}
		v, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: p.AddrB, Port: prioPort})
		if err != nil {
			return err
		}
		defer v.Close()
		raw, _ := v.SyscallConn()
		raw.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PRIORITY, int(lane.Realtime.ClassID()))
		})
		if err != nil {
			return fmt.Errorf("SO_PRIORITY: %w", err)
		}
		for range 7 {
			v.Write([]byte("prio"))
		}
		return nil
	})
}

// TestShapedThreeLanes checks strict priority across all three lanes in
// shaped mode, where our HTB is the bottleneck: with an interactive and a
// background bulk upload at once, background gets (almost) nothing and
// interactive the link; and realtime request/response under the
// interactive upload is far faster than interactive request/response.
func TestShapedThreeLanes(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: real traffic at 10 Mbit/s")
	}
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	bgSink, bgAddr := startSink(t, p.B, p.AddrB, 9401)
	inSink, inAddr := startSink(t, p.B, p.AddrB, 9402)
	echoAddr := tcpEcho(t, p.B, p.AddrB, 9403)
	// Background keeps CUBIC (no LEDBAT++, which would yield to the
	// interactive queue by itself): what keeps it off the link here is the
	// tree's strict priority alone, and without it the two CUBIC uploads
	// would share the link about evenly.
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "tl1", Mode: Shaped, UplinkBps: linkBps, BackgroundTarget: -1})
	bgDir, _, err := d.LaneCgroup(lane.Background)
	if err != nil {
		t.Fatal(err)
	}
	bg := startBulk(t, p.A, bgAddr, bgDir, 30)
	in := startBulk(t, p.A, inAddr, "", 30)
	time.Sleep(1500 * time.Millisecond)
	b0, i0 := bgSink.n.Load(), inSink.n.Load()
	time.Sleep(2 * time.Second)
	bgRate, inRate := float64(bgSink.n.Load()-b0)*4, float64(inSink.n.Load()-i0)*4 // bit/s over 2 s

	interactive := rrLatency(t, p.A, echoAddr, 15, 40*time.Millisecond)
	rc := dialIn(t, p.A, echoAddr)
	la := rc.LocalAddr().(*net.TCPAddr)
	if err := d.Lanes.SetFlowLane(FlowKey{Dst: netipAddr(p.AddrB), DPort: 9403, SPort: uint16(la.Port)}, lane.Realtime); err != nil {
		t.Fatal(err)
	}
	realtime := rrOn(t, rc, 15, 40*time.Millisecond)
	bg.Process.Kill()
	in.Process.Kill()

	t.Logf("interactive + background bulk at %d Mbit/s: interactive %.2f Mbit/s, background %.2f Mbit/s", linkBps/1_000_000, inRate/1e6, bgRate/1e6)
	t.Logf("1 KB request/response under the interactive upload: interactive p50 %v, realtime p50 %v", pct(interactive, .5), pct(realtime, .5))
	// Shares of what was sent, and the link kept busy, rather than shares
	// of the nominal link: on a loaded machine the interactive sender's
	// short queue (TCP small queues) runs dry between its wake-ups and the
	// background rightly fills the gaps (interactive 8.04 / background 0.52
	// and 8.22 / 1.27 Mbit/s measured at load 28); without the priority
	// background would have about half.
	// Where the senders cannot keep the link busy (qemu without KVM: 4.4 of
	// 10 Mbit/s sent), nothing contends and background rightly takes what
	// it sends: the priority is judged only on a busy link.
	switch total := inRate + bgRate; {
	case total < 0.7*linkBps:
		testutil.TimingErrorf(t, "the senders kept the link %.0f%% busy (%.2f Mbit/s; want >= 70%%): no contention to judge the priority by", 100*total/linkBps, total/1e6)
	case bgRate > 0.25*total:
		t.Errorf("background %.2f Mbit/s (want < 25%% of the %.2f sent), interactive %.2f Mbit/s", bgRate/1e6, total/1e6, inRate/1e6)
	}
	// TCP small queues keep each local bulk socket's share of the qdisc to
	// about a millisecond of its rate, so the interactive queue is short:
	// the ratio is modest (about 6 here) and the bound generous.
	if ratio := float64(pct(interactive, .5)) / float64(pct(realtime, .5)); ratio < 3 {
		testutil.TimingErrorf(t, "interactive/realtime p50 latency ratio %.1f, want >= 3", ratio)
	}
}

// orDash is s, or "-" when s is empty (a field of the helper's ready line).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
