// appsock_test.go: clients' own sockets (lanes-rtd's ATTACH). Datagrams leave from
// the application's socket, IPv4 and IPv6, in the realtime class, and the
// replies reach it; the lane takes only UDP sockets of its namespace, at
// most wire.MaxSocks a connection, never an ungranted client's, closes
// descriptors that come with anything but an attach, and closes every
// socket when its client goes.
package rtlane

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/rt"
)

// requireAttach skips where the kernel lacks what attaching needs.
func requireAttach(t *testing.T, l *Lane) {
	t.Helper()
	if !l.attachOK {
		t.Skip("no SO_PRIORITY control messages or SO_NETNS_COOKIE (Linux 6.14+)")
	}
}

// TestOwnSocketCarriesDatagrams: a connected IPv4 socket attached; every
// datagram arrives from its address and port, through the realtime class.
func TestOwnSocketCarriesDatagrams(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 50_000_000, nil)
	requireAttach(t, b.lane)
	var app *net.UDPConn
	b.p.A.Do(t, func() (err error) {
		app, err = net.DialUDP("udp4", nil, b.rx.UDPAddr())
		return err
	})
	defer app.Close()
	c, err := rt.Dial(b.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s, err := c.Attach(app); err != nil || s != 1 {
		t.Fatalf("attach: socket %d, %v", s, err)
	}
	const n = 20
	for i := 1; i <= n; i++ {
		res, err := c.SendWithin(5, netip.AddrPort{}, 50*time.Millisecond, payload(200, 5, uint32(i), 0, 0))
		if err != nil || !res.Admitted {
			t.Fatalf("send %d: %+v %v", i, res, err)
		}
	}
	want := app.LocalAddr().(*net.UDPAddr).AddrPort()
	b.rx.SetTimeout(2 * time.Second)
	for i := 0; i < n; i++ {
		a, err := b.rx.Read()
		if err != nil {
			t.Fatalf("arrival %d: %v", i, err)
		}
		if a.From != want {
			t.Fatalf("arrival %d from %v, want the application's %v", i, a.From, want)
		}
	}
	ds, err := b.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if rt := ds.Lanes[lane.Realtime]; rt.Packets < n {
		t.Errorf("realtime class carried %d packets, want %d", rt.Packets, n)
	}
}

// TestOwnSocketIPv6Replies: an unconnected IPv6 socket attached, an echo
// server on ::1; the server sees the application's port and the replies
// come back to the application's socket.
func TestOwnSocketIPv6Replies(t *testing.T) {
	ns := testutil.NewNetNS(t)
	cfg := config.DefaultRealtime()
	cfg.Enabled, cfg.Socket, cfg.Rate = true, socketDir(t)+"/rt.sock", 1_000_000_000
	var l *Lane
	var app, echo *net.UDPConn
	ns.Do(t, func() (err error) {
		if l, err = New(cfg, testOpts()...); err != nil {
			return err
		}
		if echo, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
			return err
		}
		app, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
		return err
	})
	defer app.Close()
	defer echo.Close()
	runStarted(t, l)
	requireAttach(t, l)
	seen := make(chan netip.AddrPort, 16)
	go func() {
		buf := make([]byte, 2048)
		for {
			k, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			seen <- from
			_, _ = echo.WriteToUDPAddrPort(buf[:k], from)
		}
	}()
	c, err := rt.Dial(cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Attach(app); err != nil {
		t.Fatal(err)
	}
	dst := echo.LocalAddr().(*net.UDPAddr).AddrPort()
	if res, err := c.SendWithin(1, dst, 10*time.Millisecond, []byte("ping")); err != nil || !res.Admitted {
		t.Fatalf("send: %+v %v", res, err)
	}
	_ = app.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	k, _, err := app.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:k]) != "ping" {
		t.Fatalf("reply on the application's socket: %q %v", buf[:k], err)
	}
	if from, own := <-seen, app.LocalAddr().(*net.UDPAddr).AddrPort(); from.Port() != own.Port() {
		t.Errorf("server saw port %d, the application's is %d", from.Port(), own.Port())
	}
}

