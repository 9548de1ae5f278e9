// lifecycle_test.go checks the datapath's lifecycle as root in fresh
// namespaces: what Open installs, that Close leaves no qdisc, filter,
// program, link or cgroup of ours, that traffic survives a simulated crash
// and Cleanup + Open repair it, that a foreign root qdisc is refused, and
// that two datapaths in two namespaces run at once without seeing each
// other's sockets.
package datapath

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

// abandon drops the datapath the way SIGKILL would: every file descriptor
// closes, nothing is removed.
func (d *Datapath) abandon() {
	cgUsersMu.Lock()
	delete(cgUsers, laneCgroupBase(d.cfg.CgroupRoot, d.cfg.Instance))
	cgUsersMu.Unlock()
	d.opsLink.Close()
	d.ops.Close()
	if d.cc != nil {
		d.cc.Close()
	}
	if d.bg != nil {
		d.bg.Close()
	}
	d.cls.Close()
	d.Host.ns.close()
	d.Host.guard.closed = true
	d.egress.ns.close()
	d.egress.closed = true
}

func requireCgroup2(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	root, err := resolveCgroupRoot("")
	if err != nil {
		t.Skipf("needs cgroup v2: %v", err)
	}
	testCgroupRoot = root
	testStateDir = t.TempDir()
	t.Cleanup(func() { testStateDir = "" }) // the default, as a test without it had
	return root
}

// testStateDir is the state files' directory of the test running now
// (HostConfig.StateDir): a temporary one from requireCgroup2 on.
var testStateDir string

// testCgroupRoot is the cgroup v2 mount the datapath resolves by default.
var testCgroupRoot string

func openIn(t *testing.T, ns *testutil.NetNS, cfg Config) *Datapath {
	t.Helper()
	var d *Datapath
	if cfg.StateDir == "" {
		cfg.StateDir = testStateDir
	}
	ns.Do(t, func() (err error) { d, err = Open(cfg); return err })
	t.Cleanup(func() { d.Close() })
	return d
}

// usualTxQLen gives a test's veth the txqueuelen `ip link add` gives
// (1000), not the 0 the netlink library's zero LinkAttrs asks for: on 5.10
// a veth's txqueuelen of 0 read 1000 after Open and Close although lanes
// had not written it (it set BQL there), so the restore could not be
// checked against 0.
func usualTxQLen(t *testing.T, ns *testutil.NetNS, ifname string) {
	t.Helper()
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		return netlink.LinkSetTxQLen(l, 1000)
	})
}

// treeState describes what is on the link, for assertions.
type treeState struct {
	rootKind    string
	rootHandle  uint32
	filters     []string
	classes     int
	txqlen      int
	cgroupExist bool
}

func inspect(t *testing.T, ns *testutil.NetNS, ifname, instance string) treeState {
	t.Helper()
	var s treeState
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		s.txqlen = l.Attrs().TxQLen
		qs, err := netlink.QdiscList(l)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Attrs().Parent == netlink.HANDLE_ROOT {
				s.rootKind, s.rootHandle = q.Type(), q.Attrs().Handle
			}
		}
		if s.rootHandle != 0 {
			fs, err := netlink.FilterList(l, s.rootHandle)
			if err != nil {
				return err
			}
			for _, f := range fs {
				if bf, ok := f.(*netlink.BpfFilter); ok {
					s.filters = append(s.filters, bf.Name)
				}
			}
			cs, err := netlink.ClassList(l, s.rootHandle)
			if err != nil {
				return err
			}
			s.classes = len(cs)
		}
		return nil
	})
	_, err := os.Stat(laneCgroupBase(testCgroupRoot, instance))
	s.cgroupExist = err == nil
	return s
}

// attachedSockops lists the sock_ops programs attached at the cgroup root.
func attachedSockops(t *testing.T) []ebpf.ProgramID {
	t.Helper()
	f, err := os.Open(testCgroupRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: ebpf.AttachCGroupSockOps})
	if err != nil {
		t.Fatalf("query cgroup programs: %v", err)
	}
	var ids []ebpf.ProgramID
	for _, p := range r.Programs {
		ids = append(ids, p.ID)
	}
	return ids
}

