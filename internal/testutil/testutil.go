// Package testutil holds helpers shared by lanes' tests: root and kernel
// feature checks, and throw-away network namespaces joined by veth pairs that
// are removed even when a test fails.
package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/lanes-net/lanes/internal/nsrun"
)

// RequireRoot skips the test unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (run the integration tests as root, as CI does)")
	}
}

// SkipUnlessCommand skips the test when an external program is missing.
func SkipUnlessCommand(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("needs %s on PATH", name)
	}
}

var nsCounter atomic.Uint32

// UniqueName returns a short name unique to this process and call, usable for
// namespaces and links (at most 15 bytes for links).
func UniqueName(prefix string) string {
	n := nsCounter.Add(1)
	return fmt.Sprintf("%s%d%d", prefix, os.Getpid()%100000, n)
}

// freeNetNSName is a UniqueName no namespace has yet: one left by a killed
// earlier test process whose pid came back must not fail this test.
func freeNetNSName() string {
	for {
		name := UniqueName("lt")
		if _, err := os.Stat("/var/run/netns/" + name); os.IsNotExist(err) {
			return name
		}
	}
}

// NetNS is a named network namespace created for one test.
type NetNS struct {
	Name   string
	Handle netns.NsHandle
}

// Path is the namespace's bind-mount path, for tools that take one.
func (n *NetNS) Path() string { return "/var/run/netns/" + n.Name }

// NewNetNS creates a fresh named network namespace with loopback up and
// CUBIC its default congestion control, and removes it when the test ends.
// A new namespace inherits the host's default, BBR on some machines: a
// bulk TCP foreground (iperf3) then holds a bandwidth-delay product of
// queue where CUBIC, a fresh Debian's default and so CI's, fills the
// bottleneck's buffer; CUBIC makes a run here the run CI makes.
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	RequireRoot(t)
	name := freeNetNSName()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatalf("get current netns: %v", err)
	}
	defer orig.Close()
	h, err := nsrun.NewNamed(name)
	if err != nil {
		t.Fatalf("create netns %s: %v", name, err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatalf("return to original netns: %v", err)
	}
	ns := &NetNS{Name: name, Handle: h}
	t.Cleanup(func() {
		_ = nsrun.DestroyTCP(name) // orphans would outlive the namespace
		h.Close()
		_ = netns.DeleteNamed(name)
	})
	ns.Do(t, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		setDefaultCC("cubic") // best effort: without CUBIC, the host's default
		return nil
	})
	return ns
}

// setDefaultCC sets the calling thread's namespace's default congestion
// control (/proc/sys/net is the opening thread's namespace's) where it is
// not cc already.
func setDefaultCC(cc string) {
	const p = "/proc/sys/net/ipv4/tcp_congestion_control"
	if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == cc {
		return
	}
	_ = os.WriteFile(p, []byte(cc), 0o644)
}

// Do runs fn on a locked OS thread switched into the namespace and fails the
// test if fn returns an error. Goroutines started by fn do NOT inherit the
// namespace; sockets created inside fn stay in it.
func (n *NetNS) Do(t testing.TB, fn func() error) {
	t.Helper()
	if err := n.Run(fn); err != nil {
		t.Fatalf("in netns %s: %v", n.Name, err)
	}
}

// Run is Do without a test: it returns fn's error.
func (n *NetNS) Run(fn func() error) error { return nsrun.Do(n.Handle, fn) }