// TestCorkedSocketNotSent: a datagram for a socket with UDP_CORK set is
// dropped (send-error), not left in the socket with the realtime priority.
func TestCorkedSocketNotSent(t *testing.T) {
	ns := testutil.NewNetNS(t)
	cfg := config.DefaultRealtime()
	cfg.Enabled, cfg.Socket, cfg.Rate = true, socketDir(t)+"/rt.sock", 1_000_000_000
	var l *Lane
	var app, srv *net.UDPConn
	ns.Do(t, func() (err error) {
		if l, err = New(cfg, testOpts()...); err != nil {
			return err
		}
		if srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			return err
		}
		app, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	})
	defer app.Close()
	defer srv.Close()
	runStarted(t, l)
	requireAttach(t, l)
	c, err := rt.Dial(cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Attach(app); err != nil {
		t.Fatal(err)
	}
	rc, _ := app.SyscallConn()
	_ = rc.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_CORK, 1) })
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.SendWithin(1, netip.AddrPort{}, 10*time.Millisecond, []byte("corked")); err != nil || !res.Admitted {
		t.Fatalf("send: %+v %v", res, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Totals.SendErrors != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("totals %+v, want one send error", l.Stats().Totals)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ns := c.Notices(true); len(ns) != 1 || ns[0].Reason != wire.ReasonSendError {
		t.Errorf("notices %+v, want one send-error", ns)
	}
	_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_CORK, 0) })
	_ = srv.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _, err := srv.ReadFromUDPAddrPort(make([]byte, 64)); err == nil {
		t.Errorf("a datagram of %d bytes arrived after the uncork", n)
	}
}

// runStarted runs l until the test ends.
func runStarted(t *testing.T, l *Lane) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Run(t.Context()) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// doFds sends one request with descriptors and returns the next reply.
func (c *rawClient) doFds(r *wire.Request, fds ...int) (wire.Reply, error) {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(c.fd, wire.AppendRequest(nil, r), oob, nil, unix.MSG_NOSIGNAL); err != nil {
		return wire.Reply{}, err
	}
	return c.read()
}

// openFds counts this process's open descriptors.
// openFds counts the lane's descriptors: this process's, and its
// lanes-rtd's when the data path runs there.
func openFds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := len(ents)
	for _, pid := range helperPids() {
		ents, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		n += len(ents)
	}
	return n
}

