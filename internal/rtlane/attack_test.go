// attack_test.go: the realtime socket attacked by an unprivileged local
// user (the tests run as root and act as nobody on a thread of their own,
// testutil.AsUser). Each test names the defect it guards against and the fix.
package rtlane

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/rtlane/wire"
	"github.com/lanes-net/lanes/internal/testutil"
)

// rawClient is a bare realtime client: one SEQPACKET fd, every read bounded
// by a receive timeout so that a daemon that stopped answering fails the
// test instead of hanging it (the bound is for failures only: a live lane
// answers at once).
type rawClient struct {
	t   *testing.T
	fd  int
	buf []byte // one reply and a byte more: a longer one shows as too long
}

// dialAs connects to path with the credentials of uid (0: as the test).
func dialAs(t *testing.T, path string, uid uint32) (*rawClient, error) {
	var fd int
	dial := func() error {
		var err error
		fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err = unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			unix.Close(fd)
		}
		return err
	}
	var err error
	if uid == 0 {
		err = dial()
	} else {
		testutil.AsUser(t, uid, uid, nil, func() error { err = dial(); return nil })
	}
	if err != nil {
		return nil, err
	}
	tv := unix.NsecToTimeval(int64(30 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	c := &rawClient{t: t, fd: fd}
	t.Cleanup(func() { unix.Close(fd) })
	return c, nil
}

// do sends one request and returns the next reply.
func (c *rawClient) do(r *wire.Request) (wire.Reply, error) {
	if err := unix.Sendmsg(c.fd, wire.AppendRequest(nil, r), nil, nil, unix.MSG_NOSIGNAL); err != nil && err != unix.EPIPE {
		return wire.Reply{}, err // EPIPE: closed by the daemon, its last reply may be waiting
	}
	return c.read()
}

// read returns the next reply, into the client's buffer allocated once: a
// large buffer made and zeroed per read costs the measuring client up to a
// millisecond on a loaded machine, which the reply times would show.
func (c *rawClient) read() (wire.Reply, error) {
	if c.buf == nil {
		c.buf = make([]byte, wire.MaxReply+1)
	}
	buf := c.buf
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return wire.Reply{}, err
		}
		if n == 0 {
			return wire.Reply{}, fmt.Errorf("connection closed")
		}
		if n > wire.MaxReply {
			return wire.Reply{}, fmt.Errorf("reply of %d bytes, above wire.MaxReply %d", n, wire.MaxReply)
		}
		return wire.ParseReply(append([]byte(nil), buf[:n]...))
	}
}

func (c *rawClient) stats() (Snapshot, error) {
	var s Snapshot
	rep, err := c.do(&wire.Request{Type: wire.TypeStats})
	if err != nil {
		return s, err
	}
	if rep.Type != wire.TypeStatsOK {
		return s, fmt.Errorf("stats: reply %#x reason %s", rep.Type, wire.ReasonString(rep.Reason))
	}
	return s, json.Unmarshal(rep.Body, &s)
}

func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads: line")
	return 0
}

// TestAttackConnFlood: any local user crashed the daemon by opening
// connections, each of which got its own locked OS thread before any grant
// check (10,100 of them hit Go's 10,000-thread limit). Fix: ungranted
// clients are served on the netpoller without a thread, and connections are
// limited per uid (max_conns_per_uid) and in total (max_conns).
func TestAttackConnFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	before := threads(t)
	const n = 400
	served, busy := 0, 0
	for i := range n {
		c, err := dialAs(t, b.cfg.Socket, testutil.Nobody)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		rep, err := c.do(&wire.Request{Type: wire.TypeStats})
		switch {
		case err != nil:
			t.Fatalf("connection %d: %v", i, err)
		case rep.Type == wire.TypeStatsOK:
			served++
		case rep.Type == wire.TypeError && rep.Reason == wire.ReasonBusy:
			busy++
		default:
			t.Fatalf("connection %d: reply %#x %s", i, rep.Type, wire.ReasonString(rep.Reason))
		}
	}
	grown := threads(t) - before
	t.Logf("%d connections as nobody: %d served, %d refused busy; threads grew by %d", n, served, busy, grown)
	if served != b.cfg.MaxConnsPerUID || busy != n-served {
		t.Errorf("served %d (want max_conns_per_uid = %d), refused %d", served, b.cfg.MaxConnsPerUID, busy)
	}
	if grown > 40 {
		t.Errorf("threads grew by %d for %d unprivileged connections: one per connection?", grown, n)
	}
	// Root still gets in and is served.
	c, err := dialAs(t, b.cfg.Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.stats()
	if err != nil {
		t.Fatalf("root after the flood: %v", err)
	}
	if s.RefusedConns != uint64(busy) || s.Conns != served+1 {
		t.Errorf("stats conns %d refused %d, want %d and %d", s.Conns, s.RefusedConns, served+1, busy)
	}
}

