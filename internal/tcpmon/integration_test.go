// integration_test.go: the monitor against real connections in fresh
// network namespaces (root only): agreement with ss -ti, a cwnd pinned by a
// sock_ops program, congestion state under induced loss, bytes_acked
// against the receiver's count, filters, bad namespaces and sockets
// vanishing mid-dump.
package tcpmon

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// findFlow returns the flow with the given local and remote ports.
func findFlow(fl []Flow, sport, dport uint16) (Flow, bool) {
	for _, f := range fl {
		if strings.HasSuffix(f.Src, ":"+strconv.Itoa(int(sport))) && strings.HasSuffix(f.Dst, ":"+strconv.Itoa(int(dport))) {
			return f, true
		}
	}
	return Flow{}, false
}

func localPort(c net.Conn) uint16 { return uint16(c.LocalAddr().(*net.TCPAddr).Port) }

var (
	ssCwnd  = regexp.MustCompile(`\bcwnd:(\d+)`)
	ssRTT   = regexp.MustCompile(`\brtt:([\d.]+)/([\d.]+)`)
	ssAcked = regexp.MustCompile(`\bbytes_acked:(\d+)`)
)

// ssInfo is what the test reads of one socket in ss -ti's output.
type ssInfo struct {
	cwnd  uint32
	rttMs float64
	acked uint64
}

// parseSS reads `ss -tinH` output by local address: ss prints one line
// with the addresses, then one with the details.
func parseSS(t *testing.T, out string) map[string]ssInfo {
	t.Helper()
	bySrc := map[string]ssInfo{}
	var local string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " ") {
			for _, f := range strings.Fields(line) {
				if strings.Contains(f, ":") {
					local = f
					break
				}
			}
			continue
		}
		m1, m2, m3 := ssCwnd.FindStringSubmatch(line), ssRTT.FindStringSubmatch(line), ssAcked.FindStringSubmatch(line)
		if m1 == nil || m2 == nil || m3 == nil || local == "" {
			t.Fatalf("cannot parse ss output:\n%s", out)
		}
		var in ssInfo
		cw, _ := strconv.Atoi(m1[1])
		in.cwnd = uint32(cw)
		in.rttMs, _ = strconv.ParseFloat(m2[1], 64)
		in.acked, _ = strconv.ParseUint(m3[1], 10, 64)
		bySrc[local] = in
		local = ""
	}
	return bySrc
}

