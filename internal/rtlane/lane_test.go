// lane_test.go: unit tests of the config, grants and wire codec, and
// integration tests in fresh namespaces: client -> daemon path (rtlane in
// namespace A, lanes HTB tree shaped on A's veth, bulk TCP saturating it) ->
// UDP receiver in namespace B, with every decision and arrival checked.
package rtlane

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/pmqos"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/rt"
)

func TestConfigValidate(t *testing.T) {
	if err := config.DefaultRealtime().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for field, mut := range map[string]func(*config.Realtime){
		"socket":        func(c *config.Realtime) { c.Socket = "" },
		"rate":          func(c *config.Realtime) { c.Rate = 10 },
		"backlog":       func(c *config.Realtime) { c.Backlog = 100 },
		"reserve":       func(c *config.Realtime) { c.Reserve = 1 << 30 },
		"overhead":      func(c *config.Realtime) { c.Overhead = 1000 },
		"max_queue":     func(c *config.Realtime) { c.MaxQueue = 0 },
		"pm_latency_us": func(c *config.Realtime) { c.PMLatencyUS = -2 },
	} {
		c := config.DefaultRealtime()
		mut(&c)
		var fe *config.FieldError
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: got %v, want a FieldError on %q", field, err, field)
		}
	}
}

func TestGrants(t *testing.T) {
	g := config.RealtimeGrants{UIDs: []config.UID{1000}, GIDs: []config.GID{44}}
	for _, c := range []struct {
		uid  uint32
		gids []uint32
		want bool
	}{{0, nil, true}, {1000, nil, true}, {1001, []uint32{1001}, false}, {1001, []uint32{5, 44}, true}} {
		if got := g.Allows(c.uid, c.gids); got != c.want {
			t.Errorf("Allows(%d, %v) = %v", c.uid, c.gids, got)
		}
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, dst := range []string{"10.1.2.3:9000", "[2001:db8::1]:53"} {
		in := wire.Request{Type: wire.TypeSend, Flags: wire.FlagRelative, Flow: 7, Seq: 99,
			Deadline: 123456789, Dst: netip.MustParseAddrPort(dst), Payload: []byte("hello")}
		b := wire.AppendRequest(nil, &in)
		if len(b) != wire.RequestSize+5 {
			t.Fatalf("encoded %d bytes", len(b))
		}
		out, err := wire.ParseRequest(b)
		if err != nil || out.Dst != in.Dst || out.Flow != 7 || out.Seq != 99 || out.Deadline != in.Deadline ||
			out.Flags != in.Flags || string(out.Payload) != "hello" {
			t.Fatalf("round trip %s: %+v %v", dst, out, err)
		}
	}
	r := wire.Reply{Type: wire.TypeReject, Reason: wire.ReasonDisplaces, Flow: 1, Seq: 2, Depth: 3, Slack: -5, Time: 6}
	got, err := wire.ParseReply(wire.AppendReply(nil, &r))
	if err != nil || got.Type != r.Type || got.Reason != r.Reason || got.Slack != -5 || got.Depth != 3 || got.Time != 6 {
		t.Fatalf("reply round trip: %+v %v", got, err)
	}
	for _, bad := range [][]byte{nil, make([]byte, 39), append([]byte{2}, make([]byte, 39)...)} {
		if _, err := wire.ParseRequest(bad); !errors.Is(err, wire.ErrMalformed) {
			t.Errorf("ParseRequest(%d bytes) = %v", len(bad), err)
		}
	}
	b := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeSend})
	b[3] = 5
	if _, err := wire.ParseRequest(b); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("family 5 accepted: %v", err)
	}
}

// bed is one test setup: namespaces A and B, a receiver in B, the lane in A.
type bed struct {
	p    *testutil.Pair
	rx   *Receiver
	lane *Lane
	cfg  config.Realtime
	dp   *datapath.Datapath

	mu     sync.Mutex
	events map[[2]uint32][]Event // (flow, seq) -> events
}