// Command returns an exec.Cmd that runs inside the namespace (ip netns exec).
func (n *NetNS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Pair is two namespaces joined by a veth pair with addresses A and B
// (10.x addresses that exist only inside these namespaces).
type Pair struct {
	A, B         *NetNS
	LinkA, LinkB string
	AddrA, AddrB net.IP
}

var pairCounter atomic.Uint32

// NewVethPair creates two namespaces joined by a veth link, addressed
// 10.<k>.0.1/24 and 10.<k>.0.2/24, links up.
func NewVethPair(t testing.TB) *Pair {
	t.Helper()
	a, b := NewNetNS(t), NewNetNS(t)
	k := 200 + int(pairCounter.Add(1)%50)
	p := &Pair{A: a, B: b, LinkA: "veth-a", LinkB: "veth-b",
		AddrA: net.IPv4(10, byte(k), 0, 1).To4(), AddrB: net.IPv4(10, byte(k), 0, 2).To4()}
	a.Do(t, func() error {
		la := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.LinkA}, PeerName: p.LinkB, PeerNamespace: netlink.NsFd(int(b.Handle))}
		if err := netlink.LinkAdd(la); err != nil {
			return fmt.Errorf("add veth: %w", err)
		}
		return upWithAddr(p.LinkA, p.AddrA)
	})
	b.Do(t, func() error { return upWithAddr(p.LinkB, p.AddrB) })
	linkNeighbours(t, a, p.LinkA, p.AddrB, b, p.LinkB, p.AddrA)
	return p
}

// linkNeighbours enters each end's address and MAC in the other end's
// neighbour table (permanent), so no test depends on ARP: on a loaded
// machine a fresh veth pair sometimes left the first ARP exchange
// unanswered (neighbour INCOMPLETE, queued datagrams held for the 1 s
// retry), which lost the first second of a test's traffic.
func linkNeighbours(t testing.TB, a *NetNS, linkA string, addrB net.IP, b *NetNS, linkB string, addrA net.IP) {
	t.Helper()
	var macA, macB net.HardwareAddr
	a.Do(t, func() error { return linkMAC(linkA, &macA) })
	b.Do(t, func() error { return linkMAC(linkB, &macB) })
	a.Do(t, func() error { return permanentNeigh(linkA, addrB, macB) })
	b.Do(t, func() error { return permanentNeigh(linkB, addrA, macA) })
}

func linkMAC(name string, mac *net.HardwareAddr) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	*mac = l.Attrs().HardwareAddr
	return nil
}

func permanentNeigh(link string, ip net.IP, mac net.HardwareAddr) error {
	l, err := netlink.LinkByName(link)
	if err != nil {
		return err
	}
	n := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT, IP: ip, HardwareAddr: mac}
	if err := netlink.NeighSet(n); err != nil {
		return fmt.Errorf("neighbour %s on %s: %w", ip, link, err)
	}
	return nil
}

func upWithAddr(name string, ip net.IP) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(24, 32)}}); err != nil {
		return fmt.Errorf("addr %s on %s: %w", ip, name, err)
	}
	return netlink.LinkSetUp(l)
}

// Path is three namespaces in a line, A — R — B, with R routing between two
// /24s: A's uplink is LinkA (10.k.1.1, peer 10.k.1.2 in R), B is 10.k.2.2
// (R's side 10.k.2.1). Shaping R's egress toward B (link "r-b") makes a
// bottleneck in the network, away from A's own qdisc.
type Path struct {
	A, R, B      *NetNS
	LinkA        string // A's uplink
	LinkRB       string // R's link toward B
	AddrA, AddrB net.IP
}

// NewRoutedPath builds A — R — B as described on Path.
func NewRoutedPath(t testing.TB) *Path {
	t.Helper()
	a, r, b := NewNetNS(t), NewNetNS(t), NewNetNS(t)
	k := byte(100 + pairCounter.Add(1)%50)
	p := &Path{A: a, R: r, B: b, LinkA: "veth-a", LinkRB: "r-b",
		AddrA: net.IPv4(10, k, 1, 1).To4(), AddrB: net.IPv4(10, k, 2, 2).To4()}
	ra, rb := net.IPv4(10, k, 1, 2).To4(), net.IPv4(10, k, 2, 1).To4()
	r.Do(t, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "r-a"}, PeerName: p.LinkA, PeerNamespace: netlink.NsFd(int(a.Handle))}); err != nil {
			return fmt.Errorf("veth r-a: %w", err)
		}
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: p.LinkRB}, PeerName: "veth-b", PeerNamespace: netlink.NsFd(int(b.Handle))}); err != nil {
			return fmt.Errorf("veth r-b: %w", err)
		}
		if err := upWithAddr("r-a", ra); err != nil {
			return err
		}
		if err := upWithAddr(p.LinkRB, rb); err != nil {
			return err
		}
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0)
	})
	route := func(gw net.IP) func() error {
		return func() error {
			return netlink.RouteAdd(&netlink.Route{Dst: nil, Gw: gw})
		}
	}
	a.Do(t, func() error {
		if err := upWithAddr(p.LinkA, p.AddrA); err != nil {
			return err
		}
		return route(ra)()
	})
	b.Do(t, func() error {
		if err := upWithAddr("veth-b", p.AddrB); err != nil {
			return err
		}
		return route(rb)()
	})
	return p
}