// TestAttackStatsGrowth: the stats table grew by one entry per rejected
// (uid, flow), without bound, until the STATS reply exceeded the message
// size. Fix: at most maxFlowsPerUID entries per uid (the rest fold into
// flow ^0), maxFlows in all, and STATS replies trimmed to wire.MaxReply.
func TestAttackStatsGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	c, err := dialAs(t, b.cfg.Socket, testutil.Nobody)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddrPort(b.rx.Addr.String())
	const flows = 1000
	for f := range uint32(flows) {
		rep, err := c.do(&wire.Request{Type: wire.TypeSend, Flags: wire.FlagRelative, Flow: f, Seq: 1, Deadline: 1000, Dst: dst, Payload: []byte("x")})
		if err != nil || rep.Reason != wire.ReasonNotGranted {
			t.Fatalf("flow %d: %+v %v", f, rep, err)
		}
	}
	s, err := c.stats()
	if err != nil {
		t.Fatalf("stats after %d rejected flows: %v", flows, err)
	}
	if s.Totals.Rejected != flows {
		t.Errorf("rejected %d, want %d", s.Totals.Rejected, flows)
	}
	if got := len(b.lane.Stats().Flows); got > maxFlowsPerUID+1 {
		t.Errorf("%d stats entries after %d rejected flows of one uid, want at most %d", got, flows, maxFlowsPerUID+1)
	}
}

// TestStatsReplyFits: a STATS reply always fits wire.MaxReply, whatever the
// table holds, and a user sees only their own flows.
func TestStatsReplyFits(t *testing.T) {
	l := &Lane{own: newOwnCounters(), clients: connTable{conns: map[*conn]struct{}{}, perUID: map[uint32]int{}}}
	for uid := range uint32(100) {
		for f := range uint32(100) {
			l.own.flow(flowKey{uid + 1, f}).Rejects = map[string]uint64{"not-granted": 1}
		}
	}
	if n := len(l.own.flows); n > maxFlows+1 {
		t.Fatalf("%d entries, bound is %d", n, maxFlows+1)
	}
	var s Snapshot
	body := l.statsBody(0)
	if len(body) > wire.MaxReplyBody || json.Unmarshal(body, &s) != nil || !s.Truncated || len(s.Flows) == 0 {
		t.Errorf("root's body %d bytes (max %d), truncated %v, %d flows", len(body), wire.MaxReplyBody, s.Truncated, len(s.Flows))
	}
	s = Snapshot{}
	if err := json.Unmarshal(l.statsBody(7), &s); err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Flows {
		if f.UID != 7 {
			t.Fatalf("uid 7 sees uid %d's flow", f.UID)
		}
	}
	if len(s.Flows) != maxFlowsPerUID+1 {
		t.Errorf("uid 7 sees %d flows, want %d", len(s.Flows), maxFlowsPerUID+1)
	}
}

// TestAttackSocketTakeover: a second daemon silently took over the default
// rt.sock path of a running one. Fix: New refuses a socket someone answers on.
func TestAttackSocketTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	var err error
	var second *Lane
	b.p.A.Do(t, func() error { second, err = New(b.cfg, testOpts()...); return nil })
	if err == nil {
		second.Close()
		t.Fatal("a second lane replaced the live socket")
	}
	if !strings.Contains(err.Error(), "another daemon") {
		t.Errorf("error %v", err)
	}
	c, err := dialAs(t, b.cfg.Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.stats(); err != nil {
		t.Fatalf("first lane after the attempt: %v", err)
	}
}