// newBed builds the bed; shapedBps > 0 installs the lanes datapath shaped
// at that uplink rate on A's veth and runs the lane at the tree's rate.
func newBed(t *testing.T, shapedBps uint64, mut func(*config.Realtime)) *bed {
	t.Helper()
	testutil.RequireRoot(t)
	b := &bed{p: testutil.NewVethPair(t), events: map[[2]uint32][]Event{}}
	if shapedBps > 0 {
		b.p.A.Do(t, func() (err error) {
			b.dp, err = datapath.Open(datapath.Config{Interface: b.p.LinkA, Mode: datapath.Shaped,
				UplinkBps: shapedBps, Instance: testutil.UniqueName("rt")})
			return err
		})
		t.Cleanup(func() { b.dp.Close() })
	}
	b.p.B.Do(t, func() (err error) {
		b.rx, err = ListenReceiver(netip.AddrPortFrom(netip.AddrFrom4([4]byte(b.p.AddrB)), 0))
		return err
	})
	t.Cleanup(func() { b.rx.Close() })
	dir := socketDir(t)
	b.cfg = config.DefaultRealtime()
	b.cfg.Enabled = true
	b.cfg.Socket = filepath.Join(dir, "rt.sock")
	b.cfg.Rate = config.Rate(shapedBps * 95 / 100) // the tree's root rate
	if shapedBps == 0 {
		b.cfg.Rate = config.Rate(1_000_000_000)
	}
	if mut != nil {
		mut(&b.cfg)
	}
	b.p.A.Do(t, func() (err error) {
		b.lane, err = New(b.cfg, testOpts(WithTrace(func(e Event) {
			b.mu.Lock()
			k := [2]uint32{e.Flow, e.Seq}
			b.events[k] = append(b.events[k], e)
			b.mu.Unlock()
		}))...)
		return err
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.lane.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		b.lane.Close()
	})
	return b
}

func setGSOSegs(dev string, n int) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	return netlink.LinkSetGSOMaxSegs(l, n)
}

// socketDir is a directory every user can search (t.TempDir is 0700).
func socketDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "lanes-rt")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// bulk runs a TCP transfer A -> B that saturates the link until the test
// ends.
func (b *bed) bulk(t *testing.T) {
	var ln net.Listener
	b.p.B.Do(t, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(b.p.AddrB.String(), "0"))
		return err
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	var c net.Conn
	b.p.A.Do(t, func() (err error) {
		c, err = net.Dial("tcp4", ln.Addr().String())
		return err
	})
	stop := make(chan struct{})
	go func() {
		buf := make([]byte, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); c.Close(); ln.Close() })
}

// payload carries flow, seq, deadline and send time to the receiver.
func payload(size int, flow, seq uint32, deadline, sent int64) []byte {
	p := make([]byte, max(size, 24))
	binary.BigEndian.PutUint32(p[0:], flow)
	binary.BigEndian.PutUint32(p[4:], seq)
	binary.BigEndian.PutUint64(p[8:], uint64(deadline))
	binary.BigEndian.PutUint64(p[16:], uint64(sent))
	return p
}

type arrival struct {
	flow, seq          uint32
	deadline, kern, at int64
}

// collect reads until quiet for 300 ms.
func (b *bed) collect(t *testing.T) []arrival {
	b.rx.SetTimeout(300 * time.Millisecond)
	var out []arrival
	for {
		a, err := b.rx.Read()
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue // SO_RCVTIMEO reads are not restarted after a signal
			}
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) {
				return out
			}
			t.Fatalf("receive: %v", err)
		}
		if len(a.Payload) < 24 {
			continue
		}
		out = append(out, arrival{flow: binary.BigEndian.Uint32(a.Payload), seq: binary.BigEndian.Uint32(a.Payload[4:]),
			deadline: int64(binary.BigEndian.Uint64(a.Payload[8:])), kern: a.Kernel, at: a.User})
	}
}