func TestAgreesWithSS(t *testing.T) {
	testutil.SkipUnlessCommand(t, "ss")
	p := testutil.NewVethPair(t)
	srv := newSink(t, p.B, net.JoinHostPort(p.AddrB.String(), "0"))
	addr := net.JoinHostPort(p.AddrB.String(), strconv.Itoa(int(srv.port())))
	// Three connections that moved different amounts of data.
	var conns []*net.TCPConn
	for i, d := range []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond} {
		c := dialIn(t, p.A, addr)
		if d == 0 {
			c.Write(make([]byte, 1000*(i+1)))
		} else {
			writeFor(context.Background(), c, 64<<10, 0, d)
		}
		conns = append(conns, c)
	}
	// Let the flows go idle so both tools see the same values.
	time.Sleep(300 * time.Millisecond)

	s := newSampler(t, Config{NetNSPath: p.A.Path(), Filter: Filter{RemotePort: srv.port()}})
	fl, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.A.Command("ss", "-tinH", "state", "established", fmt.Sprintf("( dport = :%d )", srv.port())).CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v: %s", err, out)
	}
	fl2, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	bySrc := parseSS(t, string(out))
	if len(bySrc) != len(conns) {
		t.Fatalf("ss shows %d sockets, want %d:\n%s", len(bySrc), len(conns), out)
	}
	for _, c := range conns {
		f, ok := findFlow(fl, localPort(c), srv.port())
		f2, ok2 := findFlow(fl2, localPort(c), srv.port())
		in, ok3 := bySrc[c.LocalAddr().String()]
		if !ok || !ok2 || !ok3 {
			t.Fatalf("socket %s: tcpmon %v/%v, ss %v", c.LocalAddr(), ok, ok2, ok3)
		}
		t.Logf("%s: ss cwnd %d rtt %.3fms bytes_acked %d; tcpmon cwnd %d srtt %dus bytes_acked %d",
			c.LocalAddr(), in.cwnd, in.rttMs, in.acked, f.Cwnd, f.SRTT, f.BytesAcked)
		if in.cwnd != f.Cwnd || f.Cwnd != f2.Cwnd {
			t.Errorf("%s cwnd: ss %d, tcpmon %d / %d", c.LocalAddr(), in.cwnd, f.Cwnd, f2.Cwnd)
		}
		if in.acked != f.BytesAcked || f.BytesAcked != f2.BytesAcked {
			t.Errorf("%s bytes_acked: ss %d, tcpmon %d / %d", c.LocalAddr(), in.acked, f.BytesAcked, f2.BytesAcked)
		}
		// ss prints srtt/1000 with %g: compare within its rounding.
		if math.Abs(in.rttMs-float64(f.SRTT)/1000) > 0.0015 {
			t.Errorf("%s rtt: ss %.3fms, tcpmon %.3fms", c.LocalAddr(), in.rttMs, float64(f.SRTT)/1000)
		}
		if f.PID != os.Getpid() || f.Comm == "" {
			t.Errorf("process: %d/%q, want pid %d", f.PID, f.Comm, os.Getpid())
		}
	}
	var total uint64
	for _, f := range fl {
		total += f.BytesAcked - 1 // minus the SYN
	}
	if total != uint64(srv.total.Load()) {
		t.Errorf("sum of bytes_acked-1 %d, receiver counted %d", total, srv.total.Load())
	}
}

// newCgroup makes a throw-away cgroup v2 directory and returns it open.
func newCgroup(t *testing.T) (string, *os.File) {
	t.Helper()
	root := "/sys/fs/cgroup/unified"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		root = "/sys/fs/cgroup"
		var st unix.Statfs_t
		if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			t.Skip("needs cgroup v2")
		}
	}
	dir := filepath.Join(root, testutil.UniqueName("lanes-tcpmon-"))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		// The helper must have exited (its Cleanup, registered later, runs first).
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	return dir, f
}

