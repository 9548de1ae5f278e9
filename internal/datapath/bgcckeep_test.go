// bgcckeep_test.go checks the cgroup/setsockopt program: a connected
// background socket whose app sets TCP_CONGESTION keeps LEDBAT++ (the call
// succeeds), a background socket's congestion control set before connect
// is still accepted, and an interactive socket gets the one it asks for;
// the name the background socket's app asked for is readable by cookie
// until the socket closes.
package datapath

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestBackgroundKeepsLEDBATAfterAppSetsCC(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	var h *Host
	p.A.Do(t, func() (err error) {
		if h, err = OpenHost(HostConfig{Instance: "bk1"}); err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		return nil
	})
	if h.ops == nil || h.bg == nil || h.optLink == nil {
		t.Skipf("no sock_ops, LEDBAT++ or cgroup/setsockopt here: %v", h.Capabilities())
	}
	_, addr := startSink(t, p.B, p.AddrB, 9431)
	if err := h.SetUIDLane(0, lane.Background); err != nil {
		t.Fatal(err)
	}
	bg := dialCC(t, p.A, addr, "reno") // before connect: accepted, then switched
	if got := setThenGetCC(t, bg, "cubic"); got != h.bg.Name {
		t.Errorf("background socket after setsockopt(cubic): runs %q, want %q", got, h.bg.Name)
	}
	if err := h.SetUIDLane(0, lane.Interactive); err != nil {
		t.Fatal(err)
	}
	fg := dialCC(t, p.A, addr, "reno")
	if got := setThenGetCC(t, fg, "cubic"); got != "cubic" {
		t.Errorf("interactive socket after setsockopt(cubic): runs %q", got)
	}
	hs, err := h.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if hs.Sockops["bg_cc_kept"] != 1 {
		t.Errorf("bg_cc_kept %d, want 1: %v", hs.Sockops["bg_cc_kept"], hs.Sockops)
	}
	// what the monitor shows: the app's request beside the LEDBAT++ that runs
	bgCookie, fgCookie := cookieOf(t, bg), cookieOf(t, fg)
	if got, ok := h.SocketAppCC(bgCookie); !ok || got != "cubic" {
		t.Errorf("SocketAppCC(background socket) = %q, %v; want cubic", got, ok)
	}
	if got, ok := h.SocketAppCC(fgCookie); ok {
		t.Errorf("SocketAppCC(interactive socket) = %q, want none", got)
	}
	if n := h.OwnCCs()[h.bg.Name]; n != CCNameLEDBAT {
		t.Errorf("OwnCCs()[%s] = %q, want %q", h.bg.Name, n, CCNameLEDBAT)
	}
	// the entry goes with the socket (STATE_CB to TCP_CLOSE)
	bg.SetLinger(0) // a reset: the socket is closed at once
	bg.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, ok := h.SocketAppCC(bgCookie); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lanes_app_cc still holds closed socket %d", bgCookie)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setThenGetCC sets c's TCP_CONGESTION to cc (which must succeed) and
// returns the one it runs then.
func setThenGetCC(t *testing.T, c *net.TCPConn, cc string) string {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got string
	var serr, gerr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
		got, gerr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil || gerr != nil {
		t.Fatalf("setsockopt(TCP_CONGESTION, %s): %v; getsockopt: %v", cc, serr, gerr)
	}
	return got
}