// collectN reads until want datagrams arrived or timeout passed: for tests
// whose count, not timing, is the point (a silence of collect's 300 ms can
// happen on a loaded machine before the first release).
func (b *bed) collectN(t *testing.T, want int, timeout time.Duration) []arrival {
	var out []arrival
	for end := time.Now().Add(timeout); len(out) < want && time.Now().Before(end); {
		out = append(out, b.collect(t)...)
	}
	return out
}

// TestDeadlinesUnderBulk is the paper's experiment at a tenth of the rate:
// 100 Mbit/s shaped link saturated by bulk TCP, flow 1 (10 ms deadline, 3
// datagrams of 1,400 B every 3 ms) and flow 2 (1 ms, 1 every 3 ms).
func TestDeadlinesUnderBulk(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 100_000_000, nil)
	// One segment per skb: the non-preemptible unit is then one frame, as
	// the reserve assumes (see docs/realtime.md, GSO).
	b.p.A.Do(t, func() error { return setGSOSegs(b.p.LinkA, 1) })
	b.bulk(t)
	time.Sleep(300 * time.Millisecond) // let TCP fill the interactive queue
	c, err := rt.Dial(b.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	results := sendDeadlineFlows(t, c, b.rx.Addr)
	arr := b.collect(t)
	notices := c.Notices(true)
	st := b.lane.Stats()
	// A release can come after collect's 300 ms of silence on a loaded
	// machine (578 of 579 at load 28): wait for what was sent (a datagram
	// lost on the way still fails below).
	if missing := int(st.Totals.Sent) - len(arr); missing > 0 {
		arr = append(arr, b.collectN(t, missing, 5*time.Second)...)
	}
	t.Logf("totals %+v, %d arrivals, %d drop notices", st.Totals, len(arr), len(notices))

	checkDeadlineAccounting(t, results, notices, st)
	checkDeadlineArrivals(t, arr, results, st)
	if b.dp != nil {
		checkHTBCarried(t, b, st)
	}
}

// sendDeadlineFlows sends two flows for 1.5 s, every 3 ms: flow 1 a burst
// of 3 with a 10 ms deadline, flow 2 one with 1 ms; it returns each
// datagram's admission by flow and sequence number.
func sendDeadlineFlows(t *testing.T, c *rt.Client, dst netip.AddrPort) map[[2]uint32]rt.Result {
	type flowSpec struct {
		id       uint32
		deadline time.Duration
		burst    int
	}
	flows := []flowSpec{{1, 10 * time.Millisecond, 3}, {2, time.Millisecond, 1}}
	results := map[[2]uint32]rt.Result{}
	var seq [3]uint32
	end := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(end) {
		for _, f := range flows {
			for i := 0; i < f.burst; i++ {
				seq[f.id]++
				now := monoclock.Now()
				d := now + int64(f.deadline)
				res, err := c.Send(f.id, dst, d, payload(1400, f.id, seq[f.id], d, now))
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				results[[2]uint32{f.id, seq[f.id]}] = res
			}
		}
		time.Sleep(3 * time.Millisecond)
	}
	return results
}

// checkDeadlineAccounting: the client's admissions, the daemon's counters
// and the drop notices agree, and most datagrams were admitted.
func checkDeadlineAccounting(t *testing.T, results map[[2]uint32]rt.Result, notices []rt.Notice, st Snapshot) {
	admitted := 0
	for _, r := range results {
		if r.Admitted {
			admitted++
		}
	}
	if uint64(admitted) != st.Totals.Admitted || uint64(len(results)) != st.Totals.Admitted+st.Totals.Rejected {
		t.Errorf("client saw %d admitted of %d, daemon counted %+v", admitted, len(results), st.Totals)
	}
	if st.Totals.Sent+st.Totals.DroppedLate+st.Totals.SendErrors != st.Totals.Admitted {
		t.Errorf("admitted %d != sent %d + dropped %d + errors %d", st.Totals.Admitted, st.Totals.Sent, st.Totals.DroppedLate, st.Totals.SendErrors)
	}
	if uint64(len(notices)) != st.Totals.DroppedLate+st.Totals.SendErrors {
		t.Errorf("%d drop notices, daemon dropped %d", len(notices), st.Totals.DroppedLate+st.Totals.SendErrors)
	}
	if admitted < len(results)*9/10 {
		t.Errorf("only %d of %d admitted on a link that has room for all", admitted, len(results))
	}
}