func progID(t *testing.T, p *ebpf.Program) ebpf.ProgramID {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return id
}

// tcpEcho starts a TCP echo server in ns on port and returns its address.
func tcpEcho(t *testing.T, ns *testutil.NetNS, ip net.IP, port int) string {
	t.Helper()
	var ln net.Listener
	addr := net.JoinHostPort(ip.String(), fmt.Sprint(port))
	ns.Do(t, func() (err error) { ln, err = net.Listen("tcp", addr); return err })
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return addr
}

// roundTrip dials addr from ns and echoes one message.
func roundTrip(ns *testutil.NetNS, addr string) error {
	return ns.Run(func() error {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		msg := []byte("lanes")
		if _, err := c.Write(msg); err != nil {
			return err
		}
		got := make([]byte, len(msg))
		_, err = io.ReadFull(c, got)
		return err
	})
}

func TestOpenCloseLeavesNothing(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	usualTxQLen(t, p.A, p.LinkA)
	before := inspect(t, p.A, p.LinkA, "lc1")
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "lc1"})
	ours := progID(t, d.ops.LanesSockops)

	s := inspect(t, p.A, p.LinkA, "lc1")
	if s.rootKind != "htb" || s.rootHandle != rootHandle {
		t.Errorf("root qdisc %s %x, want htb 1:", s.rootKind, s.rootHandle)
	}
	if !slices.Equal(s.filters, []string{"lanes:lc1"}) {
		t.Errorf("filters %v, want [lanes:lc1]", s.filters)
	}
	if s.classes != 7 { // 1:1, the three lanes, the ACK class, the QUIC/UDP class's shaper, held ACKs
		t.Errorf("%d classes, want 7", s.classes)
	}
	if bql := d.egress.devq.BQLLimit; len(bql) > 0 {
		// Before 6.8 every device shows BQL files, veth too (the kernel
		// hides them for LLTX devices since): limit_max was set there,
		// and txqueuelen is left alone.
		if s.txqlen != before.txqlen {
			t.Errorf("txqueuelen %d with BQL set (%v), want %d unchanged", s.txqlen, bql, before.txqlen)
		}
	} else if s.txqlen != 2 {
		t.Errorf("txqueuelen %d, want 2 (veth has no BQL)", s.txqlen)
	}
	if !s.cgroupExist {
		t.Error("lane cgroups missing")
	}
	if !slices.Contains(attachedSockops(t), ours) {
		t.Error("sock_ops program not attached at the cgroup root")
	}
	for _, l := range lane.All {
		path, id, err := d.LaneCgroup(l)
		if err != nil || id == 0 || filepath.Base(path) != l.String() {
			t.Errorf("LaneCgroup(%s) = %q, %d, %v", l, path, id, err)
		}
	}
	addr := tcpEcho(t, p.B, p.AddrB, 7001)
	if err := roundTrip(p.A, addr); err != nil {
		t.Fatalf("traffic through the datapath: %v", err)
	}
	st, err := d.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Lanes[lane.Interactive].Packets == 0 || st.Classifier["default"] == 0 || st.Sockops["connect"] == 0 {
		t.Errorf("no interactive traffic counted: %+v", st)
	}

	if err := d.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	after := inspect(t, p.A, p.LinkA, "lc1")
	if after.rootHandle != 0 || len(after.filters) != 0 || after.classes != 0 {
		t.Errorf("after Close: root %s %x filters %v classes %d", after.rootKind, after.rootHandle, after.filters, after.classes)
	}
	if after.txqlen != before.txqlen {
		t.Errorf("txqueuelen %d after Close, was %d", after.txqlen, before.txqlen)
	}
	if after.cgroupExist {
		t.Error("lane cgroups left behind")
	}
	if slices.Contains(attachedSockops(t), ours) {
		t.Error("sock_ops program still attached")
	}
	if _, err := os.Stat(stateFile(testStateDir, p.LinkA, "lc1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left behind: %v", err)
	}
	if err := roundTrip(p.A, addr); err != nil {
		t.Fatalf("traffic after Close: %v", err)
	}
}

