// state_test.go tests the daemon's logic through the in-memory datapath
// (internal/datapath/datapathtest), without root: a policy gives exactly
// the map entries and egress trees it should, a reload moves to exactly the
// next policy's, registrations come and go, a cgroup or interface that
// appears later is picked up, the default route is followed, and a reload
// whose new tree cannot be built keeps the old policy whole.
package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/datapath/datapathtest"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
)

// world is the fake outside of the datapath: links, routes, cgroups.
type world struct {
	links   map[string]int
	route   string
	cgroups map[string]uint64
	sockets map[string][]uint64 // flow -> cookies of its connected sockets
	open    []openSock          // the namespace's open sockets (sock_diag)
}

func (w *world) DefaultRoute() (string, error) {
	if w.route == "" {
		return "", errors.New("no default route")
	}
	return w.route, nil
}

func (w *world) Index(name string) (int, bool) { i, ok := w.links[name]; return i, ok }

func (w *world) cgroupID(rel string) (uint64, error) {
	if id, ok := w.cgroups[rel]; ok {
		return id, nil
	}
	return 0, errors.New("no such cgroup")
}

// fixture is a daemon on a fake host in a fake world.
type fixture struct {
	t     *testing.T
	d     *Daemon
	host  *datapathtest.FakeHost
	world *world
}

// fixtureSrc is the local address of every socket in the fixture's world.
var fixtureSrc = netip.MustParseAddr("192.0.2.1")

func newFixture(t *testing.T, yaml string, links ...string) *fixture {
	t.Helper()
	w := &world{links: map[string]int{}, cgroups: map[string]uint64{}, sockets: map[string][]uint64{}}
	h := datapathtest.New()
	for i, l := range links {
		w.links[l] = i + 2
		h.SetLink(l, true)
	}
	e := env{
		openHost: func(datapath.HostConfig) (*datapathHost, error) { return fakeHost(h), nil },
		links:    w,
		cgroupID: w.cgroupID,
		watch:    func(ctx context.Context, _ func()) error { <-ctx.Done(); return nil },
		liveSockets: func(f api.Flow, uid int64) ([]uint64, error) {
			return w.sockets[f.String()], nil
		},
		localAddrs:  func(api.Flow) ([]netip.Addr, error) { return []netip.Addr{fixtureSrc}, nil },
		openSockets: func() ([]openSock, error) { return w.open, nil },
	}
	d := newDaemon(Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, "ntest", mustPolicy(t, yaml), e)
	if err := d.install(); err != nil {
		t.Fatalf("install: %v", err)
	}
	return &fixture{t: t, d: d, host: h, world: w}
}

// fakeHost is the daemon's view of the in-memory host: every role but
// the optional parts.
func fakeHost(h *datapathtest.FakeHost) *datapathHost {
	return &datapathHost{core: h, rules: h, sockets: h, openEgress: func(c datapath.EgressConfig) (egressTree, bgEgress, error) {
		e, err := h.OpenEgress(c)
		if err != nil {
			return nil, nil, err
		}
		return e, nil, nil
	}}
}

