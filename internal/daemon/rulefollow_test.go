// rulefollow_test.go: a reload's uid and cgroup rules reach the sockets
// already open (without root: the in-memory datapath).
package daemon

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

func TestReloadedRulesReachOpenSockets(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	f.world.cgroups["/backup.slice"] = 77
	dst := netip.MustParseAddrPort("198.51.100.7:443")
	src := func(p uint16) netip.AddrPort { return netip.AddrPortFrom(fixtureSrc, p) }
	f.world.open = []openSock{
		{cookie: 1, proto: unix.IPPROTO_TCP, uid: 1000, cgroup: 5, src: src(40001), dst: dst},
		{cookie: 2, proto: unix.IPPROTO_UDP, uid: 1000, cgroup: 5, src: src(40002), dst: dst},
		{cookie: 3, proto: unix.IPPROTO_TCP, uid: 1001, cgroup: 5, src: src(40003), dst: dst},
		{cookie: 4, proto: unix.IPPROTO_TCP, uid: 1001, cgroup: 77, src: src(40004), dst: dst},
		{cookie: 5, proto: unix.IPPROTO_TCP, uid: 1000, cgroup: 5, src: src(40005), dst: dst}, // moved by a process move
		{cookie: 6, proto: unix.IPPROTO_TCP, uid: 1000, cgroup: 5, src: src(40006), dst: netip.MustParseAddrPort("10.9.0.1:22")},
	}
	f.d.moves.setSockets([]openSock{{cookie: 5}}, movedSock{lane: lane.Realtime, by: "lanes move"})
	if err := f.host.SetSocketLane(5, lane.Realtime); err != nil {
		t.Fatal(err)
	}
	if !f.d.reloadWith(mustPolicy(t, `
interfaces: [{name: eth0}]
rules:
  - {lane: background, uid: 1000}
  - {lane: background, cgroup: /backup.slice}
  - {lane: realtime, dst: 10.9.0.0/16}
`)) {
		t.Fatal("reload refused")
	}
	s := f.host.State().Sockets
	want := map[uint64]lane.Lane{1: lane.Background, 2: lane.Background, 4: lane.Background, 5: lane.Realtime}
	for c, l := range want {
		if s[c] != l {
			t.Errorf("after the reload: socket %d in %v, want %v (all: %v)", c, s[c], l, s)
		}
	}
	for _, c := range []uint64{3, 6} {
		if _, ok := s[c]; ok {
			t.Errorf("socket %d got lane %v: no changed rule decides it", c, s[c])
		}
	}
	// the rules removed: their sockets back in interactive, by cookie (so
	// sock_ops gives them their own congestion control back)
	if !f.d.reloadWith(mustPolicy(t, "interfaces: [{name: eth0}]\n")) {
		t.Fatal("reload refused")
	}
	s = f.host.State().Sockets
	for c, l := range map[uint64]lane.Lane{1: lane.Interactive, 2: lane.Interactive, 4: lane.Interactive, 5: lane.Realtime} {
		if s[c] != l {
			t.Errorf("after the second reload: socket %d in %v, want %v", c, s[c], l)
		}
	}
}

// A reload changing a key that only a restart applies is refused whole:
// the running policy stays (its rules too), the log names the key.
func TestReloadRefusesRestartKey(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	var log strings.Builder
	f.d.log = slog.New(slog.NewTextHandler(&log, nil))
	before := f.d.kernel.pol
	if f.d.reloadWith(mustPolicy(t, "interfaces: [{name: eth0}]\nrules:\n  - {lane: background, uid: 1000}\nbackground:\n  congestion_control: system\n")) {
		t.Fatal("a reload changing background.congestion_control was applied")
	}
	if f.d.kernel.pol != before {
		t.Error("the running policy was replaced")
	}
	if _, ok := f.host.State().UIDs[1000]; ok {
		t.Error("the refused policy's rule reached the datapath")
	}
	if !strings.Contains(log.String(), "test.yaml:5: background.congestion_control: changed from ledbat to system") {
		t.Errorf("log does not name the key and its line:\n%s", log.String())
	}
}

// TestOpenTCPSocketsFollowWithoutUDPDiag: where UDP sockets cannot be
// dumped (no udp_diag: the 5.10 VM, which cannot load modules, moved no
// socket at all), a reload's rule still reaches the open TCP sockets.
func TestOpenTCPSocketsFollowWithoutUDPDiag(t *testing.T) {
	f := newFixture(t, "interfaces: [{name: eth0}]\n", "eth0")
	dst := netip.MustParseAddrPort("198.51.100.7:443")
	f.world.open = []openSock{{cookie: 1, proto: unix.IPPROTO_TCP, uid: 1000, cgroup: 5,
		src: netip.AddrPortFrom(fixtureSrc, 40001), dst: dst}}
	f.d.env.openSockets = func() ([]openSock, error) { return f.world.open, errNoUDPDiag }
	if !f.d.reloadWith(mustPolicy(t, "interfaces: [{name: eth0}]\nrules:\n  - {lane: background, uid: 1000}\n")) {
		t.Fatal("reload refused")
	}
	if l := f.host.State().Sockets[1]; l != lane.Background {
		t.Errorf("open TCP socket in %v after the reload, want background", l)
	}
}