func TestForeignRootRefused(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	p.A.Do(t, func() error {
		l, err := netlink.LinkByName(p.LinkA)
		if err != nil {
			return err
		}
		tbf := &netlink.Tbf{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(5, 0), Parent: netlink.HANDLE_ROOT},
			Rate: 1 << 20, Limit: 1 << 16, Buffer: netlink.Xmittime(1<<20, 1<<14)}
		return netlink.QdiscAdd(tbf)
	})
	err := p.A.Run(func() error {
		d, err := Open(Config{StateDir: testStateDir, Interface: p.LinkA, Instance: "lc2"})
		if err == nil {
			d.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("Open replaced a foreign root qdisc")
	}
	t.Logf("refused as expected: %v", err)
	if s := inspect(t, p.A, p.LinkA, "lc2"); s.rootKind != "tbf" || s.cgroupExist {
		t.Errorf("foreign qdisc touched or cgroups left: %+v", s)
	}
}

func TestCrashCleanupReopen(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	usualTxQLen(t, p.A, p.LinkA)
	before := inspect(t, p.A, p.LinkA, "lc3")
	addr := tcpEcho(t, p.B, p.AddrB, 7002)
	var d *Datapath
	p.A.Do(t, func() (err error) {
		d, err = Open(Config{StateDir: testStateDir, Interface: p.LinkA, Instance: "lc3", Mode: Shaped, UplinkBps: 50_000_000})
		return err
	})
	ours := progID(t, d.ops.LanesSockops)
	d.abandon()

	// Fail-open: the tree and classifier stay, sock_ops is gone, traffic flows.
	s := inspect(t, p.A, p.LinkA, "lc3")
	if s.rootKind != "htb" || len(s.filters) != 1 {
		t.Errorf("after crash: %+v (expected the tree to stay)", s)
	}
	if slices.Contains(attachedSockops(t), ours) {
		t.Error("sock_ops still attached after its process died")
	}
	if err := roundTrip(p.A, addr); err != nil {
		t.Fatalf("traffic after crash: %v", err)
	}

	ifb := BgIfbName(d.Egress().Ifindex())
	if !linkExists(t, p.A, ifb) {
		t.Errorf("after crash: %s gone with the daemon (expected it to stay until cleanup)", ifb)
	}
	p.A.Do(t, func() error { return CleanupAt(p.LinkA, "lc3", testCgroupRoot, testStateDir) })
	s = inspect(t, p.A, p.LinkA, "lc3")
	if s.rootHandle != 0 || s.cgroupExist || s.txqlen != before.txqlen {
		t.Errorf("after Cleanup: %+v (txqueuelen before %d)", s, before.txqlen)
	}
	if linkExists(t, p.A, ifb) {
		t.Errorf("after Cleanup: %s left", ifb)
	}

	// Open over a crashed run without Cleanup adopts and replaces too.
	var d2 *Datapath
	p.A.Do(t, func() (err error) {
		d2, err = Open(Config{StateDir: testStateDir, Interface: p.LinkA, Instance: "lc3"})
		return err
	})
	d2.abandon()
	d3 := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "lc3"})
	if err := roundTrip(p.A, addr); err != nil {
		t.Fatalf("traffic after reopen: %v", err)
	}
	if err := d3.Close(); err != nil {
		t.Fatal(err)
	}
	if s := inspect(t, p.A, p.LinkA, "lc3"); s.rootHandle != 0 || s.txqlen != before.txqlen || s.cgroupExist {
		t.Errorf("after reopen+Close: %+v (txqueuelen before %d)", s, before.txqlen)
	}
	if linkExists(t, p.A, ifb) {
		t.Errorf("after reopen+Close: %s left", ifb)
	}
}

// linkExists says whether ns has a link named name.
func linkExists(t *testing.T, ns *testutil.NetNS, name string) bool {
	t.Helper()
	found := false
	ns.Do(t, func() error {
		_, err := netlink.LinkByName(name)
		found = err == nil
		return nil
	})
	return found
}

