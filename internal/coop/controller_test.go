// Tests of the controller with in-memory fakes for the flow source, the
// datapath and the broadcast medium: agreement on N, caps, rules, bad
// announcements and the safety fallback.
package coop

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

type fakeFlows struct {
	mu    sync.Mutex
	flows []Flow
	// downloads: the rate each flow's sender would send at (bits/s),
	// limited to its downlink cap per min RTT (window-limited)
	recv map[uint64]float64
	rwnd func(ck uint64) uint32
}

func (f *fakeFlows) UplinkFlows(context.Context) ([]Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := append([]Flow(nil), f.flows...)
	for i := range f.flows { // window-limited: cwnd per min RTT, 0.5 s a call
		fl := &f.flows[i]
		if fl.NotSent+fl.InFlight > 0 {
			fl.BytesAcked += uint64(float64(fl.Cwnd) * float64(fl.MSS) * 0.5 / fl.MinRTT.Seconds())
		}
		if r := f.recv[fl.Cookie]; r > 0 {
			if c := f.rwnd(fl.Cookie); c > 0 {
				r = min(r, float64(c)*8/fl.MinRTT.Seconds())
			}
			fl.BytesRecv += uint64(r * 0.5 / 8)
		}
	}
	return out, nil
}

func (f *fakeFlows) set(fl ...Flow) {
	f.mu.Lock()
	f.flows = fl
	f.mu.Unlock()
}

// fakeRefuse, when set, is what new fake datapaths answer to turning the
// downlink callback on (a kernel whose sock_ops cannot set TCP_WINDOW_CLAMP).
var fakeRefuse error

type fakeCaps struct {
	refuse error
	mu     sync.Mutex
	sock   map[uint64]uint32
	lanes  map[lane.Lane]uint32
	rwnd   map[uint64]uint32
	downOn bool
	calls  int
	ack    uint64        // ACK class rate, bits/s (0: off)
	ackOf  func() uint64 // bytes AckClassSent and AckClassBytes answer (nil: 0)
}

func (f *fakeCaps) AckClassBytes() (uint64, error) { return f.AckClassSent() }

func (f *fakeCaps) SetAckClassEvery(bits uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ack = bits
	return nil
}

func (f *fakeCaps) AckClassSent() (uint64, error) {
	f.mu.Lock()
	of := f.ackOf
	f.mu.Unlock()
	if of == nil {
		return 0, nil
	}
	return of(), nil
}

func (f *fakeCaps) getAck() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ack
}

func newFakeCaps() *fakeCaps {
	return &fakeCaps{refuse: fakeRefuse, sock: map[uint64]uint32{}, lanes: map[lane.Lane]uint32{}, rwnd: map[uint64]uint32{}}
}

func (f *fakeCaps) SetDownlinkCaps(on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on && f.refuse != nil {
		return f.refuse
	}
	f.downOn = on
	return nil
}

func (f *fakeCaps) SetSocketRwndCap(ck uint64, bytes uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if bytes == 0 {
		delete(f.rwnd, ck)
	} else {
		f.rwnd[ck] = bytes
	}
	return nil
}

func (f *fakeCaps) getRwnd(ck uint64) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rwnd[ck]
}

func (f *fakeCaps) SetSocketCwndCap(ck uint64, segs uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if segs == 0 {
		delete(f.sock, ck)
	} else {
		f.sock[ck] = segs
	}
	return nil
}

func (f *fakeCaps) SetLaneCwndCap(l lane.Lane, segs uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lanes[l] = segs
	return nil
}

func (f *fakeCaps) get(ck uint64) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sock[ck]
}

// fakeTransport records what is sent; the test delivers it.
type fakeTransport struct {
	mu   sync.Mutex
	sent [][]byte
	rx   chan []byte
}

func newFakeTransport() *fakeTransport { return &fakeTransport{rx: make(chan []byte, 64)} }

func (f *fakeTransport) Send(b []byte) error {
	f.mu.Lock()
	f.sent = append(f.sent, bytes.Clone(b))
	f.mu.Unlock()
	return nil
}

func (f *fakeTransport) Recv(b []byte) (int, netip.Addr, error) {
	m, ok := <-f.rx
	if !ok {
		return 0, netip.Addr{}, errClosed
	}
	return copy(b, m), netip.MustParseAddr("10.9.0.1"), nil
}