func mustPolicy(t *testing.T, yaml string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// resync is one round of following the world (what the follow loop does).
func (f *fixture) resync() {
	f.d.kernel.mu.Lock()
	defer f.d.kernel.mu.Unlock()
	if err := f.d.kernel.applyLocked(f.d.kernel.desiredFor(f.d.kernel.pol), false); err != nil {
		f.t.Logf("resync: %v", err)
	}
}

// laneCgroups are the fake host's lane cgroup entries, always present.
func laneCgroups() map[uint64]lane.Lane {
	return map[uint64]lane.Lane{9001: lane.Realtime, 9002: lane.Interactive, 9003: lane.Background}
}

func with[K comparable](base map[K]lane.Lane, more map[K]lane.Lane) map[K]lane.Lane {
	out := maps.Clone(base)
	maps.Copy(out, more)
	return out
}

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func dev(name string) datapath.EgressConfig {
	return datapath.EgressConfig{Interface: name, Mode: datapath.DeviceBottleneck}
}

// checkState compares the fake's whole state with want.
func (f *fixture) checkState(want datapathtest.State) {
	f.t.Helper()
	got := f.host.State()
	eq := func(name string, ok bool) {
		if !ok {
			f.t.Errorf("%s:\n got  %v\n want %v", name, pick(got, name), pick(want, name))
		}
	}
	eq("flows", maps.Equal(got.Flows, want.Flows))
	eq("dsts", maps.Equal(got.Dsts, want.Dsts))
	eq("cgroups", maps.Equal(got.Cgroups, want.Cgroups))
	eq("uids", maps.Equal(got.UIDs, want.UIDs))
	eq("dscp", maps.Equal(got.DSCP, want.DSCP))
	eq("egress", maps.Equal(got.Egress, want.Egress))
}

func pick(s datapathtest.State, name string) any {
	switch name {
	case "flows":
		return s.Flows
	case "dsts":
		return s.Dsts
	case "cgroups":
		return s.Cgroups
	case "uids":
		return s.UIDs
	case "dscp":
		return s.DSCP
	}
	return s.Egress
}

const policyA = `
interfaces:
  - name: eth0
    mode: shaped
    uplink: 10mbit
rules:
  - {name: sensor, lane: background, dst: 192.0.2.10, dport: 443, sport: 40000}
  - {name: backup-net, lane: background, dst: 10.0.0.0/8}
  - {name: dns6, lane: realtime, dst: '2001:db8::/32', dport: 53}
  - {name: apt, lane: background, cgroup: /system.slice/apt-daily.service}
  - {name: bob, lane: background, uid: 1001}
  - {name: ef, lane: realtime, dscp: 46}
  - {name: sync, lane: background, exe: /usr/bin/rsync}
`

func stateA() datapathtest.State {
	return datapathtest.State{
		Flows:   map[datapath.FlowKey]lane.Lane{{Dst: addr("192.0.2.10"), DPort: 443, SPort: 40000}: lane.Background},
		Dsts:    map[datapath.DstRule]lane.Lane{{Prefix: pfx("10.0.0.0/8")}: lane.Background, {Prefix: pfx("2001:db8::/32"), DPort: 53}: lane.Realtime},
		Cgroups: with(laneCgroups(), map[uint64]lane.Lane{77: lane.Background}),
		UIDs:    map[uint32]lane.Lane{1001: lane.Background},
		DSCP:    map[uint8]lane.Lane{lane.DSCPLowerEffort: lane.Background, 46: lane.Realtime},
		Egress:  map[string]datapath.EgressConfig{"eth0": {Interface: "eth0", Mode: datapath.Shaped, UplinkBps: 10_000_000}},
	}
}

func TestPolicyGivesExactState(t *testing.T) {
	f := newFixture(t, policyA, "eth0")
	f.world.cgroups["/system.slice/apt-daily.service"] = 77
	f.resync()
	f.checkState(stateA())

	// Nothing changes: a resync writes nothing.
	ops := f.host.Ops
	f.resync()
	if f.host.Ops != ops {
		t.Errorf("a resync without changes made %d datapath calls", f.host.Ops-ops)
	}
}

func TestLEBackgroundOffAtStart(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\ndscp: {le_background: false}\n", "eth0")
	f.checkState(datapathtest.State{Cgroups: laneCgroups(), Egress: map[string]datapath.EgressConfig{"eth0": dev("eth0")}})
}

func TestReloadToAnotherPolicy(t *testing.T) {
	f := newFixture(t, policyA, "eth0", "wlan0")
	f.world.cgroups["/system.slice/apt-daily.service"] = 77
	f.resync()
	// An API registration survives reloads; policy entries follow the policy.
	reg := api.Flow{Dst: "198.51.100.7", DPort: 80, SPort: 5555}
	if err := f.d.handlers.Register(apiserver.Cred{UID: 1000}, reg, lane.Background); err != nil {
		t.Fatal(err)
	}
	// an unprivileged registration gets its socket's local address
	regKey := datapath.FlowKey{Src: fixtureSrc, Dst: addr("198.51.100.7"), DPort: 80, SPort: 5555}
	ok := f.d.reloadWith(mustPolicy(t, `
interfaces: [{name: wlan0}]
rules:
  - {lane: realtime, dst: 10.1.0.0/16, dport: 22}
  - {lane: background, uid: 1002}
dscp: {le_background: false, ef_realtime: true}
`))
	if !ok {
		t.Fatal("reload refused")
	}
	// the interfaces changed, the host (lane cgroups and their processes,
	// socket lanes) stayed
	if f.host.Closed() {
		t.Fatal("an interface-changing reload closed the host")
	}
	f.checkState(datapathtest.State{
		Flows:   map[datapath.FlowKey]lane.Lane{regKey: lane.Background},
		Dsts:    map[datapath.DstRule]lane.Lane{{Prefix: pfx("10.1.0.0/16"), DPort: 22}: lane.Realtime},
		Cgroups: laneCgroups(),
		UIDs:    map[uint32]lane.Lane{1002: lane.Background},
		DSCP:    map[uint8]lane.Lane{46: lane.Realtime},
		Egress:  map[string]datapath.EgressConfig{"wlan0": dev("wlan0")},
	})
	// Unregister takes exactly its entry away; removal leaves nothing.
	if err := f.d.handlers.Unregister(apiserver.Cred{UID: 1000}, reg); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.host.State().Flows[regKey]; ok {
		t.Error("unregistered flow still in the datapath")
	}
	if err := f.d.uninstall(); err != nil {
		t.Fatal(err)
	}
	if !f.host.Closed() {
		t.Error("host not closed")
	}
	f.checkState(datapathtest.State{})
}

func TestReloadKeepsOldPolicyWhenNewTreeFails(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\nrules: [{lane: background, uid: 5}]\n", "eth0", "eth1")
	before := f.host.State()
	f.host.RefuseEgress = errors.New("root qdisc is someone else's")
	if f.d.reloadWith(mustPolicy(t, "interfaces: [{name: eth1}]\nrules: [{lane: background, uid: 6}]\n")) {
		t.Fatal("reload taken although its tree could not be built")
	}
	f.checkState(before)
	if f.d.kernel.pol.Rules[0].UID == nil || *f.d.kernel.pol.Rules[0].UID != 5 {
		t.Error("the running policy was replaced")
	}
}

func TestCgroupAppearsLater(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\nrules: [{name: apt, lane: background, cgroup: /system.slice/apt-daily.service}]\n", "eth0")
	if len(f.host.State().Cgroups) != 3 {
		t.Fatalf("cgroup entry before the cgroup exists: %v", f.host.State().Cgroups)
	}
	f.world.cgroups["/system.slice/apt-daily.service"] = 4242
	f.resync()
	if got := f.host.State().Cgroups[4242]; got != lane.Background {
		t.Fatalf("cgroup that appeared: lane %v", got)
	}
	// removed and created again: a new id replaces the old one
	f.world.cgroups["/system.slice/apt-daily.service"] = 4343
	f.resync()
	cg := f.host.State().Cgroups
	if _, old := cg[4242]; old || cg[4343] != lane.Background {
		t.Fatalf("recreated cgroup: %v", cg)
	}
}

func TestInterfacesFollowTheDevice(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: default-route}, {name: usb0, mode: shaped, uplink: 5mbit}]\n", "wlan0", "rmnet0")
	if len(f.host.State().Egress) != 0 {
		t.Fatalf("trees without a default route or usb0: %v", f.host.State().Egress)
	}
	f.world.route = "wlan0"
	f.resync()
	f.checkState(datapathtest.State{Cgroups: laneCgroups(), DSCP: map[uint8]lane.Lane{1: lane.Background},
		Egress: map[string]datapath.EgressConfig{"wlan0": dev("wlan0")}})

	// Wi-Fi to cellular: the tree moves, none is left on wlan0.
	f.world.route = "rmnet0"
	f.resync()
	if eg := f.host.State().Egress; len(eg) != 1 || eg["rmnet0"] != dev("rmnet0") {
		t.Fatalf("after the route moved: %v", eg)
	}
	// The USB modem appears, goes away, comes back as a new device.
	f.world.links["usb0"] = 20
	f.host.SetLink("usb0", true)
	f.resync()
	if _, ok := f.host.State().Egress["usb0"]; !ok {
		t.Fatal("usb0 appeared but got no tree")
	}
	delete(f.world.links, "usb0")
	f.host.SetLink("usb0", false)
	f.resync()
	if _, ok := f.host.State().Egress["usb0"]; ok {
		t.Fatal("usb0 disappeared but its tree is still held")
	}
	f.world.links["usb0"] = 21
	f.host.SetLink("usb0", true)
	f.resync()
	if eg := f.host.State().Egress["usb0"]; eg.UplinkBps != 5_000_000 {
		t.Fatalf("usb0 came back: %v", f.host.State().Egress)
	}
}