// LAN is n host namespaces on one Ethernet segment: a bridge br0 in a switch
// namespace, one veth port per host (named LANLink inside the host),
// hosts addressed 10.k.0.1..n/24 and the switch's bridge 10.k.0.100 (the
// address of a server that every host reaches without a router).
type LAN struct {
	Switch *NetNS
	Hosts  []*NetNS
	Server net.IP // the bridge's address in the switch namespace
	addrs  []net.IP
}

// LANLink is the name of each host's link to the LAN.
const LANLink = "lan0"

// Addr is host i's address on the LAN.
func (l *LAN) Addr(i int) net.IP { return l.addrs[i] }

// Prefix is the LAN's subnet, e.g. "10.k.0.0/24".
func (l *LAN) Prefix() string { return fmt.Sprintf("%s/24", l.Server.Mask(net.CIDRMask(24, 32))) }

// NewLAN builds a LAN of n hosts as described on LAN.
func NewLAN(t testing.TB, n int) *LAN {
	t.Helper()
	k := byte(150 + pairCounter.Add(1)%50)
	l := &LAN{Switch: NewNetNS(t), Server: net.IPv4(10, k, 0, 100).To4()}
	l.Switch.Do(t, func() error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("add bridge: %w", err)
		}
		return upWithAddr("br0", l.Server)
	})
	for i := 0; i < n; i++ {
		h := NewNetNS(t)
		addr := net.IPv4(10, k, 0, byte(i+1)).To4()
		l.Hosts, l.addrs = append(l.Hosts, h), append(l.addrs, addr)
		port := fmt.Sprintf("p%d", i)
		l.Switch.Do(t, func() error {
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port}, PeerName: LANLink, PeerNamespace: netlink.NsFd(int(h.Handle))}
			if err := netlink.LinkAdd(v); err != nil {
				return fmt.Errorf("add veth %s: %w", port, err)
			}
			br, err := netlink.LinkByName("br0")
			if err != nil {
				return err
			}
			pl, err := netlink.LinkByName(port)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetMaster(pl, br); err != nil {
				return err
			}
			return netlink.LinkSetUp(pl)
		})
		h.Do(t, func() error { return upWithAddr(LANLink, addr) })
	}
	return l
}

// TimingErrorf is t.Errorf for a latency or rate goal of a traffic test,
// and t.Logf where timing says nothing about the code: scripts/kernel-vm.sh
// sets LANES_TIMING=unjudged (qemu without KVM runs the tests about five
// times slower, so such goals are missed there whatever the kernel).
func TimingErrorf(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("LANES_TIMING") == "unjudged" {
		t.Logf("timing not judged here (LANES_TIMING=unjudged): "+format, args...)
		return
	}
	t.Errorf(format, args...)
}

// Patience is how long a test waits for something to come up that takes d
// on a real kernel: d, or four times d where timing is not judged
// (LANES_TIMING=unjudged: qemu without KVM, where a daemon's start, its BPF
// verification and its first netlink round trips, runs several times
// slower, and more so beside other work; the 5.10 check saw a restarted
// daemon's API still down after 20 s on a host at load 5).
func Patience(d time.Duration) time.Duration {
	if os.Getenv("LANES_TIMING") == "unjudged" {
		return 4 * d
	}
	return d
}

// Connect dials the TCP listener ln and accepts the connection: the
// client's end and the server's, both closed when the test ends. Call it
// in ln's namespace (NetNS.Do).
func Connect(t testing.TB, ln net.Listener) (c, s net.Conn, err error) {
	if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		return nil, nil, err
	}
	if s, err = ln.Accept(); err != nil {
		c.Close()
		return nil, nil, err
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s, nil
}