func (f *fakeTransport) Close() error { close(f.rx); return nil }

func (f *fakeTransport) take() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sent
	f.sent = nil
	return s
}

var errClosed = &closedErr{}

type closedErr struct{}

func (*closedErr) Error() string { return "closed" }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type node struct {
	c     *Controller
	flows *fakeFlows
	caps  *fakeCaps
	tr    *fakeTransport
}

// group is N controllers on one fake broadcast medium with a shared clock.
type group struct {
	t     *testing.T
	clk   *clock
	nodes []*node
}

func paperConfig() config.Coop {
	c := config.DefaultCoop()
	c.Enabled = true
	c.APRate = config.Rate(20e6)
	c.Headroom = 960_000
	c.QueueAllowance = 0 // the paper's formula
	c.Key = "00112233445566778899aabbccddeeff"
	return c
}

func newGroup(t *testing.T, n int, cfg config.Coop) *group {
	g := &group{t: t, clk: &clock{t: time.Unix(1_700_000_000, 0)}}
	for i := 0; i < n; i++ {
		g.add(cfg)
	}
	return g
}

func (g *group) add(cfg config.Coop) *node {
	nd := &node{flows: &fakeFlows{recv: map[uint64]float64{}}, caps: newFakeCaps(), tr: newFakeTransport()}
	nd.flows.rwnd = nd.caps.getRwnd
	c, err := New(Options{Config: cfg, Flows: nd.flows, Up: nd.caps, Down: nd.caps, Ack: nd.caps, Transport: nd.tr,
		HostID: uint64(len(g.nodes) + 1), Now: g.clk.now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		g.t.Fatal(err)
	}
	nd.c = c
	g.nodes = append(g.nodes, nd)
	return nd
}

// round advances the clock one interval; every node ticks and every
// announcement reaches every other node (and its sender, which ignores it).
func (g *group) round() {
	g.clk.add(500 * time.Millisecond)
	for _, n := range g.nodes {
		n.c.tick(context.Background())
		n.c.stepAck()
	}
	for _, from := range g.nodes {
		for _, b := range from.tr.take() {
			for _, to := range g.nodes {
				to.c.Handle(b, netip.MustParseAddr("10.9.0.1"))
			}
		}
	}
	for _, n := range g.nodes { // what Run does on a change event
		n.c.recomputeAndApply()
	}
}

// bulkGroup is a group of n controllers, each with one bulk upload, after
// two rounds of announcements.
func bulkGroup(t *testing.T, n int) *group {
	g := newGroup(t, n, paperConfig())
	for i, nd := range g.nodes {
		nd.flows.set(bulkFlow(uint64(100 + i)))
	}
	g.round()
	g.round()
	return g
}

func bulkFlow(ck uint64) Flow {
	return Flow{Cookie: ck, Lane: lane.Interactive, MSS: 1500, Cwnd: 60, SRTT: 260 * time.Millisecond,
		MinRTT: 256 * time.Millisecond, NotSent: 4 << 20, InFlight: 60 * 1500}
}

func TestControllersAgreeOnNAndCap(t *testing.T) {
	g := bulkGroup(t, 8)
	want := map[int]uint32{5: 69, 6: 57, 7: 49, 8: 43}
	check := func(n int) {
		t.Helper()
		for i, nd := range g.nodes {
			st := nd.c.Status()
			if !st.SelfActive {
				continue
			}
			if st.N != n || !st.Capping {
				t.Fatalf("node %d: N=%d capping=%v (%s), want N=%d", i, st.N, st.Capping, st.Reason, n)
			}
			if got := nd.caps.get(uint64(100 + i)); got != want[n] {
				t.Errorf("N=%d node %d: cap %d, paper %d", n, i, got, want[n])
			}
		}
	}
	check(8)
	// hosts stop sending one by one (8 -> 5): N follows at the next announcement
	for k := 7; k >= 5; k-- {
		g.nodes[k].flows.set()
		g.round()
		check(k)
	}
	// a host crashes silently: removed after 3 silent intervals
	crashed := g.nodes[4]
	g.nodes = g.nodes[:4]
	g.round()
	g.round()
	if n := g.nodes[0].c.Status().N; n != 5 {
		t.Errorf("after 2 silent intervals N=%d, want still 5", n)
	}
	g.clk.add(600 * time.Millisecond)
	for _, nd := range g.nodes {
		nd.c.mu.Lock()
		nd.c.peers.table.Expire(g.clk.now())
		nd.c.mu.Unlock()
	}
	g.round()
	if n := g.nodes[0].c.Status().N; n != 4 {
		t.Errorf("after silence N=%d, want 4", n)
	}
	_ = crashed
	// a joining host is counted as soon as its first announcement arrives
	j := g.add(paperConfig())
	j.flows.set(bulkFlow(104)) // takes the crashed host's slot in nodes
	g.round()
	g.round()
	check(5)
}

func TestGoodbyeAndShutdownClearCaps(t *testing.T) {
	g := newGroup(t, 3, paperConfig())
	for i, n := range g.nodes {
		n.flows.set(bulkFlow(uint64(100 + i)))
	}
	g.round()
	g.round()
	if g.nodes[0].caps.get(100) == 0 {
		t.Fatal("no cap applied")
	}
	leaving := g.nodes[2]
	if err := leaving.c.shutdown(); err != nil {
		t.Fatal(err)
	}
	if len(leaving.caps.sock) != 0 {
		t.Errorf("caps left behind after shutdown: %v", leaving.caps.sock)
	}
	for _, b := range leaving.tr.take() {
		g.nodes[0].c.Handle(b, netip.Addr{})
	}
	g.nodes[0].c.recomputeAndApply()
	if st := g.nodes[0].c.Status(); st.N != 2 || len(st.Peers) != 1 {
		t.Errorf("after goodbye N=%d peers=%d", st.N, len(st.Peers))
	}
}

// Forged, unauthenticated, replayed, oversized and malformed announcements are
// dropped and counted and never change N or the caps.
func TestBadAnnouncementsChangeNothing(t *testing.T) {
	g := newGroup(t, 2, paperConfig())
	g.nodes[0].flows.set(bulkFlow(100))
	g.nodes[1].flows.set(bulkFlow(101))
	g.round()
	var last []byte
	g.nodes[1].c.tick(context.Background())
	for _, b := range g.nodes[1].tr.take() {
		g.nodes[0].c.Handle(b, netip.MustParseAddr("10.9.9.8"))
		last = b
	}
	g.nodes[0].c.recomputeAndApply()
	v := g.nodes[0]
	before := v.c.Status()
	capBefore := v.caps.get(100)
	if before.N != 2 || capBefore == 0 {
		t.Fatalf("setup: N=%d cap=%d", before.N, capBefore)
	}
	now := g.clk.now()
	attacker := &Announcement{HostID: 77, Seq: uint64(now.UnixNano()), Time: now, Interval: 500 * time.Millisecond,
		ActiveFlows: 1, BytesWaiting: 1 << 30, Flows: []FlowSummary{{Lane: lane.Interactive, MSS: 1500, MinRTT: 256 * time.Millisecond, SRTT: time.Second, Queued: 1 << 30}}}
	forged := Encode(attacker, []byte("wrong-key-wrong-key-wrong-key!!!"))
	unauth := Encode(attacker, nil)
	tampered := bytes.Clone(last)
	tampered[31] ^= 0xff // active flows
	future := *attacker
	future.Time = now.Add(time.Hour)
	stale := Encode(&future, v.c.key)
	oversized := append(bytes.Clone(last), make([]byte, MaxSize)...)
	v3 := bytes.Clone(last)
	v3[2] = 3
	inputs := [][]byte{forged, unauth, tampered, last, last, stale, oversized, v3, nil, []byte("LC"), last[:60]}
	for i := 0; i < 3; i++ {
		for _, b := range inputs {
			if err := v.c.Handle(b, netip.MustParseAddr("10.9.9.9")); err == nil {
				t.Fatalf("accepted bad input %x", b)
			}
		}
		v.c.recomputeAndApply()
	}
	st := v.c.Status()
	c := st.Counters
	if c.Forged != 6 || c.Unauthenticated != 3 || c.Replayed != 6 || c.Stale != 3 || c.Oversized != 3 || c.BadVersion != 3 || c.Malformed != 9 {
		t.Errorf("counters %+v", c)
	}
	if c.Dropped() != uint64(3*len(inputs)) {
		t.Errorf("dropped %d, want %d", c.Dropped(), 3*len(inputs))
	}
	if st.N != before.N || len(st.Peers) != 1 || v.caps.get(100) != capBefore {
		t.Errorf("bad input changed state: N %d->%d cap %d->%d", before.N, st.N, capBefore, v.caps.get(100))
	}
}

func TestNoKeyWarnsAndAccepts(t *testing.T) {
	cfg := paperConfig()
	cfg.Key = ""
	g := newGroup(t, 2, cfg)
	st := g.nodes[0].c.Status()
	if st.Authenticated || !strings.Contains(st.Warning, "UNAUTHENTICATED") {
		t.Errorf("no warning: %+v", st)
	}
	g.nodes[1].flows.set(bulkFlow(5))
	g.round()
	if n := len(g.nodes[0].c.Status().Peers); n != 1 {
		t.Errorf("peers %d", n)
	}
}

// §002: cap background uploads at 30 while some host streams in the realtime
// lane; the cap lifts when the stream ends. And capping the stream itself.
func TestRules(t *testing.T) {
	cfg := paperConfig()
	cfg.Cooperative = false // rules alone
	cfg.Rules = []config.CoopRule{
		{Name: "bulk-under-stream", Lane: "background", When: config.CoopWhenRealtimeActive, Segments: 30},
		{Name: "stream", App: "ustream", Segments: 20},
	}
	g := newGroup(t, 2, cfg)
	up := bulkFlow(1)
	up.Lane = lane.Background
	g.nodes[0].flows.set(up)
	g.round()
	if c := g.nodes[0].caps.get(1); c != 0 {
		t.Errorf("upload capped at %d with no stream", c)
	}
	stream := bulkFlow(2)
	stream.Lane, stream.App, stream.NotSent = lane.Realtime, "ustream", 20_000
	g.nodes[1].flows.set(stream)
	g.round()
	if c := g.nodes[0].caps.get(1); c != 30 {
		t.Errorf("upload cap %d while peer streams, want 30", c)
	}
	if c := g.nodes[1].caps.get(2); c != 20 {
		t.Errorf("stream cap %d, want 20", c)
	}
	if l := g.nodes[0].caps.lanes[lane.Background]; l != 30 {
		t.Errorf("background lane default cap %d, want 30", l)
	}
	g.nodes[1].flows.set()
	g.round()
	if c := g.nodes[0].caps.get(1); c != 0 {
		t.Errorf("upload still capped at %d after the stream ended", c)
	}
	if st := g.nodes[0].c.Status(); st.Capping || !strings.Contains(st.Reason, "off by policy") {
		t.Errorf("status: capping=%v reason=%q", st.Capping, st.Reason)
	}
}

// Open problem 4: when the group's RTT is inflated although our own windows
// fit the shared BDP, the queue is someone else's: stop capping, say why,
// and try again after the hold time.
func TestSafetyFallback(t *testing.T) {
	cfg := paperConfig()
	cfg.Safety.Trigger = 3
	cfg.Safety.Hold = config.Duration(5 * time.Second)
	g := newGroup(t, 2, cfg)
	for i, n := range g.nodes {
		f := bulkFlow(uint64(10 + i))
		f.Cwnd, f.SRTT = 40, 600*time.Millisecond // small window, long queue: not ours
		n.flows.set(f)
	}
	g.round()
	if st := g.nodes[0].c.Status(); !st.Capping || g.nodes[0].caps.get(10) == 0 {
		t.Fatalf("not capping at first: %+v", st)
	}
	for i := 0; i < 3; i++ {
		g.round()
	}
	st := g.nodes[0].c.Status()
	if st.Capping || !strings.Contains(st.Reason, "foreign traffic") {
		t.Fatalf("fallback not taken: capping=%v reason=%q", st.Capping, st.Reason)
	}
	if c := g.nodes[0].caps.get(10); c != 0 {
		t.Errorf("cap %d still applied in fallback", c)
	}
	// the foreign traffic goes away; after the hold, capping resumes
	for _, n := range g.nodes {
		n.flows.mu.Lock()
		n.flows.flows[0].SRTT = 258 * time.Millisecond
		n.flows.mu.Unlock()
	}
	for i := 0; i < 11; i++ {
		g.round()
	}
	if st := g.nodes[0].c.Status(); !st.Capping || g.nodes[0].caps.get(10) == 0 {
		t.Errorf("capping did not resume: %+v", st.Reason)
	}
	// our own full windows inflating the RTT are not blamed on others: this
	// host's window alone (700 segments: 32.8 Mbit/s over 256 ms) is beyond
	// the AP's BDP (a peer's far above its cap is not held by caps, so it
	// is not counted as ours: TestSafetyPeerInFallback)
	for _, n := range g.nodes {
		n.flows.mu.Lock()
		n.flows.flows[0].SRTT, n.flows.flows[0].Cwnd = 600*time.Millisecond, 700
		n.flows.mu.Unlock()
	}
	for i := 0; i < 5; i++ {
		g.round()
	}
	if st := g.nodes[0].c.Status(); !st.Capping {
		t.Errorf("own queue triggered the fallback: %q", st.Reason)
	}
}

// A peer whose daemon fell back (its window far beyond the cap this host
// computes for it) is plain TCP for the safety test, not one of ours: the
// others, capped with the RTT inflated, fall back too. Before, its window
// counted among the group's, overflowed the shared BDP, and kept them
// capped (the lab's coop-mixed with an estimated rate: three hosts capped
// at 11 segments for 30 s beside the first one's 54-149).
func TestSafetyPeerInFallback(t *testing.T) {
	cfg := paperConfig()
	cfg.Safety.Trigger = 3
	g := newGroup(t, 3, cfg)
	for i, n := range g.nodes {
		f := bulkFlow(uint64(10 + i))
		f.Cwnd, f.SRTT = 40, 600*time.Millisecond // at a third of the BDP: 115 segments each
		n.flows.set(f)
	}
	// node 2 fell back: its window grows far past its target of 115
	g.nodes[2].flows.mu.Lock()
	g.nodes[2].flows.flows[0].Cwnd = 400 // with the others' 80: 22.5 Mbit/s over 256 ms, beyond the AP's 20
	g.nodes[2].flows.mu.Unlock()
	for range 4 {
		g.round()
	}
	for _, i := range []int{0, 1} {
		if st := g.nodes[i].c.Status(); st.Capping || !strings.Contains(st.Reason, "foreign traffic") {
			t.Errorf("node %d: capping=%v reason=%q beside a peer 3.5x over its cap", i, st.Capping, st.Reason)
		}
	}
}

// TestConfiguredRateHasNoEstimate: status shows the estimator's state
// only for a direction whose rate is estimated.
func TestConfiguredRateHasNoEstimate(t *testing.T) {
	g := newGroup(t, 2, paperConfig())
	g.nodes[0].flows.set(bulkFlow(1))
	g.round()
	st := g.nodes[0].c.Status()
	if st.RateSource != "configured" || st.Estimate != nil {
		t.Errorf("configured uplink rate: source %s, estimate %+v", st.RateSource, st.Estimate)
	}
	if (st.Down.RateSource == "configured") != (st.Down.Estimate == nil) {
		t.Errorf("downlink: source %s, estimate %+v", st.Down.RateSource, st.Down.Estimate)
	}
}

func TestEstimatedRate(t *testing.T) {
	cfg := paperConfig()
	cfg.APRate = 0
	g := newGroup(t, 2, cfg)
	g.nodes[0].flows.set(bulkFlow(1))
	g.nodes[1].flows.set(bulkFlow(2))
	g.round()
	if st := g.nodes[0].c.Status(); st.RateSource != "unknown" || st.Capping || st.Estimate == nil || st.Estimate.Phase != "pre-start" {
		t.Errorf("first round: %s capping=%v estimate %+v", st.RateSource, st.Capping, st.Estimate)
	}
	// pre-start: no estimate while the group's goodput still grows (the
	// peer's announced goodput arrives a round after the own)
	for range 3 {
		g.round()
	}
	st := g.nodes[0].c.Status()
	// each fake flow acks 60 x 1500 B per 256 ms = 2.8 Mbit/s, two hosts
	// 5.6; in startup the estimate is twice the group's goodput plus the
	// headroom over the min RTT (960 kbit / 256 ms = 3.75 Mbit/s): 18.7
	if st.RateSource != "estimated" || st.RateBits < 18.6e6 || st.RateBits > 18.8e6 || !st.Capping {
		t.Errorf("estimate %s %d capping=%v %q", st.RateSource, st.RateBits, st.Capping, st.Reason)
	}
	if es := st.Estimate; es == nil || es.Phase != "startup" || es.Trim != 1 {
		t.Errorf("estimator state %+v, want startup untrimmed", es)
	}
	// the last interval's input: the two hosts' 5.6 Mbit/s, at 260/256 ms
	if es := st.Estimate; es == nil || es.GroupGoodputBits < 5.5e6 || es.GroupGoodputBits > 5.7e6 || math.Abs(es.Inflation-260.0/256) > 1e-6 {
		t.Errorf("estimator input %+v, want the group's 5.6 Mbit/s at 1.016x", es)
	}
	if es := st.Down.Estimate; es == nil || es.Phase != "pre-start" {
		t.Errorf("downlink estimator state %+v with no downloads, want pre-start", es)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := config.DefaultCoop().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	bad := map[string]func(*config.Coop){
		"port":                 func(c *config.Coop) { c.Port = 0 },
		"interval":             func(c *config.Coop) { c.Interval = config.Duration(time.Millisecond) },
		"silence_intervals":    func(c *config.Coop) { c.SilenceIntervals = 1 },
		"key":                  func(c *config.Coop) { c.Key = "zz" },
		"ap_rate":              func(c *config.Coop) { c.APRate = 10 },
		"min_segments":         func(c *config.Coop) { c.MinSegments = 0 },
		"safety.rtt_inflation": func(c *config.Coop) { c.Safety.RTTInflation = 1 },
		"rules[0].lane":        func(c *config.Coop) { c.Rules = []config.CoopRule{{Name: "x", Segments: 3}} },
		"rules[0].when": func(c *config.Coop) {
			c.Rules = []config.CoopRule{{Name: "x", Lane: "bg", When: "sometimes", Segments: 3}}
		},
		"rules[1].name": func(c *config.Coop) {
			c.Rules = []config.CoopRule{{Name: "x", Lane: "bg", Segments: 3}, {Name: "x", App: "a", Segments: 3}}
		},
		"rules[0].segments":       func(c *config.Coop) { c.Rules = []config.CoopRule{{Name: "x", Lane: "bg"}} },
		"safety.goodput_fraction": func(c *config.Coop) { c.Safety.GoodputFraction = 1.5 },
		"safety.drain_intervals":  func(c *config.Coop) { c.Safety.DrainIntervals = 101 },
	}
	for field, mut := range bad {
		c := config.DefaultCoop()
		mut(&c)
		err := c.Validate()
		fe, ok := err.(*config.FieldError)
		if !ok || fe.Field != field {
			t.Errorf("%s: got %v", field, err)
		}
	}
	for in, want := range map[string]config.Bits{"120kbit": 120_000, "15KB": 120_000, "960000": 960_000, "120KB": 960_000} {
		if got, err := config.ParseBits(in); err != nil || got != want {
			t.Errorf("config.ParseBits(%q) = %v, %v", in, got, err)
		}
	}
}

// A local flow that starts sending is noticed between announcements (the
// fast sample) and reported once; a pausing flow stays active one interval.
func TestFastJoinSample(t *testing.T) {
	g := newGroup(t, 1, paperConfig())
	n := g.nodes[0]
	g.round()
	ctx := context.Background()
	if n.c.sampleFlows(ctx) {
		t.Fatal("join reported with no flows")
	}
	n.flows.set(bulkFlow(7))
	g.clk.add(100 * time.Millisecond)
	if !n.c.sampleFlows(ctx) {
		t.Fatal("new sending flow not reported")
	}
	g.clk.add(100 * time.Millisecond)
	if n.c.sampleFlows(ctx) {
		t.Error("same flow reported twice")
	}
	// the flow drains: still active within one interval of its progress
	f := bulkFlow(7)
	f.NotSent, f.InFlight, f.BytesAcked = 0, 0, 1<<40
	n.flows.set(f)
	g.clk.add(100 * time.Millisecond)
	n.c.sampleFlows(ctx)
	n.c.mu.Lock()
	active := n.c.flows[7].active
	n.c.mu.Unlock()
	if !active {
		t.Error("flow inactive right after progress")
	}
	g.clk.add(600 * time.Millisecond)
	n.c.sampleFlows(ctx)
	n.c.mu.Lock()
	active = n.c.flows[7].active
	n.c.mu.Unlock()
	if active {
		t.Error("idle flow still active after an interval")
	}
}