func TestDefaultRouteAndNamedAreOneDevice(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: default-route}, {name: eth0, mode: shaped, uplink: 10mbit}]\n", "eth0")
	f.world.route = "eth0"
	f.resync()
	if eg := f.host.State().Egress; len(eg) != 1 || eg["eth0"] != dev("eth0") {
		t.Fatalf("one device named twice: %v", eg)
	}
}

func TestCheckInterfaces(t *testing.T) {
	w := &world{links: map[string]int{"eth0": 2}}
	p := mustPolicy(t, "interfaces:\n  - name: eth0\n  - name: usb0\n  - name: default-route\n")
	err := checkInterfaces(p, w)
	var pe *policy.Error
	if !errors.As(err, &pe) || pe.Line != 3 || pe.Field != "interfaces[1].name" {
		t.Fatalf("missing usb0: %v", err)
	}
	if got := err.Error(); !strings.Contains(got, `test.yaml:3: interfaces[1].name: interface "usb0" does not exist`) ||
		!strings.Contains(got, "test.yaml:4: interfaces[2].name: no default route") {
		t.Fatalf("errors: %v", got)
	}
	w.links["usb0"], w.route = 3, "eth0"
	if err := checkInterfaces(p, w); err != nil {
		t.Fatal(err)
	}
}

