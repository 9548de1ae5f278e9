// host_test.go checks the host datapath as root in fresh namespaces: a
// capability the kernel refuses (simulated by HostConfig.Off) turns off
// alone while the classifier and the egress tree keep working; a new host
// maps no DSCP (so `le_background: false` holds from the start); and an
// egress opened over a killed run's tree adopts it without a moment
// unshaped.
package datapath

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestHostWithoutSockops(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	addr := tcpEcho(t, p.B, p.AddrB, 7301)
	var h *Host
	var e *Egress
	p.A.Do(t, func() (err error) {
		h, err = OpenHost(HostConfig{StateDir: testStateDir, Instance: "nosockops", Off: map[Capability]string{CapSockops: "probe refused (test)"}})
		if err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		e, err = OpenEgress(h, EgressConfig{Interface: p.LinkA})
		if err == nil {
			t.Cleanup(func() { e.Close() })
		}
		return err
	})
	caps := h.Capabilities()
	if caps[CapSockops] != "off: probe refused (test)" || caps[CapCapCC] != "off: needs sock_ops" || caps[CapBackgroundCC] != "off: needs sock_ops" || caps[CapBgClamp] != "off: needs sock_ops" || caps[CapRLEDBAT] != "off: needs sock_ops" {
		t.Errorf("capabilities: %v", caps)
	}
	if h.ops != nil || h.opsLink != nil {
		t.Error("sock_ops loaded although it was off")
	}
	if err := h.Caps.SetSocketCwndCap(1, 10); !errors.Is(err, errNoSockops) {
		t.Errorf("cwnd cap without sock_ops: %v", err)
	}
	// The rest works: a uid rule puts this process's (root's) traffic in
	// background, per packet.
	if err := h.Lanes.SetUIDLane(0, lane.Background); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := roundTrip(p.A, addr); err != nil {
			t.Fatal(err)
		}
	}
	var st map[lane.Lane]LaneStats
	p.A.Do(t, func() (err error) { st, err = e.Stats(); return err })
	if st[lane.Background].Packets == 0 {
		t.Errorf("no packet in background by uid without sock_ops: %+v", st)
	}
	hs, err := h.Stats()
	if err != nil || hs.Classified["uid"][lane.Background] == 0 || len(hs.Sockops) != 0 {
		t.Errorf("host stats: %+v %v", hs, err)
	}
}

// TestRLEDBATOffWithoutWindowClamp: where bpf_setsockopt refuses
// TCP_WINDOW_CLAMP (before 5.11; simulated) rLEDBAT is off with the
// reason, sock_ops runs without it, and the rest stays on.
func TestRLEDBATOffWithoutWindowClamp(t *testing.T) {
	requireCgroup2(t)
	haveWindowClamp = func() error { return errors.New("refused before 5.11 (test)") }
	defer func() { haveWindowClamp = sockops.HaveWindowClamp }()
	p := testutil.NewVethPair(t)
	var h *Host
	p.A.Do(t, func() (err error) {
		h, err = OpenHost(HostConfig{Instance: "norledbat"})
		if err == nil {
			t.Cleanup(func() { h.Close() })
		}
		return err
	})
	caps := h.Capabilities()
	if !strings.HasPrefix(caps[CapRLEDBAT], "off: no rLEDBAT in sock_ops") || caps[CapSockops] != "on" {
		t.Errorf("capabilities: %v", caps)
	}
	// The coop's downlink caps are TCP_WINDOW_CLAMP from sock_ops too: on
	// 5.10 they were accepted and every one refused (rwnd_err).
	if err := h.Caps.SetDownlinkCaps(true); err == nil || !strings.Contains(err.Error(), "before 5.11 (test)") {
		t.Errorf("downlink caps without TCP_WINDOW_CLAMP: %v, want the kernel's refusal", err)
	}
	if err := h.Caps.SetDownlinkCaps(false); err != nil {
		t.Errorf("downlink caps off: %v", err)
	}
	if h.ops == nil {
		t.Fatal("no sock_ops")
	}
	var cfg sockops.SockopsSockopsConfig
	if err := h.ops.CFG.Get(&cfg); err != nil {
		t.Skipf("cannot read the program's config: %v", err)
	}
	if cfg.RlTargetUs != 0 {
		t.Errorf("sock_ops runs rLEDBAT (target %d µs) although the kernel refuses it", cfg.RlTargetUs)
	}
}

func TestNewHostMapsNoDSCP(t *testing.T) {
	requireCgroup2(t)
	ns := testutil.NewNetNS(t)
	var h *Host
	ns.Do(t, func() (err error) { h, err = OpenHost(HostConfig{Instance: "nodscp"}); return err })
	defer h.Close()
	for dscp := uint32(0); dscp < 64; dscp++ {
		var v uint32
		if err := h.cls.LanesDscp.Lookup(dscp, &v); err != nil || v != 0 {
			t.Fatalf("DSCP %d maps to %d (%v) on a new host", dscp, v, err)
		}
	}
}