// checkDeadlineArrivals: every sent datagram arrives, none that was
// refused or dropped does, and few after their deadline.
func checkDeadlineArrivals(t *testing.T, arr []arrival, results map[[2]uint32]rt.Result, st Snapshot) {
	if uint64(len(arr)) != st.Totals.Sent {
		t.Errorf("%d arrivals, %d sent", len(arr), st.Totals.Sent)
	}
	late := 0
	var worst int64
	for _, a := range arr {
		r, ok := results[[2]uint32{a.flow, a.seq}]
		if !ok || !r.Admitted {
			t.Errorf("flow %d seq %d arrived but was not admitted", a.flow, a.seq)
		}
		if over := a.kern - a.deadline; over > 0 {
			late++
			worst = max(worst, over)
		}
	}
	t.Logf("%d of %d arrived after their deadline (worst by %v)", late, len(arr), time.Duration(worst))
	// Generous: the CI machine is shared; the daemon's own guarantee is
	// checked exactly above (admitted = sent + reported).
	if late > len(arr)/50 {
		testutil.TimingErrorf(t, "%d of %d arrivals late", late, len(arr))
	}
}

// checkHTBCarried: the realtime HTB class carried every sent datagram, the
// interactive class the bulk flow.
func checkHTBCarried(t *testing.T, b *bed, st Snapshot) {
	ds, err := b.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	rt, bulk := ds.Lanes[lane.Realtime], ds.Lanes[lane.Interactive]
	if rt.Packets < st.Totals.Sent || bulk.Packets == 0 {
		t.Errorf("HTB: realtime class %d packets (sent %d), interactive %d", rt.Packets, st.Totals.Sent, bulk.Packets)
	}
}

// TestAdmissionRefusesOverload sends a burst with one tight deadline: the
// ones that fit are admitted and arrive, the rest are refused at once.
func TestAdmissionRefusesOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 1_000_000, nil) // 950 kbit/s: 1442 B take 12.1 ms
	c, err := rt.Dial(b.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Stats(); err != nil { // warm the connection up
		t.Fatal(err)
	}
	d := monoclock.Now() + int64(80*time.Millisecond)
	var adm, own, displ int
	for i := 1; i <= 20; i++ {
		res, err := c.Send(1, b.rx.Addr, d, payload(1400, 1, uint32(i), d, 0))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case res.Admitted:
			adm++
		case res.Reason == wire.ReasonOwnDeadline:
			own++
		case res.Reason == wire.ReasonDisplaces:
			displ++
		default:
			t.Errorf("unexpected reason %s", res.Reason.String())
		}
	}
	// 80 ms minus the reserve frame (12.7 ms) fits at most 5 frames of 12.1 ms.
	if adm < 1 || adm > 5 || own+displ != 20-adm {
		t.Errorf("admitted %d, own-deadline %d, displaces %d", adm, own, displ)
	}
	time.Sleep(100 * time.Millisecond)
	arr := b.collect(t)
	if len(arr)+len(c.Notices(true)) != adm {
		t.Errorf("%d arrivals for %d admitted", len(arr), adm)
	}
	// Relative deadline in µs: 1 ms cannot fit one frame, 500 ms can.
	res, err := c.SendRelative(2, b.rx.Addr, 1000, payload(1400, 2, 1, 0, 0))
	if err != nil || res.Admitted || res.Reason != wire.ReasonOwnDeadline {
		t.Errorf("1 ms relative deadline: %+v %v", res, err)
	}
	res, err = c.SendRelative(2, b.rx.Addr, 500_000, payload(100, 2, 2, 0, 0))
	if err != nil || !res.Admitted {
		t.Errorf("500 ms relative deadline: %+v %v", res, err)
	}
}