func TestExplainFollowsPrecedence(t *testing.T) {
	f := newFixture(t, policyA+"  - {name: any443, lane: realtime, dst: 0.0.0.0/0, dport: 443}\n  - {name: ten-one, lane: realtime, dst: 10.1.0.0/16}\n", "eth0")
	f.world.cgroups["/system.slice/apt-daily.service"] = 77
	f.resync()
	reg := api.Flow{Dst: "198.51.100.7", DPort: 80, SPort: 5555}
	if err := f.d.handlers.Register(apiserver.Cred{UID: 1000}, reg, lane.Background); err != nil {
		t.Fatal(err)
	}
	reg.Src = fixtureSrc.String() // pinned by Register
	f.d.regs.setMoved(reg, []liveSocket{{cookie: 42}})
	for _, c := range []struct {
		s    sockFacts
		want string
	}{
		{sockFacts{cookie: 42, dst: addr("198.51.100.7"), dport: 80, sport: 5555}, "registration tcp 198.51.100.7 dport 80 sport 5555 src 192.0.2.1 (api)"},
		{sockFacts{dst: addr("192.0.2.10"), dport: 443, sport: 40000, uid: 1001}, "flow policy:sensor"},
		{sockFacts{dst: addr("10.1.2.3"), dport: 443, uid: 1001}, "destination 0.0.0.0/0 port 443 policy:any443"},
		{sockFacts{dst: addr("10.1.2.3"), dport: 80, uid: 1001}, "destination 10.1.0.0/16 policy:ten-one"},
		{sockFacts{dst: addr("10.9.2.3"), dport: 80, uid: 1001}, "destination 10.0.0.0/8 policy:backup-net"},
		{sockFacts{dst: addr("203.0.113.1"), dport: 80, cgroupID: 77, uid: 1001}, "cgroup policy:apt"},
		{sockFacts{dst: addr("203.0.113.1"), dport: 80, cgroupID: 9003}, "cgroup lane cgroup"},
		{sockFacts{dst: addr("203.0.113.1"), dport: 80, uid: 1001}, "uid 1001 policy:bob"},
		{sockFacts{dst: addr("203.0.113.1"), dport: 80, uid: 5}, "no rule"},
	} {
		f.d.kernel.mu.Lock()
		got := f.d.handlers.explainLocked(c.s)
		f.d.kernel.mu.Unlock()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%+v: %q, want %q...", c.s, got, c.want)
		}
	}
}

// TestRegistrationMovesLiveSockets: a registration after connect moves the
// flow's connected sockets to its lane, and unregistering gives each back
// what it had (a lane, or none).
func TestRegistrationMovesLiveSockets(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	reg := api.Flow{Dst: "198.51.100.7", DPort: 443, SPort: 40000}
	f.world.sockets[reg.String()] = []uint64{7, 8}
	if err := f.host.SetSocketLane(7, lane.Realtime); err != nil {
		t.Fatal(err)
	}
	if err := f.d.handlers.Register(apiserver.Cred{UID: 0, Privileged: true}, reg, lane.Background); err != nil {
		t.Fatal(err)
	}
	if s := f.host.State().Sockets; s[7] != lane.Background || s[8] != lane.Background {
		t.Fatalf("after register: sockets %v", s)
	}
	if err := f.d.handlers.Unregister(apiserver.Cred{UID: 0, Privileged: true}, reg); err != nil {
		t.Fatal(err)
	}
	s := f.host.State().Sockets
	if _, has8 := s[8]; s[7] != lane.Realtime || has8 {
		t.Fatalf("after unregister: sockets %v, want 7 back to realtime and 8 without a lane", s)
	}
}

// TestPolicyFlowsProtocol: status lists a policy rule's flow with the
// protocols it matches (any: a UDP realtime flow too), not as tcp, and no
// port the rule does not name.
func TestPolicyFlowsProtocol(t *testing.T) {
	pol, err := policy.Parse("p.yaml", []byte(`rules:
  - {name: control, lane: realtime, dst: 10.77.0.2, dport: 9000}
  - {name: backup, lane: background, dst: 10.1.0.0/16}
  - {name: one, lane: interactive, dst: 10.77.0.3, dport: 22, sport: 40000}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range policyFlows(pol) {
		got = append(got, f.Flow.String())
	}
	want := []string{"any 10.77.0.2 dport 9000", "any 10.1.0.0/16", "any 10.77.0.3 dport 22 sport 40000"}
	if !slices.Equal(got, want) {
		t.Errorf("policy flows %q, want %q", got, want)
	}
}
