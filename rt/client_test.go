// client_test.go: the Go client against a real lane (lanes-rtd) in a fresh
// network namespace (loopback receiver). Its clock is monoclock's (tested
// there).
package rt_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/rtlane/rtlanetest"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/rt"
)

func TestClient(t *testing.T) {
	testutil.RequireRoot(t)
	sock, rx := rtlanetest.Start(t)
	c, err := rt.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.SendWithin(1, rx.Addr, time.Second, []byte("hello"))
	if err != nil || !res.Admitted {
		t.Fatalf("send: %+v %v", res, err)
	}
	a, err := rx.Read()
	if err != nil || string(a.Payload) != "hello" || a.Kernel == 0 || a.Kernel > a.User {
		t.Fatalf("receive: %q kernel %d user %d %v", a.Payload, a.Kernel, a.User, err)
	}
	if res, _ := c.Send(1, rx.Addr, rt.Monotonic()-1, []byte("late")); res.Admitted || res.Reason != rt.ReasonOwnDeadline {
		t.Errorf("past deadline: %+v (%s)", res, res.Reason)
	}
	if res, _ := c.SendRelative(1, rx.Addr, 1_000_000, []byte("relative")); !res.Admitted {
		t.Errorf("relative deadline: %+v (%s)", res, res.Reason)
	}
	if js, err := c.Stats(); err != nil || !strings.Contains(string(js), `"admitted":2`) {
		t.Errorf("stats: %s %v", js, err)
	}
}

// TestClientAttach: the application's own connected socket attached; the
// datagram arrives from it, and SendOn can still pick the daemon's.
func TestClientAttach(t *testing.T) {
	testutil.RequireRoot(t)
	sock, rx, ns := rtlanetest.StartNS(t)
	var app *net.UDPConn
	ns.Do(t, func() (err error) {
		app, err = net.DialUDP("udp4", nil, rx.UDPAddr())
		return err
	})
	defer app.Close()
	c, err := rt.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Attach(app)
	var refused *rt.RefusedError
	if errors.As(err, &refused) && refused.Reason == rt.ReasonUnsupported {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.SendWithin(1, netip.AddrPort{}, time.Second, []byte("own")); err != nil || !res.Admitted {
		t.Fatalf("send: %+v %v", res, err)
	}
	own := app.LocalAddr().(*net.UDPAddr).AddrPort()
	if a, err := rx.Read(); err != nil || string(a.Payload) != "own" || a.From != own {
		t.Fatalf("receive: %q from %v, want from %v: %v", a.Payload, a.From, own, err)
	}
	if res, err := c.SendOn(rt.DaemonSocket, 1, rx.Addr, rt.Monotonic()+int64(time.Second), []byte("daemon's")); err != nil || !res.Admitted {
		t.Fatalf("send from the daemon's socket: %+v %v", res, err)
	}
	if a, err := rx.Read(); err != nil || a.From == own {
		t.Fatalf("the daemon's socket: from %v (the application's is %v): %v", a.From, own, err)
	}
	if res, _ := c.SendOn(s+1, 1, rx.Addr, rt.Monotonic()+int64(time.Second), nil); res.Admitted || res.Reason != rt.ReasonBadSocket {
		t.Errorf("an unattached socket: %+v", res)
	}
}

// TestReasonNames: the reasons are named as lanes_rt.h names them.
func TestReasonNames(t *testing.T) {
	for r, want := range map[rt.Reason]string{rt.ReasonNone: "none", rt.ReasonNotGranted: "not-granted",
		rt.ReasonDisplaces: "would-make-others-late", rt.ReasonUnsupported: "unsupported",
		rt.ReasonBadDeadline: "deadline-out-of-range", rt.ReasonOverShare: "over-share", 200: "reason-200"} {
		if r.String() != want {
			t.Errorf("reason %d: %q, want %q", uint8(r), r.String(), want)
		}
	}
}