// socketIn opens a socket in ns (nil: the test's own namespace).
func socketIn(t *testing.T, ns *testutil.NetNS, fam, typ, proto int) int {
	t.Helper()
	fd := -1
	open := func() (err error) { fd, err = unix.Socket(fam, typ|unix.SOCK_CLOEXEC, proto); return err }
	if ns == nil {
		if err := open(); err != nil {
			t.Fatal(err)
		}
	} else {
		ns.Do(t, open)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestAttachChecks: what the lane refuses to take or to send, and that
// every descriptor it does not keep is closed, and those it keeps are
// closed when the client goes.
func TestAttachChecks(t *testing.T) {
	ns := testutil.NewNetNS(t)
	cfg := config.DefaultRealtime()
	cfg.Enabled, cfg.Socket, cfg.Rate = true, socketDir(t)+"/rt.sock", 1_000_000_000
	var l *Lane
	ns.Do(t, func() (err error) { l, err = New(cfg, testOpts()...); return err })
	runStarted(t, l)
	requireAttach(t, l)
	c, err := dialAs(t, cfg.Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	attach := &wire.Request{Type: wire.TypeAttach}
	udp4 := socketIn(t, ns, unix.AF_INET, unix.SOCK_DGRAM, 0)
	if _, err := c.stats(); err != nil { // the lane's side set up before counting
		t.Fatal(err)
	}
	base := openFds(t) + 4 // and the four below
	for name, fd := range map[string]int{
		"tcp":                  socketIn(t, ns, unix.AF_INET, unix.SOCK_STREAM, 0),
		"unix datagram":        socketIn(t, ns, unix.AF_UNIX, unix.SOCK_DGRAM, 0),
		"udp of another netns": socketIn(t, nil, unix.AF_INET, unix.SOCK_DGRAM, 0),
		"not a socket (/dev/null)": func() int {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return int(f.Fd())
		}(),
	} {
		if rep, err := c.doFds(attach, fd); err != nil || rep.Type != wire.TypeReject || rep.Reason != wire.ReasonBadSocket {
			t.Errorf("%s: %#x %s %v, want bad-socket", name, rep.Type, wire.ReasonString(rep.Reason), err)
		}
	}
	for name, fds := range map[string][]int{"no descriptor": nil, "two descriptors": {udp4, udp4}} {
		if rep, err := c.doFds(attach, fds...); err != nil || rep.Reason != wire.ReasonBadSocket {
			t.Errorf("%s: %#x %s %v, want bad-socket", name, rep.Type, wire.ReasonString(rep.Reason), err)
		}
	}
	// A descriptor with a request other than an attach is closed.
	if rep, err := c.doFds(&wire.Request{Type: wire.TypeStats}, udp4); err != nil || rep.Type != wire.TypeStatsOK {
		t.Errorf("stats with a descriptor: %#x %v", rep.Type, err)
	}
	if n := openFds(t); n != base {
		t.Errorf("%d descriptors open after refusals, %d before: the lane kept some", n, base)
	}
	for i := 1; i <= wire.MaxSocks; i++ {
		if rep, err := c.doFds(attach, udp4); err != nil || rep.Type != wire.TypeAttached || int(rep.Sock) != i {
			t.Fatalf("attach %d: %#x sock %d %s %v", i, rep.Type, rep.Sock, wire.ReasonString(rep.Reason), err)
		}
	}
	if rep, err := c.doFds(attach, udp4); err != nil || rep.Reason != wire.ReasonTooMany {
		t.Errorf("attach %d: %s %v, want too-many-sockets", wire.MaxSocks+1, wire.ReasonString(rep.Reason), err)
	}
	if got := l.Stats().AppSocks; got != wire.MaxSocks {
		t.Errorf("app_socks %d, want %d", got, wire.MaxSocks)
	}
	checkSendRefusals(t, c)
	_ = unix.Shutdown(c.fd, unix.SHUT_RDWR) // closed by dialAs's cleanup
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().AppSocks != 0 || openFds(t) != base-1 { // the lane's end of c closed too
		if time.Now().After(deadline) {
			t.Fatalf("client gone: app_socks %d, %d descriptors open, want 0 and %d", l.Stats().AppSocks, openFds(t), base-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkSendRefusals: datagrams the attached (unconnected IPv4) sockets 1..
// cannot carry are refused before the admission test.
func checkSendRefusals(t *testing.T, c *rawClient) {
	t.Helper()
	v4, v6 := netip.MustParseAddrPort("127.0.0.1:9"), netip.MustParseAddrPort("[::1]:9")
	for _, tc := range []struct {
		name string
		sock uint16
		dst  netip.AddrPort
		want uint8
	}{
		{"no such socket", wire.MaxSocks + 1, v4, wire.ReasonBadSocket},
		{"unconnected, no destination", 1, netip.AddrPort{}, wire.ReasonBadDest},
		{"IPv6 destination on an IPv4 socket", 1, v6, wire.ReasonBadDest},
		{"port 0", 1, netip.MustParseAddrPort("127.0.0.1:0"), wire.ReasonBadDest},
	} {
		rep, err := c.do(&wire.Request{Type: wire.TypeSend, Sock: tc.sock, Flags: wire.FlagRelative, Deadline: 10_000, Dst: tc.dst, Payload: []byte("x")})
		if err != nil || rep.Type != wire.TypeReject || rep.Reason != tc.want {
			t.Errorf("%s: %#x %s %v, want %s", tc.name, rep.Type, wire.ReasonString(rep.Reason), err, wire.ReasonString(tc.want))
		}
	}
	if rep, err := c.do(&wire.Request{Type: wire.TypeSend, Sock: 1, Flags: wire.FlagRelative, Deadline: 10_000, Dst: v4, Payload: []byte("x")}); err != nil || rep.Type != wire.TypeAdmit {
		t.Errorf("a good datagram: %#x %s %v", rep.Type, wire.ReasonString(rep.Reason), err)
	}
}

// TestAttachNotGranted: an ungranted client's attach is refused and the
// descriptor never reaches the lane (its read has no control buffer).
func TestAttachNotGranted(t *testing.T) {
	ns := testutil.NewNetNS(t)
	cfg := config.DefaultRealtime()
	cfg.Enabled, cfg.Socket, cfg.Rate = true, socketDir(t)+"/rt.sock", 1_000_000_000
	var l *Lane
	ns.Do(t, func() (err error) { l, err = New(cfg, testOpts()...); return err })
	runStarted(t, l)
	c, err := dialAs(t, cfg.Socket, 65534)
	if err != nil {
		t.Fatal(err)
	}
	udp := socketIn(t, ns, unix.AF_INET, unix.SOCK_DGRAM, 0)
	if _, err := c.stats(); err != nil { // the lane's side set up before counting
		t.Fatal(err)
	}
	base := openFds(t)
	rep, err := c.doFds(&wire.Request{Type: wire.TypeAttach}, udp)
	if err != nil || rep.Type != wire.TypeReject || rep.Reason != wire.ReasonNotGranted {
		t.Errorf("ungranted attach: %#x %s %v, want not-granted", rep.Type, wire.ReasonString(rep.Reason), err)
	}
	if n := openFds(t); n != base || l.Stats().AppSocks != 0 {
		t.Errorf("%d descriptors open, %d before; app_socks %d", n, base, l.Stats().AppSocks)
	}
}
