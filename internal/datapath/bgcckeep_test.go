// bgcckeep_test.go checks the cgroup/setsockopt program: a connected
// background socket whose app sets TCP_CONGESTION keeps LEDBAT++ (the call
// succeeds), a background socket's congestion control set before connect
// is still accepted, and an interactive socket gets the one it asks for;
// the name the background socket's app asked for is readable by cookie
// until the socket closes.
package datapath

import (
	"net"
	"os"
	"slices"
	"strings"
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
	if err := h.Lanes.SetUIDLane(0, lane.Background); err != nil {
		t.Fatal(err)
	}
	bg := dialCC(t, p.A, addr, "reno") // before connect: accepted, then switched
	if got := setThenGetCC(t, bg, "cubic"); got != h.bg.Name {
		t.Errorf("background socket after setsockopt(cubic): runs %q, want %q", got, h.bg.Name)
	}
	if err := h.Lanes.SetUIDLane(0, lane.Interactive); err != nil {
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
	if got, ok := h.Programs.SocketAppCC(bgCookie); !ok || got != "cubic" {
		t.Errorf("SocketAppCC(background socket) = %q, %v; want cubic", got, ok)
	}
	if got, ok := h.Programs.SocketAppCC(fgCookie); ok {
		t.Errorf("SocketAppCC(interactive socket) = %q, want none", got)
	}
	if n := h.CCs.OwnCCs()[h.bg.Name]; n != CCNameLEDBAT {
		t.Errorf("OwnCCs()[%s] = %q, want %q", h.bg.Name, n, CCNameLEDBAT)
	}
	// the entry goes with the socket (STATE_CB to TCP_CLOSE)
	bg.SetLinger(0) // a reset: the socket is closed at once
	bg.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		if _, ok := h.Programs.SocketAppCC(bgCookie); !ok {
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

// TestRefusedCCNotSwallowed (audit N21): with allowed congestion controls
// "reno bbr", a user's background socket asking for cubic "succeeded"
// (the program skipped the kernel's handler, which would have refused
// it), and moved back to interactive it ran cubic, because bpf_setsockopt
// ignores the allow-list. Fix: a name not in the allow-list, asked by a
// caller other than root, is refused (EPERM) and never kept.
func TestRefusedCCNotSwallowed(t *testing.T) {
	requireCgroup2(t)
	refused := notAllowedCC(t)
	p := testutil.NewVethPair(t)
	var h *Host
	p.A.Do(t, func() (err error) {
		if h, err = OpenHost(HostConfig{Instance: "bk2"}); err != nil {
			return err
		}
		t.Cleanup(func() { h.Close() })
		return nil
	})
	if h.ops == nil || h.bg == nil || h.optLink == nil {
		t.Skipf("no sock_ops, LEDBAT++ or cgroup/setsockopt here: %v", h.Capabilities())
	}
	_, addr := startSink(t, p.B, p.AddrB, 9432)
	if err := h.Lanes.SetUIDLane(0, lane.Background); err != nil {
		t.Fatal(err)
	}
	bg := dialCC(t, p.A, addr, "reno")
	rc, err := bg.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	asNobody := func(cc string) (err error) {
		testutil.AsUser(t, 65534, 65534, nil, func() error {
			return rc.Control(func(fd uintptr) { err = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc) })
		})
		return err
	}
	if err := asNobody(refused); err == nil {
		t.Errorf("an unprivileged setsockopt(%s) on a background socket succeeded; %s is not in the allow-list", refused, refused)
	}
	if got, ok := h.Programs.SocketAppCC(cookieOf(t, bg)); ok {
		t.Errorf("the refused name was kept for the move back: %q", got)
	}
	if err := asNobody("reno"); err != nil {
		t.Errorf("an unprivileged setsockopt(reno), allowed: %v", err)
	}
	if got, _ := h.Programs.SocketAppCC(cookieOf(t, bg)); got != "reno" {
		t.Errorf("the allowed name kept for the move back: %q, want reno", got)
	}
}

// notAllowedCC is a congestion control this kernel has that the allow-list
// leaves out (skips the test when there is none).
func notAllowedCC(t *testing.T) string {
	t.Helper()
	avail, err1 := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	allowed, err2 := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	if err1 != nil || err2 != nil {
		t.Skipf("congestion control lists: %v %v", err1, err2)
	}
	for _, cc := range strings.Fields(string(avail)) {
		if !strings.HasPrefix(cc, "lanes") && !slices.Contains(strings.Fields(string(allowed)), cc) {
			return cc
		}
	}
	t.Skipf("every available congestion control is allowed (%s)", allowed)
	return ""
}