func TestTwoNamespaces(t *testing.T) { twoNamespaces(t, "tna", "tnb", 7003) }

// TestTwoNamespacesByInode: the same where sock_ops lacks
// bpf_get_netns_cookie (before 5.15): each program tells its namespace's
// sockets by the namespace's inode.
func TestTwoNamespacesByInode(t *testing.T) {
	useNetnsCookie = func() bool { return false }
	defer func() { useNetnsCookie = sockops.HaveNetnsCookie }()
	twoNamespaces(t, "tia", "tib", 7013)
}

func twoNamespaces(t *testing.T, instA, instB string, port int) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	// One datapath on each end: two daemons, two namespaces, one cgroup root.
	da := openIn(t, p.A, Config{Interface: p.LinkA, Instance: instA})
	db := openIn(t, p.B, Config{Interface: p.LinkB, Instance: instB})
	addrB := tcpEcho(t, p.B, p.AddrB, port)
	for range 3 {
		if err := roundTrip(p.A, addrB); err != nil {
			t.Fatal(err)
		}
	}
	sa, err := da.Stats()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	// A's sock_ops sees only A's connects, B's only B's accepts.
	if sa.Sockops["connect"] != 3 || sa.Sockops["accept"] != 0 {
		t.Errorf("A sock_ops: %v, want 3 connects, 0 accepts", sa.Sockops)
	}
	if sb.Sockops["accept"] != 3 || sb.Sockops["connect"] != 0 {
		t.Errorf("B sock_ops: %v, want 3 accepts, 0 connects", sb.Sockops)
	}
	if err := da.Close(); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(p.A, addrB); err != nil {
		t.Fatal(err)
	}
	sb2, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if sb2.Sockops["accept"] != 4 {
		t.Errorf("B after A closed: %v, want 4 accepts", sb2.Sockops)
	}
}

func netipAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// TestTwoInterfacesOneHost: one host manages two interfaces with a single
// sock_ops program attached and one classifier program run by both trees;
// closing one egress leaves the other's tree and the lane cgroups alone.
func TestTwoInterfacesOneHost(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	p.A.Do(t, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va2"}, PeerName: "vb2"}); err != nil {
			return err
		}
		l, err := netlink.LinkByName("va2")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	var h *Host
	var e1, e2 *Egress
	p.A.Do(t, func() (err error) {
		if h, err = OpenHost(HostConfig{StateDir: testStateDir, Instance: "mi1"}); err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		if e1, err = OpenEgress(h, EgressConfig{Interface: p.LinkA}); err != nil {
			return err
		}
		t.Cleanup(func() { e1.Close() })
		e2, err = OpenEgress(h, EgressConfig{Interface: "va2", Mode: Shaped, UplinkBps: 10_000_000})
		if err == nil {
			t.Cleanup(func() { e2.Close() })
		}
		return err
	})
	ops := progID(t, h.ops.LanesSockops)
	if n := countID(attachedSockops(t), ops); n != 1 {
		t.Errorf("host's sock_ops program attached %d times, want 1", n)
	}
	cls := progID(t, h.cls.LanesClassify)
	for _, ifname := range []string{p.LinkA, "va2"} {
		if got := filterProg(t, p.A, ifname); got != cls {
			t.Errorf("%s: filter runs program %d, want the host's classifier %d", ifname, got, cls)
		}
	}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	if s := inspect(t, p.A, "va2", "mi1"); s.rootKind != "htb" || !s.cgroupExist {
		t.Fatalf("closing one egress touched the other or the host: %+v", s)
	}
	if s := inspect(t, p.A, p.LinkA, "mi1"); s.rootHandle != 0 {
		t.Errorf("closed egress left its tree: %+v", s)
	}
	if err := errors.Join(e2.Close(), h.Close()); err != nil {
		t.Fatal(err)
	}
	if inspect(t, p.A, "va2", "mi1").cgroupExist {
		t.Error("lane cgroups left after the host's Close")
	}
	if countID(attachedSockops(t), ops) != 0 {
		t.Error("sock_ops still attached after the host's Close")
	}
}