func TestCwndPinnedBySockops(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	spec, err := ebpf.LoadCollectionSpec("testdata/cwndclamp.o")
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewVethPair(t)
	srv := newSink(t, p.B, net.JoinHostPort(p.AddrB.String(), "0"))
	addr := net.JoinHostPort(p.AddrB.String(), strconv.Itoa(int(srv.port())))
	if err := spec.Variables["port"].Set(uint32(srv.port())); err != nil {
		t.Fatal(err)
	}
	var objs struct {
		Prog *ebpf.Program `ebpf:"cwnd_clamp"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Skipf("load sock_ops program: %v", err)
	}
	defer objs.Prog.Close()
	dir, cg := newCgroup(t)
	l, err := link.AttachCgroup(link.CgroupOptions{Path: dir, Attach: ebpf.AttachCGroupSockOps, Program: objs.Prog})
	if err != nil {
		t.Skipf("attach sock_ops: %v", err)
	}
	t.Cleanup(func() { l.Close() })

	s := newSampler(t, Config{NetNS: p.A.Handle, Interval: 20 * time.Millisecond, Filter: Filter{RemotePort: srv.port()}})

	// Pinned sender (in the cgroup) and an unpinned control sender, both
	// writing as fast as they can for 1.5 s (6 s under qemu without KVM,
	// where starting the two sender processes alone can take 1.5 s).
	run, hold := testutil.Patience(1500*time.Millisecond), testutil.Patience(2*time.Second)
	startSender(t, p.A, int(cg.Fd()), addr, 64<<10, 0, run, hold)
	var pinnedPID int
	pinned, control := map[uint32]int{}, map[uint32]int{}
	var reduced []Flow // pinned samples below the clamp
	// Tell the flows apart by the cgroup each socket was created in.
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	startSender(t, p.A, -1, addr, 64<<10, 0, run, hold)
	all := sampleUntil(t, s, run, func([]Flow) bool { return false })
	busy := 0
	for _, fl := range all {
		for _, f := range fl {
			if f.State != "ESTAB" || f.BytesAcked < 100<<10 {
				continue
			}
			busy++
			if f.CgroupID == st.Ino {
				pinned[f.Cwnd]++
				pinnedPID = f.PID
				if f.Cwnd < 10 {
					reduced = append(reduced, f)
				}
			} else {
				control[f.Cwnd]++
			}
		}
	}
	t.Logf("cwnd histogram: pinned %v, control %v (pinned sender pid %d)", pinned, control, pinnedPID)
	if len(pinned) == 0 || busy == 0 {
		t.Fatalf("no samples of the pinned flow (%d samples)", len(all))
	}
	checkPinnedCwnd(t, pinned, reduced, 10)
	grew := false
	for cw := range control {
		if cw > 10 {
			grew = true
		}
	}
	if !grew {
		t.Errorf("control flow's cwnd never exceeded 10 (%v): the pin test proves nothing", control)
	}
}

// checkPinnedCwnd: the clamp bounds the pinned flow's cwnd from above,
// so the monitor must never report more than the clamp, and mostly the
// clamp itself. The kernel may still take the cwnd below it (likely: a
// drop in the veth's backlog, which the control flow's bursts share,
// comes back to TCP as NET_XMIT_DROP and tcp_enter_cwr, which lowers
// ssthresh and then the cwnd; seen once in CI, in 1 of 70 samples, and
// not reproduced in 28 runs). Such a sample must show a reduction (a state other than
// open, or ssthresh under the clamp); a cwnd under the clamp without one
// would be a misread.
func checkPinnedCwnd(t *testing.T, pinned map[uint32]int, reduced []Flow, clamp uint32) {
	t.Helper()
	n := 0
	for cw, c := range pinned {
		n += c
		if cw > clamp {
			t.Errorf("pinned flow reported with cwnd %d (%d samples) above the clamp %d", cw, c, clamp)
		}
	}
	if 2*pinned[clamp] < n {
		t.Errorf("pinned flow at its clamp %d in %d of %d samples (%v), want most", clamp, pinned[clamp], n, pinned)
	}
	for _, f := range reduced {
		if f.CAState == "open" && f.SSThresh >= clamp {
			t.Errorf("pinned flow's cwnd %d under the clamp with no reduction (state %s, ssthresh %d)", f.Cwnd, f.CAState, f.SSThresh)
		} else {
			t.Logf("pinned flow's cwnd %d under the clamp after a reduction: state %s, ssthresh %d, retransmitted %d", f.Cwnd, f.CAState, f.SSThresh, f.TotalRetrans)
		}
	}
}

// attachDropper puts a cls_bpf filter on link's ingress inside ns that
// drops about pct percent of packets (bpf_get_prandom_u32() % 100 < pct):
// loss on the path, seen by the sender only from the ACKs. (On the sender's
// egress, kernels before 6.x hand the drop back to TCP as a local
// congestion signal: CWR and a resend of the same skb, no retransmission.)
func attachDropper(t *testing.T, ns *testutil.NetNS, linkName string, pct int32) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SchedCLS,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.FnGetPrandomU32.Call(),
			asm.Mod.Imm32(asm.R0, 100),
			asm.JLT.Imm(asm.R0, pct, "drop"),
			asm.Mov.Imm(asm.R0, 0), // TC_ACT_OK
			asm.Return(),
			asm.Mov.Imm(asm.R0, 2).WithSymbol("drop"), // TC_ACT_SHOT
			asm.Return(),
		},
	})
	if err != nil {
		t.Skipf("load drop program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	h, err := netlink.NewHandleAt(ns.Handle, unix.NETLINK_ROUTE) // only rtnetlink: xfrm and nfnetlink may be modules not loaded
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lk, err := h.LinkByName(linkName)
	if err != nil {
		t.Fatal(err)
	}
	qd := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: lk.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscAdd(qd); err != nil {
		t.Fatalf("add clsact: %v", err)
	}
	f := &netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: lk.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Protocol: unix.ETH_P_ALL, Priority: 1},
		Fd: prog.FD(), Name: "drop", DirectAction: true}
	if err := h.FilterAdd(f); err != nil {
		t.Fatalf("add drop filter: %v", err)
	}
}

func TestCAStateLeavesOpenUnderLoss(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("slow")
	}
	p := testutil.NewVethPair(t)
	srv := newSink(t, p.B, net.JoinHostPort(p.AddrB.String(), "0"))
	c := dialIn(t, p.A, net.JoinHostPort(p.AddrB.String(), strconv.Itoa(int(srv.port()))))
	attachDropper(t, p.B, p.LinkB, 3) // the data's way in at the receiver

	s := newSampler(t, Config{NetNS: p.A.Handle, Interval: MinInterval, Filter: Filter{RemotePort: srv.port()}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go writeFor(ctx, c, 64<<10, 0, 5*time.Second)
	states := map[string]int{}
	var last Flow
	sampleUntil(t, s, 5*time.Second, func(fl []Flow) bool {
		if f, ok := findFlow(fl, localPort(c), srv.port()); ok {
			states[f.CAState]++
			last = f
		}
		return len(states) > 1 && last.TotalRetrans > 0
	})
	cancel()
	t.Logf("ca_state samples %v, total_retrans %d, lost %d", states, last.TotalRetrans, last.Lost)
	left := 0
	for st, n := range states {
		if st != "open" {
			left += n
		}
	}
	if left == 0 {
		t.Errorf("ca_state never left open under 3%% loss: %v", states)
	}
	if last.TotalRetrans == 0 {
		t.Error("no retransmissions reported under loss")
	}
}

// ackedWhenIdle samples c's bytes_acked (less the SYN) every 100 ms until
// it and the receiver's count both reach sent, for 20 s at most: the last
// ACK and the receiver's last read may come late on a loaded machine.
func ackedWhenIdle(t *testing.T, s *Sampler, c net.Conn, srv *sink, sent int64) int64 {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		f, _ := findFlow(fl, localPort(c), srv.port())
		acked := int64(f.BytesAcked) - 1
		if (acked == sent && srv.total.Load() == sent) || time.Now().After(end) {
			return acked
		}
	}
}

func TestBytesAckedMatchesReceiver(t *testing.T) {
	p := testutil.NewVethPair(t)
	srv := newSink(t, p.B, net.JoinHostPort(p.AddrB.String(), "0"))
	c := dialIn(t, p.A, net.JoinHostPort(p.AddrB.String(), strconv.Itoa(int(srv.port()))))
	const interval = 100 * time.Millisecond
	s := newSampler(t, Config{NetNS: p.A.Handle, Interval: interval, Filter: Filter{RemotePort: srv.port()}})
	// The receiver's kernel, sampled right after each sample of the sender:
	// nothing can be acked that the receiver has not received, so its
	// bytes_received then bounds the sender's bytes_acked with no timing
	// slack (the receiving program's reads may lag any time on a loaded
	// machine: they bound it from below only, an interval earlier).
	rs := newSampler(t, Config{NetNS: p.B.Handle, Interval: interval, Filter: Filter{LocalPort: srv.port()}})
	recvAfter := func() int64 {
		fl, err := rs.Sample()
		if err != nil {
			t.Fatal(err)
		}
		f, ok := findFlow(fl, srv.port(), localPort(c))
		if !ok {
			return -1
		}
		return int64(f.BytesRecv)
	}

	// The writer runs until 8 samples have seen the flow (not for a fixed
	// time: under make stress-test, at load 30, one sample pair took most
	// of the 1.5 s the writer used to run).
	var sent int64
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent = writeFor(ctx, c, 32<<10, 5*time.Millisecond, time.Minute)
	}()
	var recv []int64 // receiver's bytes_received after each sample
	seen := 0
	all := sampleUntil(t, s, time.Minute, func(fl []Flow) bool {
		recv = append(recv, recvAfter())
		if _, ok := findFlow(fl, localPort(c), srv.port()); ok {
			seen++
		}
		return seen >= 8
	})
	stop()
	wg.Wait()
	checked := 0
	for i, fl := range all {
		f, ok := findFlow(fl, localPort(c), srv.port())
		if !ok || recv[i] < 0 {
			continue
		}
		data := int64(f.BytesAcked) - 1 // bytes_acked counts the SYN
		lo := srv.countAt(f.Time.Add(-interval))
		if data < lo || data > recv[i] {
			t.Errorf("at %v: bytes_acked-1 = %d, receiver had read %d an interval before and received %d after", f.Time.Format("15:04:05.000"), data, lo, recv[i])
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("only %d samples of the flow", checked)
	}
	// Once idle the two agree exactly.
	acked := ackedWhenIdle(t, s, c, srv, sent)
	if acked != srv.total.Load() || srv.total.Load() != sent {
		t.Errorf("idle: bytes_acked-1 = %d, receiver %d, sender wrote %d", acked, srv.total.Load(), sent)
	}
	t.Logf("checked %d samples; %d bytes", checked, sent)
}

// TestRequestSockets: a connection the listener has not completed (here
// held back by TCP_DEFER_ACCEPT: the server keeps a request socket until
// data comes, while the client is already ESTABLISHED) is one SYN-RECV flow
// in both backends, as sock_diag reports it.
func TestRequestSockets(t *testing.T) {
	ns := testutil.NewNetNS(t)
	var ln net.Listener
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, 60)
		}); err != nil {
			return err
		}
		return serr
	}}
	ns.Do(t, func() (err error) { ln, err = lc.Listen(context.Background(), "tcp", "127.0.0.1:0"); return err })
	t.Cleanup(func() { ln.Close() })
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	c := dialIn(t, ns, ln.Addr().String())
	for _, backend := range iterBackends(t) {
		s := newSampler(t, Config{NetNS: ns.Handle, Backend: backend, Filter: Filter{Port: port}})
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		srv, ok := findFlow(fl, port, localPort(c))
		if _, cok := findFlow(fl, localPort(c), port); len(fl) != 2 || !ok || !cok || srv.State != "SYN-RECV" || srv.Cookie == 0 {
			t.Errorf("%s: %+v, want the client and the server's request socket (SYN-RECV)", backend, fl)
		}
	}
}

// TestCloseKeepsOtherFiles: a sampler closes only what it opened. Close
// once closed fd 0 (the zero NsHandle counts as open), so a socket that
// got fd 0 next was closed under its owner: TestFilters saw a server end
// go to FIN-WAIT-2 between two samples.
func TestCloseKeepsOtherFiles(t *testing.T) {
	if _, err := unix.FcntlInt(0, unix.F_GETFD, 0); err != nil {
		f, err := os.Open(os.DevNull) // fd 0 is free: this takes it
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	for range 2 {
		s, err := New(Config{Backend: BackendDiag})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := unix.FcntlInt(0, unix.F_GETFD, 0); err != nil {
		t.Fatalf("fd 0 after two samplers were closed: %v", err)
	}
}

// filterCase is one Filter of TestFilters and the flows it must match.
type filterCase struct {
	name string
	f    Filter
	want int // flows
}

func TestFilters(t *testing.T) {
	ns := testutil.NewNetNS(t)
	srv := newSink(t, ns, "127.0.0.1:0")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	c1 := dialIn(t, ns, addr)
	c2 := dialIn(t, ns, addr)
	c1.Write([]byte("hello"))
	srv.waitAccepted(t, 2)
	cg := ownCgroupV2(t)
	comm, _ := os.ReadFile("/proc/self/comm")
	backends := iterBackends(t)
	for _, tc := range []filterCase{
		{"none", Filter{}, 4},
		{"port either side", Filter{Port: srv.port()}, 4},
		{"remote port", Filter{RemotePort: srv.port()}, 2},
		{"local port", Filter{LocalPort: srv.port()}, 2},
		{"one client", Filter{LocalPort: localPort(c1)}, 1},
		{"both ends of c2", Filter{Port: localPort(c2)}, 2},
		{"local prefix", Filter{Local: mustPrefix("127.0.0.0/8"), Port: srv.port()}, 4},
		{"other prefix", Filter{Remote: mustPrefix("10.0.0.0/8")}, 0},
		{"pid", Filter{PID: os.Getpid(), Port: srv.port()}, 4},
		{"other pid", Filter{PID: 1, Port: srv.port()}, 0},
		{"comm", Filter{Comm: strings.TrimSpace(string(comm)), Port: srv.port()}, 4},
		{"cgroup", Filter{Cgroup: cg, Port: srv.port()}, 4},
		{"cgroup only", Filter{Cgroup: cg}, 4},
		{"cgroup and one port", Filter{CgroupID: 1<<62 + 1, Port: srv.port()}, 0},
	} {
		for _, backend := range backends {
			checkFilter(t, ns, backend, tc)
		}
	}
	checkConfigRefused(t)
	checkLaneFilter(t, ns, c1)
}

// checkFilter samples ns through backend with tc's filter and checks the
// flows it matched and, for filters the kernel can apply, that the kernel
// sent only the matches.
func checkFilter(t *testing.T, ns *testutil.NetNS, backend string, tc filterCase) {
	t.Helper()
	name := backend + " " + tc.name
	s, err := New(Config{NetNS: ns.Handle, Filter: tc.f, Backend: backend})
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	fl, err := s.Sample()
	s.Close()
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if len(fl) != tc.want {
		t.Errorf("%s: %d flows, want %d", name, len(fl), tc.want)
		for _, f := range fl {
			t.Logf("  %s %s %s pid %d inode %d cgroup %d", f.Src, f.Dst, f.State, f.PID, f.Inode, f.CgroupID)
		}
	}
	// Port-only filters run in the kernel: it sends just the matches.
	portOnly := tc.f.Port != 0 || tc.f.LocalPort != 0 || tc.f.RemotePort != 0
	portOnly = portOnly && tc.f.PID == 0 && tc.f.Comm == "" && !tc.f.Local.IsValid() && !tc.f.Remote.IsValid()
	if st := s.Stats(); portOnly && (!st.KernelFilter || s.Dumped != tc.want) {
		t.Errorf("%s: kernel filter %v, kernel sent %d sockets, want %d", name, st.KernelFilter, s.Dumped, tc.want)
	}
	if tc.f.Cgroup != "" && (!s.Stats().KernelFilter || s.Dumped != tc.want) {
		t.Errorf("%s: cgroup filter in kernel %v, kernel sent %d sockets", name, s.Stats().KernelFilter, s.Dumped)
	}
}

// checkConfigRefused: configurations New must refuse.
func checkConfigRefused(t *testing.T) {
	t.Helper()
	if _, err := New(Config{Filter: Filter{Cgroup: "/nonexistent/cgroup"}}); err == nil {
		t.Error("missing cgroup accepted")
	}
	if _, err := New(Config{Filter: Filter{Lanes: []lane.Lane{lane.Background}}}); err == nil {
		t.Error("lane filter without a lane map accepted")
	}
	if _, err := New(Config{Interval: time.Millisecond}); err == nil {
		t.Error("1ms interval accepted")
	}
}

// checkLaneFilter: with c1 in the background lane through the LaneOf
// hook, a lane filter matches just c1's socket.
func checkLaneFilter(t *testing.T, ns *testutil.NetNS, c1 *net.TCPConn) {
	t.Helper()
	bg := c1LaneOf(c1, ns, t)
	s := newSampler(t, Config{NetNS: ns.Handle, LaneOf: bg, Filter: Filter{Lanes: []lane.Lane{lane.Background}}})
	fl, err := s.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) != 1 || fl[0].Lane != lane.Background || !strings.HasSuffix(fl[0].Src, fmt.Sprintf(":%d", localPort(c1))) {
		t.Errorf("lane filter: %+v", fl)
	}
}

// c1LaneOf returns a LaneOf that puts the socket of c (found by its cookie,
// SO_COOKIE) in the background lane.
func c1LaneOf(c *net.TCPConn, _ *testutil.NetNS, t *testing.T) func(uint64) (lane.Lane, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var cookie uint64
	rc.Control(func(fd uintptr) {
		cookie, err = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
	})
	if err != nil {
		t.Fatalf("SO_COOKIE: %v", err)
	}
	return func(c uint64) (lane.Lane, bool) {
		if c == cookie {
			return lane.Background, true
		}
		return lane.Unset, false
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// ownCgroupV2 is the cgroup v2 directory of this process.
func ownCgroupV2(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
				if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err == nil {
					return filepath.Join(root, rest)
				}
			}
		}
	}
	t.Skip("no cgroup v2 membership")
	return ""
}

func TestBadNetNS(t *testing.T) {
	if _, err := New(Config{NetNSPath: "/nonexistent/netns"}); err == nil {
		t.Error("missing namespace path accepted")
	}
	f := filepath.Join(t.TempDir(), "not-a-netns")
	os.WriteFile(f, nil, 0o644)
	if _, err := New(Config{NetNSPath: f}); err == nil {
		t.Error("a regular file accepted as a namespace")
	}
	if os.Geteuid() == 0 {
		// A path that exists but denies access: a directory.
		if _, err := New(Config{NetNSPath: t.TempDir()}); err == nil {
			t.Error("a directory accepted as a namespace")
		}
	}
}

func TestSocketsVanishingMidDump(t *testing.T) {
	ns := testutil.NewNetNS(t)
	srv := newSink(t, ns, "127.0.0.1:0")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(srv.port())))
	// Keep 200 connections alive and churn others as fast as possible.
	for i := 0; i < 100; i++ {
		dialIn(t, ns, addr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var churned int
	wg.Add(1)
	go func() {
		defer wg.Done()
		var d net.Dialer
		ns.Run(func() error {
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				c.Write([]byte("x"))
				c.Close()
				churned++
			}
			return nil
		})
	}()
	s := newSampler(t, Config{NetNS: ns.Handle, Interval: MinInterval})
	for i := 0; i < 100; i++ {
		fl, err := s.Sample()
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if len(fl) < 200 {
			t.Fatalf("sample %d: %d flows, want the 200 stable ones at least", i, len(fl))
		}
	}
	cancel()
	wg.Wait()
	st := s.Stats()
	t.Logf("churned %d connections during 100 samples; dumps interrupted %d, bad messages %d", churned, st.DumpIntr, st.BadMsgs)
	if st.BadMsgs != 0 {
		t.Errorf("%d undecodable messages", st.BadMsgs)
	}
}

func TestIPv6AndIPv4InOneSample(t *testing.T) {
	ns := testutil.NewNetNS(t)
	s4 := newSink(t, ns, "127.0.0.1:0")
	s6 := newSink(t, ns, "[::1]:0")
	dialIn(t, ns, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(s4.port()))))
	dialIn(t, ns, net.JoinHostPort("::1", strconv.Itoa(int(s6.port()))))
	time.Sleep(20 * time.Millisecond)
	for _, v4only := range []bool{false, true} {
		s := newSampler(t, Config{NetNS: ns.Handle, IPv4Only: v4only})
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		var n4, n6 int
		for _, f := range fl {
			if strings.HasPrefix(f.Src, "[::1]") {
				n6++
			} else if strings.HasPrefix(f.Src, "127.0.0.1") {
				n4++
			}
		}
		want6 := 2
		if v4only {
			want6 = 0
		}
		if n4 != 2 || n6 != want6 {
			t.Errorf("IPv4Only=%v: %d IPv4 and %d IPv6 flows, want 2 and %d: %+v", v4only, n4, n6, want6, fl)
		}
	}
}