// TestAdoptWithoutGap: a run killed with its tree in place is followed by
// one whose egress adopts the tree: the root qdisc is never replaced (its
// byte counter keeps counting), so no packet goes unshaped.
func TestAdoptWithoutGap(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	addr := tcpEcho(t, p.B, p.AddrB, 7302)
	var d *Datapath
	p.A.Do(t, func() (err error) {
		d, err = Open(Config{StateDir: testStateDir, Interface: p.LinkA, Instance: "adopt1", Mode: Shaped, UplinkBps: 20_000_000})
		return err
	})
	for range 3 {
		if err := roundTrip(p.A, addr); err != nil {
			t.Fatal(err)
		}
	}
	before := rootBytes(t, p.A, p.LinkA)
	d.abandon()
	d2 := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "adopt1", Mode: Shaped, UplinkBps: 10_000_000})
	if !d2.Egress().Adopted() {
		t.Error("the killed run's tree was not adopted")
	}
	if after := rootBytes(t, p.A, p.LinkA); after < before || before == 0 {
		t.Errorf("root qdisc replaced: %d bytes counted before the restart, %d after", before, after)
	}
	if err := roundTrip(p.A, addr); err != nil {
		t.Fatal(err)
	}
	s := inspect(t, p.A, p.LinkA, "adopt1")
	if s.rootKind != "htb" || len(s.filters) != 1 {
		t.Errorf("after adoption: %+v", s)
	}
	// the new parameters are in force: the root class shapes at the new rate
	var rate uint64
	p.A.Do(t, func() error {
		l, err := netlink.LinkByName(p.LinkA)
		if err != nil {
			return err
		}
		cs, err := netlink.ClassList(l, rootHandle)
		for _, c := range cs {
			if hc, ok := c.(*netlink.HtbClass); ok && hc.Handle == rootClass {
				rate = hc.Rate
			}
		}
		return err
	})
	if want := paramsFor(EgressConfig{Mode: Shaped, UplinkBps: 10_000_000}).rootBytes; rate != want {
		t.Errorf("root class rate %d B/s after adoption, want %d", rate, want)
	}
}

// rootBytes is the byte counter of the root qdisc of ifname.
func rootBytes(t *testing.T, ns *testutil.NetNS, ifname string) uint64 {
	t.Helper()
	var n uint64
	ns.Do(t, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		qs, err := netlink.QdiscList(l)
		for _, q := range qs {
			if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Statistics != nil && q.Attrs().Statistics.Basic != nil {
				n = q.Attrs().Statistics.Basic.Bytes
			}
		}
		return err
	})
	return n
}

// TestSettersRaceClose: map setters running while the host closes either
// take effect or say the host is closed; none uses a closed map.
func TestSettersRaceClose(t *testing.T) {
	requireCgroup2(t)
	ns := testutil.NewNetNS(t)
	var h *Host
	ns.Do(t, func() (err error) { h, err = OpenHost(HostConfig{Instance: "race1"}); return err })
	done := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := uint32(0); ; i++ {
				err := h.Lanes.SetUIDLane(uint32(g)<<16|i%1000, lane.Background)
				if err == nil {
					_, _ = h.Lanes.SocketLane(uint64(i))
					continue
				}
				if !errors.Is(err, errClosed) {
					done <- err
					return
				}
				done <- nil
				return
			}
		}()
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Errorf("setter during Close: %v", err)
		}
	}
}

// TestCapRefusedForSocketsBeforeSockops: a socket established before the
// host attached sock_ops gets no callbacks, so its cwnd cap can never be
// applied: the cap is refused (the coop controller then does not report it
// as applied) while a socket established afterwards takes it.
func TestCapRefusedForSocketsBeforeSockops(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	addr := tcpEcho(t, p.B, p.AddrB, 7303)
	dial := func() *net.TCPConn {
		var c net.Conn
		p.A.Do(t, func() (err error) { c, err = net.DialTimeout("tcp", addr, 3*time.Second); return err })
		t.Cleanup(func() { c.Close() })
		return c.(*net.TCPConn)
	}
	old := dial()
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "seen1"})
	if err := d.Caps.SetSocketCwndCap(cookieOf(t, old), 4); !errors.Is(err, ErrSocketUnmanaged) {
		t.Errorf("cap for a socket that predates sock_ops: %v, want ErrSocketUnmanaged", err)
	}
	if err := d.Caps.SetSocketCwndCap(cookieOf(t, dial()), 4); err != nil {
		t.Errorf("cap for a socket sock_ops saw established: %v", err)
	}
}
