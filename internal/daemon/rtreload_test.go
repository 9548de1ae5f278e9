// rtreload_test.go: a reload keeps the realtime lane's clients when its
// section is unchanged and says what it reset when it changed (N8).
package daemon_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/rtclient"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/rt"
)

// TestReloadKeepsRealtime (audit N8): SIGHUP with an unchanged policy closed
// every realtime client's connection (EPIPE) and lost its attached sockets and
// queued datagrams: a reload restarted the realtime component. Fix: a reload
// keeps the realtime lane (the same lanes-rtd, connections, attached sockets
// and queue) when its section, with the rate and interface it derives, is
// unchanged; a changed section restarts it and the log names the changed keys
// and what was reset.
func TestReloadKeepsRealtime(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	rtSock := filepath.Join(t.TempDir(), "rt.sock")
	section := fmt.Sprintf("realtime:\n  enabled: true\n  socket: %s\n  rate: 100mbit\n", rtSock)
	d, sock := startDaemon(t, p.A, devicePolicy(p.LinkA)+section)
	var rx *net.UDPConn
	p.B.Do(t, func() (err error) { rx, err = net.ListenUDP("udp", &net.UDPAddr{Port: 9000}); return err })
	t.Cleanup(func() { rx.Close() })
	c, err := rtclient.Dial(rtSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var app *net.UDPConn
	p.A.Do(t, func() (err error) {
		app, err = net.DialUDP("udp", nil, &net.UDPAddr{IP: p.AddrB, Port: 9000})
		return err
	})
	t.Cleanup(func() { app.Close() })
	s, err := c.Attach(app)
	var refused *rt.RefusedError
	if errors.As(err, &refused) && refused.Reason == rt.ReasonUnsupported {
		t.Skipf("attach: %v (SO_PRIORITY control messages: Linux 6.14+): no attached socket to keep", err)
	}
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	send := func(what string) error {
		res, err := c.SendOn(s, 1, netip.AddrPort{}, monoclock.Now()+int64(time.Second), []byte(what))
		if err != nil {
			return err
		}
		if !res.Admitted {
			return fmt.Errorf("refused: %s", res.Reason)
		}
		rx.SetReadDeadline(time.Now().Add(testutil.Patience(2 * time.Second)))
		buf := make([]byte, 100)
		n, _, err := rx.ReadFromUDP(buf)
		if err != nil || string(buf[:n]) != what {
			return fmt.Errorf("receiver: %q %v", buf[:n], err)
		}
		return nil
	}
	if err := send("before"); err != nil {
		t.Fatal(err)
	}
	// reload applies pol and waits until the realtime lane runs again.
	reload := func(pol string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(filepath.Dir(sock), "policy.yaml"), []byte(pol), 0o644); err != nil {
			t.Fatal(err)
		}
		// the realtime component is kept or restarted after "policy
		// reloaded", saying which: the reload ends with that word
		const done = "reload: realtime section"
		before := strings.Count(d.out.String(), done)
		d.cmd.Process.Signal(syscall.SIGHUP)
		waitLong(t, "the reload", func() bool {
			return strings.Count(d.out.String(), done) > before && strings.Contains(status(t, sock).Components["realtime"], "admitted")
		})
	}
	// another section changes, the realtime one does not
	reload(devicePolicy(p.LinkA) + "dscp:\n  ef_realtime: true\n" + section)
	if err := send("after an unchanged reload"); err != nil {
		t.Fatalf("the client's connection and attached socket after a reload that left the realtime section alone: %v", err)
	}
	if !strings.Contains(d.out.String(), "realtime section unchanged") {
		t.Error("the reload's log does not say the realtime lane was kept")
	}
	// the realtime section changes: the client is told by its connection's end
	reload(devicePolicy(p.LinkA) + section + "  max_queue: 5000\n")
	if out := d.out.String(); !strings.Contains(out, "changed=max_queue") || !strings.Contains(out, "client connections closed") {
		t.Errorf("the reload's log does not say what changed and what was reset:\n%s", out)
	}
	if err := send("after a changed reload"); err == nil {
		t.Error("the client's connection outlived a restart of the realtime lane")
	}
}
