// client_test.go: the Go client and the C header against a real lane in a
// fresh network namespace (loopback receiver).
package rtclient_test

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/rtclient"
	"github.com/lanes-net/lanes/internal/rtlane/rtlanetest"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestGoClient(t *testing.T) {
	testutil.RequireRoot(t)
	sock, rx := rtlanetest.Start(t)
	c, err := rtclient.Dial(sock)
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
	if res, _ := c.Send(1, rx.Addr, rtclient.Monotonic()-1, []byte("late")); res.Admitted || res.ReasonString() != "own-deadline-unmeetable" {
		t.Errorf("past deadline: %+v", res)
	}
	if js, err := c.Stats(); err != nil || !strings.Contains(string(js), `"admitted":1`) {
		t.Errorf("stats: %s %v", js, err)
	}
}

// TestGoClientAttach: the application's own connected socket attached;
// the datagram arrives from it, and SendOn can still pick the daemon's.
func TestGoClientAttach(t *testing.T) {
	testutil.RequireRoot(t)
	sock, rx, ns := rtlanetest.StartNS(t)
	var app *net.UDPConn
	ns.Do(t, func() (err error) {
		app, err = net.DialUDP("udp4", nil, rx.UDPAddr())
		return err
	})
	defer app.Close()
	c, err := rtclient.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Attach(app)
	if err != nil {
		if strings.Contains(err.Error(), "unsupported") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	if res, err := c.SendWithin(1, netip.AddrPort{}, time.Second, []byte("own")); err != nil || !res.Admitted {
		t.Fatalf("send: %+v %v", res, err)
	}
	own := app.LocalAddr().(*net.UDPAddr).AddrPort()
	if a, err := rx.Read(); err != nil || string(a.Payload) != "own" || a.From != own {
		t.Fatalf("receive: %q from %v, want from %v: %v", a.Payload, a.From, own, err)
	}
	if res, err := c.SendOn(rtclient.DaemonSocket, 1, rx.Addr, rtclient.Monotonic()+int64(time.Second), []byte("daemon's")); err != nil || !res.Admitted {
		t.Fatalf("send from the daemon's socket: %+v %v", res, err)
	}
	if a, err := rx.Read(); err != nil || a.From == own {
		t.Fatalf("the daemon's socket: from %v (the application's is %v): %v", a.From, own, err)
	}
	if res, _ := c.SendOn(s+1, 1, rx.Addr, rtclient.Monotonic()+int64(time.Second), nil); res.Admitted || res.ReasonString() != "bad-socket" {
		t.Errorf("an unattached socket: %+v", res)
	}
}

// TestCExample compiles include/lanes_rt.h's example with the C compiler
// found on PATH and runs it against the lane.
func TestCExample(t *testing.T) {
	testutil.RequireRoot(t)
	cc := ""
	for _, c := range []string{"cc", "gcc", "clang"} {
		if _, err := exec.LookPath(c); err == nil {
			cc = c
			break
		}
	}
	if cc == "" {
		t.Skip("no C compiler on PATH")
	}
	bin := filepath.Join(t.TempDir(), "rt_send")
	out, err := exec.Command(cc, "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_DEFAULT_SOURCE",
		"-I", "../../include", "testdata/rt_send.c", "-o", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	sock, rx := rtlanetest.Start(t)
	out, err = exec.Command(bin, sock, "127.0.0.1", strings.TrimPrefix(rx.Addr.String(), "127.0.0.1:"), "5").CombinedOutput()
	if err != nil {
		t.Fatalf("rt_send: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 6 || strings.Count(string(out), " admitted ") != 5 || !strings.Contains(lines[5], "refused own-deadline-unmeetable") {
		t.Fatalf("rt_send output:\n%s", out)
	}
	for i := 0; i < 5; i++ {
		a, err := rx.Read()
		if err != nil || !strings.HasPrefix(string(a.Payload), "c-example ") {
			t.Fatalf("arrival %d: %q %v", i, a.Payload, err)
		}
	}
	_ = os.Remove(bin)
}