// TestDisplacementRefused: a loose packet queued first, a tight one that
// fits only if sent first is admitted (EDF reorders); then a packet whose
// insertion would make the tight one late is refused as displacing.
func TestDisplacementRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	// 100 kbit/s: a 1,400 B datagram takes 115 ms, long enough to reason on
	// a loaded machine.
	b := newBed(t, 0, func(c *config.Realtime) { c.Rate = 100_000; c.Reserve = 0; c.Backlog = 1514 })
	c, err := rt.Dial(b.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := monoclock.Now()
	ms := int64(time.Millisecond)
	// First: released at once, on the wire until now+115 ms; with a
	// one-frame backlog bound nothing else is released before that.
	r1, _ := c.Send(1, b.rx.Addr, now+1000*ms, payload(1400, 1, 1, 0, 0))
	time.Sleep(20 * time.Millisecond)
	// Loose (2 s) queued; tight (300 ms) goes before it: done at ~231 ms.
	r2, _ := c.Send(1, b.rx.Addr, now+2000*ms, payload(1400, 1, 2, 0, 0))
	r3, _ := c.Send(1, b.rx.Addr, now+300*ms, payload(1400, 1, 3, 0, 0))
	// 260 ms: goes before the tight one and would push it to ~346 ms:
	// T_ins = 115 ms > M = ~70 ms.
	r4, _ := c.Send(1, b.rx.Addr, now+260*ms, payload(1400, 1, 4, 0, 0))
	if !r1.Admitted || !r2.Admitted || !r3.Admitted {
		t.Fatalf("admissions %v %v %v", r1, r2, r3)
	}
	if r4.Admitted || r4.Reason != wire.ReasonDisplaces {
		t.Fatalf("displacing packet: %+v (%s)", r4, r4.Reason.String())
	}
	time.Sleep(250 * time.Millisecond)
	arr := b.collect(t)
	var order []uint32
	for _, a := range arr {
		order = append(order, a.seq)
	}
	if len(order) != 3 || order[0] != 1 || order[1] != 3 || order[2] != 2 {
		t.Errorf("arrival order %v, want [1 3 2] (EDF)", order)
	}
}

// TestNoQdiscPath: without the lanes tree the lane sends with priority 6.
func TestNoQdiscPath(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	if b.lane.route.lookupClass(b.rx.Addr.Addr()) {
		t.Error("lookupClass says lanes tree without one")
	}
	c, err := rt.Dial(b.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 1; i <= 50; i++ {
		// A loose deadline: this test is about the path, and a machine
		// loaded with other work can delay the release thread by tens of
		// milliseconds (a late head is dropped as missed, not sent).
		if res, err := c.SendWithin(3, b.rx.Addr, 2*time.Second, payload(200, 3, uint32(i), 0, 0)); err != nil || !res.Admitted {
			t.Fatalf("send %d: %+v %v", i, res, err)
		}
	}
	if arr := b.collectN(t, 50, 10*time.Second); len(arr) != 50 {
		t.Errorf("%d arrivals, want 50", len(arr))
	}
	raw, err := c.Stats()
	if err != nil || !strings.Contains(string(raw), `"sent":50`) {
		t.Errorf("stats %s %v", raw, err)
	}
}

// TestNotGranted runs a client as nobody: refused with not-granted.
func TestNotGranted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	if os.Getenv("LANES_RT_HELPER") != "" {
		t.Skip("helper")
	}
	b := newBed(t, 0, func(c *config.Realtime) { c.Grants = config.RealtimeGrants{UIDs: []config.UID{4242}} })
	// The test binary must be executable by nobody: copy it.
	dir := socketDir(t)
	exe := filepath.Join(dir, "helper.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperClient$")
	cmd.Env = append(os.Environ(), "LANES_RT_HELPER="+b.cfg.Socket, "LANES_RT_DST="+b.rx.Addr.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reason=not-granted") {
		t.Fatalf("helper as nobody: %v\n%s", err, out)
	}
	st := b.lane.Stats()
	if st.Totals.Rejected != 1 || st.Totals.Admitted != 0 || len(st.Flows) != 1 || st.Flows[0].UID != 65534 {
		t.Errorf("stats %+v", st)
	}
}

