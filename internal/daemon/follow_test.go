// follow_test.go: the daemon follows the device as root, in fresh
// namespaces: the default route moves from one veth to another while a
// background upload runs, and the lanes tree and the upload's lane follow;
// a cgroup created after the daemon started gets its rule's lane. The time
// each took is logged (the goal is a second; no assert on time, the
// machine may be loaded).
package daemon_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/testutil"
)

func ifaceNames(st *api.Status) string {
	var n []string
	for _, it := range st.Interfaces {
		n = append(n, it.Name)
	}
	return strings.Join(n, ",")
}

func laneBytesOn(st *api.Status, iface, lane string) uint64 {
	for _, it := range st.Interfaces {
		if it.Name != iface {
			continue
		}
		for _, l := range it.Lanes {
			if l.Lane.String() == lane {
				return l.Bytes
			}
		}
	}
	return 0
}

func TestDefaultRouteFollowed(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	// A second link between A and B, and a server address on B's loopback
	// that A reaches through whichever link its default route uses.
	server := "192.0.2.77"
	p.A.Do(t, func() error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wan2"}, PeerName: "wan2p",
			PeerNamespace: netlink.NsFd(int(p.B.Handle))}); err != nil {
			return err
		}
		return upAddr("wan2", "10.251.9.1/24")
	})
	p.B.Do(t, func() error {
		if err := upAddr("wan2p", "10.251.9.2/24"); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(lo, &netlink.Addr{IPNet: mustNet(server + "/32")})
	})
	setDefault(t, p.A, p.AddrB.String(), p.LinkA)

	_, sock := startDaemon(t, p.A, "interfaces: [{name: default-route}]\nrules:\n  - {name: backup-host, lane: background, dst: "+server+"/32}\n")
	waitFor(t, "a tree on "+p.LinkA, func() bool { return ifaceNames(status(t, sock)) == p.LinkA })

	// A background upload to the server, running all along.
	var ln net.Listener
	p.B.Do(t, func() (err error) { ln, err = net.Listen("tcp", server+":9100"); return err })
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	var conn net.Conn
	p.A.Do(t, func() (err error) { conn, err = net.Dial("tcp", server+":9100"); return err })
	defer conn.Close()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			if _, err := conn.Write(buf); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitFor(t, "the upload in background on "+p.LinkA, func() bool { return laneBytesOn(status(t, sock), p.LinkA, "background") > 100_000 })

	// Wi-Fi to cellular: the default route moves to wan2.
	moved := time.Now()
	setDefault(t, p.A, "10.251.9.2", "wan2")
	waitFor(t, "the tree on wan2 only", func() bool { return ifaceNames(status(t, sock)) == "wan2" })
	treeAfter := time.Since(moved)
	waitFor(t, "the upload in background on wan2", func() bool { return laneBytesOn(status(t, sock), "wan2", "background") > 100_000 })
	laneAfter := time.Since(moved)
	t.Logf("default route moved: tree on the new interface after %v, the upload's background bytes there after %v (goal: 1 s)",
		treeAfter.Round(time.Millisecond), laneAfter.Round(time.Millisecond))
	if l := leftovers(t, p.A, p.LinkA); len(l) > 0 && !strings.HasPrefix(l[0], "cgroup") {
		t.Errorf("left on the old interface: %v", l)
	}
}

func TestCgroupCreatedLaterGetsItsLane(t *testing.T) {
	testutil.RequireRoot(t)
	root := features.CgroupV2Mount()
	if root == "" {
		t.Skip("needs cgroup v2")
	}
	p := testutil.NewVethPair(t)
	name := fmt.Sprintf("lanes-lazy-%d", os.Getpid())
	_, sock := startDaemon(t, p.A, devicePolicy(p.LinkA)+"rules:\n  - {name: later, lane: background, cgroup: /"+name+"}\n")
	time.Sleep(200 * time.Millisecond)
	dir := filepath.Join(root, name)
	created := time.Now()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	// A sender in that cgroup: a shell, moved there from here (under `ip
	// netns exec` its /sys shows no cgroup tree), then running the upload.
	url := fmt.Sprintf("http://%s:8080", p.AddrB)
	sent := func() bool {
		cmd := p.A.Command("sh", "-c", "read _ && exec "+lanesBin+" lab helper post --url "+url+" --bytes 200000")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(in)
		if err := cmd.Wait(); err != nil {
			t.Logf("upload: %v", err)
		}
		return laneBytes(t, sock, "background") > 150_000
	}
	waitFor(t, "traffic from the new cgroup in background", sent)
	t.Logf("cgroup created -> its traffic in background after %v (goal: 1 s; includes the uploads tried)", time.Since(created).Round(time.Millisecond))
}

func upAddr(name, cidr string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: mustNet(cidr)}); err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

func mustNet(cidr string) *net.IPNet {
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

func setDefault(t *testing.T, ns *testutil.NetNS, gw, dev string) {
	t.Helper()
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		return netlink.RouteReplace(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw), Dst: mustNet("0.0.0.0/0")})
	})
}

// TestDaemonWithoutSockops: on a kernel that refuses sock_ops (simulated
// with --without sock_ops) the daemon runs, says so in status, and still
// puts traffic in its lanes per packet.
func TestDaemonWithoutSockops(t *testing.T) {
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	rules := fmt.Sprintf("rules:\n  - {name: up, lane: background, dst: %s, dport: 8080}\n", p.AddrB)
	if err := os.WriteFile(pol, []byte(devicePolicy(p.LinkA)+rules), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "lanes.sock")
	d := start(t, p.A, "daemon", "--policy", pol, "--socket", sock, "--without", "sock_ops")
	waitFor(t, "the daemon", func() bool {
		c, err := client.Dial(sock)
		if err != nil {
			return d.cmd.ProcessState != nil
		}
		defer c.Close()
		return c.Ping() == nil
	})
	st := status(t, sock)
	if !strings.HasPrefix(st.Capabilities["sock_ops"], "off") || !strings.HasPrefix(st.Capabilities["cap_cc"], "off") {
		t.Fatalf("capabilities: %v", st.Capabilities)
	}
	start(t, p.B, "lab", "helper", "serve", "--listen", ":8080")
	waitFor(t, "an upload in background without sock_ops", func() bool {
		_ = transfer(t, p)
		return laneBytes(t, sock, "background") > 150_000
	})
}