func countID(ids []ebpf.ProgramID, id ebpf.ProgramID) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// filterProg is the id of the BPF program of the lanes filter on ifname.
func filterProg(t *testing.T, ns *testutil.NetNS, ifname string) ebpf.ProgramID {
	t.Helper()
	var id ebpf.ProgramID
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		fs, err := netlink.FilterList(l, rootHandle)
		if err != nil {
			return err
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok {
				id = ebpf.ProgramID(bf.Id)
			}
		}
		return nil
	})
	return id
}

// openHelper is a child process that opened a datapath (TestHelperProcess,
// LANES_DP_HELPER=open) and waits to be killed. Its first line named its
// sock_ops program and congestion controls ("-" where this kernel runs
// none).
type openHelper struct {
	cmd    *exec.Cmd
	prog   ebpf.ProgramID
	cc, bg string
}

// startOpenHelper starts an openHelper in p.A for the instance, with the
// extra environment, and waits for its first line. When the test ends it is
// killed and its cgroup mount point removed: under `ip netns exec` the
// helper sees no cgroup mount and mounts its own in its private mount
// namespace; killed, it cannot remove the mount point on the host's /run
// (empty and unmounted by then).
func startOpenHelper(t *testing.T, p *testutil.Pair, instance string, env ...string) *openHelper {
	t.Helper()
	cmd := p.A.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(append(os.Environ(), "LANES_DP_HELPER=open", "LANES_DP_IFACE="+p.LinkA,
		"LANES_DP_INSTANCE="+instance, "LANES_DP_STATEDIR="+testStateDir), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		_ = os.Remove(helperCgroupMount(instance))
	})
	h := &openHelper{cmd: cmd}
	line := make([]byte, 128)
	n, _ := out.Read(line)
	if _, err := fmt.Sscanf(string(line[:n]), "ready %d %s %s", &h.prog, &h.cc, &h.bg); err != nil {
		rest, _ := io.ReadAll(out) // the helper's failure, after its first line
		t.Fatalf("helper: %q%s", line[:n], rest)
	}
	return h
}

// kill sends the helper SIGKILL and waits for it.
func (h *openHelper) kill() {
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cmd.Wait()
}

// TestSIGKILLFailOpen kills a process that owns a datapath with SIGKILL:
// traffic keeps flowing through the left-over tree, the sock_ops link is
// gone with the process, and Cleanup + Open repair.
func TestSIGKILLFailOpen(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	usualTxQLen(t, p.A, p.LinkA)
	before := inspect(t, p.A, p.LinkA, "kill1")
	h := startOpenHelper(t, p, "kill1")
	helperProg := h.prog
	// Other tests on this machine attach and detach sock_ops programs too:
	// look for the helper's own.
	if !slices.Contains(attachedSockops(t), helperProg) {
		t.Errorf("helper's sock_ops program %d not attached", helperProg)
	}
	h.kill()

	s := inspect(t, p.A, p.LinkA, "kill1")
	if s.rootKind != "htb" || !slices.Equal(s.filters, []string{"lanes:kill1"}) || !s.cgroupExist {
		t.Errorf("after SIGKILL: %+v (expected the tree and cgroups to stay)", s)
	}
	if slices.Contains(attachedSockops(t), helperProg) {
		t.Errorf("helper's sock_ops program %d still attached after SIGKILL", helperProg)
	}
	addr := tcpEcho(t, p.B, p.AddrB, 7009)
	if err := roundTrip(p.A, addr); err != nil {
		t.Fatalf("traffic after SIGKILL: %v", err)
	}
	p.A.Do(t, func() error { return Cleanup(p.LinkA, "kill1", testStateDir) })
	s = inspect(t, p.A, p.LinkA, "kill1")
	if s.rootHandle != 0 || s.cgroupExist || s.txqlen != before.txqlen {
		t.Errorf("after Cleanup: %+v", s)
	}
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "kill1"})
	if err := roundTrip(p.A, addr); err != nil {
		t.Fatalf("traffic after restart: %v", err)
	}
	d.Close()
}