// TestHelperClient is the unprivileged client of TestNotGranted.
func TestHelperClient(t *testing.T) {
	sock := os.Getenv("LANES_RT_HELPER")
	if sock == "" {
		t.Skip("only run by TestNotGranted")
	}
	c, err := rt.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendWithin(9, netip.MustParseAddrPort(os.Getenv("LANES_RT_DST")), time.Second, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("reason=" + res.Reason.String() + "\n")
}

// TestCloseRemovesSocket: the socket file goes with the lane.
func TestCloseRemovesSocket(t *testing.T) {
	testutil.RequireRoot(t)
	cfg := config.DefaultRealtime()
	cfg.Socket = filepath.Join(socketDir(t), "rt.sock")
	cfg.Rate = 1_000_000_000
	l, err := New(cfg, testOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.Socket); err != nil {
		t.Fatalf("socket not created: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Stat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

// TestWakeLatencyHeldWhileGranted: with pm_latency_us set, the lane holds
// the CPU wake-up latency request while a granted client is connected and
// ends it when the last one leaves; a client of a lane without it changes
// nothing. (Other processes may hold a lower value at the same time: the
// kernel applies the lowest, so the check is "at or below".)
func TestWakeLatencyHeldWhileGranted(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	if _, err := os.Stat(pmqos.Path); err != nil {
		t.Skipf("no PM QoS here: %v", err)
	}
	const us = 7
	b := newBed(t, 0, func(c *config.Realtime) { c.PMLatencyUS = us })
	if st := b.lane.Stats(); st.PMLatencyUS != -1 {
		t.Fatalf("held %d µs with no client connected", st.PMLatencyUS)
	}
	c1, err := rt.Dial(b.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := rt.Dial(b.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	waitHeld(t, b.lane, us)
	if cur, err := pmqos.Current(); err != nil || cur > us {
		t.Errorf("kernel applies %d µs (%v), want at most %d while held", cur, err, us)
	}
	c1.Close()
	time.Sleep(100 * time.Millisecond)
	if st := b.lane.Stats(); st.PMLatencyUS != us {
		t.Errorf("released with a granted client still connected: %+v", st.connStats)
	}
	c2.Close()
	waitHeld(t, b.lane, -1)
}

// waitHeld waits until the lane reports holding us (-1: nothing); the
// lane counts connections on its accept and reader threads.
func waitHeld(t *testing.T, l *Lane, us int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st := l.Stats()
		if st.PMLatencyUS == us {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("lane holds %d µs (error %q), want %d", st.PMLatencyUS, st.PMError, us)
		}
	}
}

// TestReaderFollowsClientPriority: a granted client in its own process
// that raises its thread to SCHED_FIFO 30 after connecting gets a reader
// at 31 within the follower's period, and at 41 after it moves to 40;
// with follow_client_priority off the reader stays at release_priority.
func TestReaderFollowsClientPriority(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	if os.Getenv("LANES_RT_PRIO_HELPER") != "" {
		t.Skip("helper")
	}
	for _, follow := range []bool{true, false} {
		b := newBed(t, 0, func(c *config.Realtime) { c.FollowClientPriority = follow })
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPriorityClient$")
		cmd.Env = append(os.Environ(), "LANES_RT_PRIO_HELPER="+b.cfg.Socket)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		next := func() string {
			if !lines.Scan() {
				t.Fatalf("helper ended: %v", lines.Err())
			}
			return lines.Text()
		}
		for _, prio := range []int{30, 40} {
			fmt.Fprintf(in, "%d\n", prio)
			if l := next(); l != "at "+strconv.Itoa(prio) {
				t.Fatalf("helper: %q", l)
			}
			got := waitThreadPriority(prio+1, 3*followEvery)
			t.Logf("follow %v: client at %d, this process's real-time threads at %v", follow, prio, got)
			if follow != slices.Contains(got, prio+1) {
				t.Errorf("follow %v: client at %d, this process's real-time threads at %v (a reader at %d: %v)", follow, prio, got, prio+1, !follow)
			}
			// lanes-rtd is one thread: following, it is above release_priority.
			if !slices.Contains(got, b.cfg.ReleasePriority) && !follow {
				t.Errorf("no thread at release_priority %d (lanes-rtd): %v", b.cfg.ReleasePriority, got)
			}
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
}

// waitThreadPriority waits up to d until one of this process's threads (or
// its lanes-rtd's) is at SCHED_FIFO want, and returns the real-time priorities it found.
func waitThreadPriority(want int, d time.Duration) []int {
	end := time.Now().Add(d)
	for {
		var got []int
		tasks := []string{"/proc/self/task"}
		for _, pid := range helperPids() {
			tasks = append(tasks, "/proc/"+strconv.Itoa(pid)+"/task")
		}
		for _, dir := range tasks {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				tid, _ := strconv.Atoi(e.Name())
				if a, err := unix.SchedGetAttr(tid, 0); err == nil && a.Policy == unix.SCHED_FIFO {
					got = append(got, int(a.Priority))
				}
			}
		}
		if slices.Contains(got, want) || time.Now().After(end) {
			slices.Sort(got)
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHelperPriorityClient is the client of TestReaderFollowsClientPriority:
// it connects (granted: root), then for each priority read from stdin
// moves its locked thread there and says "at P".
func TestHelperPriorityClient(t *testing.T) {
	sock := os.Getenv("LANES_RT_PRIO_HELPER")
	if sock == "" {
		t.Skip("only run by TestReaderFollowsClientPriority")
	}
	runtime.LockOSThread()
	c, err := rt.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		prio, err := strconv.Atoi(in.Text())
		if err != nil {
			t.Fatal(err)
		}
		if err := setThreadFIFO(0, prio); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("at %d\n", prio)
	}
}

// TestAttackHelperSchedRestored (N17): a move of lanes-rtd to background
// left it at SCHED_OTHER nice 19 for good. Fix: the priority follower puts
// it back at its priority within a period.
func TestAttackHelperSchedRestored(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	pids := helperPids()
	if len(pids) != 1 || b.cfg.ReleasePriority <= 0 {
		t.Skipf("no lanes-rtd at a realtime priority (%v, release_priority %d)", pids, b.cfg.ReleasePriority)
	}
	prio := b.cfg.ReleasePriority
	if got := waitThreadPriority(prio, 3*followEvery); !slices.Contains(got, prio) {
		t.Fatalf("lanes-rtd not at %d at start: %v", prio, got)
	}
	time.Sleep(2 * followEvery) // the follower has set it once
	// what `lanes move --lane background` does to a thread (schedmove.go)
	bg := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: 19}
	if err := unix.SchedSetAttr(pids[0], &bg, 0); err != nil {
		t.Fatal(err)
	}
	if got := waitThreadPriority(prio, 5*followEvery); !slices.Contains(got, prio) {
		t.Errorf("lanes-rtd moved to SCHED_OTHER nice 19 stays there: realtime threads at %v, want %d", got, prio)
	}
}