// TestAttackAcceptEMFILE: the accept loop exited on the first error (a user
// exhausting the daemon's file descriptors: EMFILE), leaving a lane that
// status still listed but nobody could reach. Fix: resource errors are
// counted, backed off and survived.
func TestAttackAcceptEMFILE(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// No new descriptor anywhere in this process until restored: the
	// connection waits in the backlog and accept fails with EMFILE.
	zero := unix.Rlimit{Cur: 0, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &zero); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: b.cfg.Socket}); err != nil {
		restore()
		t.Fatal(err)
	}
	// Wait (bounded) until accept has failed at least once.
	for i := 0; b.lane.Stats().AcceptErrors == 0 && i < 3000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	restore()
	tv := unix.NsecToTimeval(int64(30 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	c := &rawClient{t: t, fd: fd}
	s, err := c.stats()
	if err != nil {
		t.Fatalf("no answer after EMFILE: %v", err)
	}
	if s.AcceptErrors == 0 {
		t.Errorf("accept never failed: the test did not exercise EMFILE")
	}
	t.Logf("accept failed %d times, lane still serving", s.AcceptErrors)
}

// TestRootConnectsWhenConnectionsFull (audit D10): 16 users holding 16
// connections each filled max_conns (256) and root's connection got EPIPE.
// Fix: an eighth of max_conns is reserved for root and granted clients; root
// has no per-uid bound.
func TestRootConnectsWhenConnectionsFull(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	served := 0
	for u := range uint32(16) {
		for range b.cfg.MaxConnsPerUID {
			c, err := dialAs(t, b.cfg.Socket, 70001+u)
			if err != nil {
				t.Fatal(err)
			}
			if rep, err := c.do(&wire.Request{Type: wire.TypeStats}); err == nil && rep.Type == wire.TypeStatsOK {
				served++
			}
		}
	}
	if want := b.cfg.MaxConns - reservedConns(b.cfg.MaxConns); served != want {
		t.Errorf("16 users got %d connections, want %d", served, want)
	}
	for i := range b.cfg.MaxConnsPerUID + 4 {
		c, err := dialAs(t, b.cfg.Socket, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.stats(); err != nil {
			t.Fatalf("root's connection %d after 16 users filled theirs: %v", i, err)
		}
	}
}

// TestUngrantedRequestFloodPaced (audit N7): an ungranted uid sent 11,800 STATS
// requests a second and the daemon answered every one (64 % of a CPU):
// the requests of clients who are not granted were not paced. Fix
// (pace.go): they are paced per uid at client_requests per second, as
// lanes-rtd paces granted ones, a connection waiting for its uid's next
// token before it reads. Judged: what the daemon answered of 8
// connections' flood stays within the rate (a loaded machine answers
// fewer, never more). Printed: the process's CPU, clients included (at
// load 7 on 2 CPUs: 74 % unpaced at 38,009/s, 18.5 % paced).
func TestUngrantedRequestFloodPaced(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	var conns []*rawClient
	for range 8 {
		c, err := dialAs(t, b.cfg.Socket, testutil.Nobody)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	const dur = 2 * time.Second
	answered := make(chan int, len(conns))
	cpu0, t0 := processCPU(t, os.Getpid()), time.Now()
	for _, c := range conns {
		go func() {
			n := 0
			req := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeStats})
			buf := make([]byte, wire.MaxReply+1)
			for time.Since(t0) < dur {
				if unix.Sendmsg(c.fd, req, nil, nil, unix.MSG_NOSIGNAL) != nil {
					break
				}
				if _, _, err := unix.Recvfrom(c.fd, buf, 0); err != nil {
					break
				}
				n++
			}
			answered <- n
		}()
	}
	total := 0
	for range conns {
		total += <-answered
	}
	cpu, wall := processCPU(t, os.Getpid())-cpu0, time.Since(t0)
	t.Logf("8 connections of an ungranted uid for %v: %d STATS answered (%.0f/s, paced at %d/s); the lane's process, the clients included, %.1f %% of a CPU",
		wall.Round(time.Millisecond), total, float64(total)/wall.Seconds(), b.cfg.ClientRequests, 100*float64(cpu)/float64(wall))
	if limit := float64(b.cfg.ClientRequests)*wall.Seconds()*1.1 + 200; float64(total) > limit {
		t.Errorf("the daemon answered %d requests of an ungranted uid in %v, above its pace (%.0f)", total, wall, limit)
	}
}
