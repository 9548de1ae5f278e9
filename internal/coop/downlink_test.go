// Tests of the downlink caps' arithmetic and of the controllers agreeing on
// the downlink group, with the in-memory fakes of controller_test.go: a
// fake download receives at its sender's rate, limited to its window cap
// per min RTT.
package coop

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

func TestDownDemand(t *testing.T) {
	rtt := 100 * time.Millisecond
	for _, c := range []struct {
		name string
		f    DownFlow
		want uint64
	}{
		{"uncapped: bulk until it has a cap", DownFlow{MSS: 1448, MinRTT: rtt, RecvBits: 1e6, AppLimited: true}, math.MaxUint32},
		{"at its cap: window-limited", DownFlow{MSS: 1448, MinRTT: rtt, RecvBits: 8e6, CapBytes: 100_000, AppLimited: true}, math.MaxUint32},
		{"90 % of its cap: window-limited", DownFlow{MSS: 1448, MinRTT: rtt, RecvBits: 7.2e6, CapBytes: 100_000, AppLimited: true}, math.MaxUint32},
		// between the thresholds the class stays: a CUBIC sender after a
		// loss (70 %) stays bulk, an application-limited one at the 80 %
		// its demand gives it stays application-limited
		{"70 %, was window-limited: a sender after a loss", DownFlow{MSS: 1448, MinRTT: rtt, RecvBits: 5.6e6, CapBytes: 100_000}, math.MaxUint32},
		{"80 %, was application-limited", DownFlow{MSS: 1448, MinRTT: rtt, RecvBits: 6.4e6, CapBytes: 100_000, AppLimited: true}, 80_000},
		// 2 Mbit/s x 100 ms = 25,000 bytes used of a 100,000-byte cap
		{"25 %: application-limited, the window it used", DownFlow{MSS: 1448, MinRTT: rtt, RecvBits: 2e6, CapBytes: 100_000}, 25_000},
		{"idle", DownFlow{MSS: 1448, MinRTT: rtt, CapBytes: 100_000}, 0},
		{"25 % but growing (slow start): window-limited", DownFlow{MSS: 1448, MinRTT: rtt, RecvBits: 2e6, CapBytes: 100_000, AppLimited: true, Growing: true}, math.MaxUint32},
		// behind a queue (receive-side RTT 2x the min): 4 Mbit/s x 200 ms
		// fills the 100,000-byte cap; by min RTT alone it would look half used
		{"window-limited behind a queue", DownFlow{MSS: 1448, MinRTT: rtt, RcvRTT: 2 * rtt, RecvBits: 4e6, CapBytes: 100_000, AppLimited: true}, math.MaxUint32},
	} {
		got, app := DownDemand(c.f)
		if got != c.want || app != (c.want != math.MaxUint32) {
			t.Errorf("%s: demand %d (application-limited %v), want %d", c.name, got, app, c.want)
		}
	}
	if RwndBytes(0, 1448) != 0 || RwndBytes(10, 1448) != 14480 || RwndBytes(10, 0) != 5360 {
		t.Errorf("RwndBytes: %d %d %d", RwndBytes(0, 1448), RwndBytes(10, 1448), RwndBytes(10, 0))
	}
}

// downConfig is the paper's AP (20 Mbit/s, 960 kbit headroom) on the
// downlink as well.
func downConfig() config.Coop {
	c := paperConfig()
	c.APDownlinkRate = config.Rate(20e6)
	return c
}

func downloadFlow(ck uint64) Flow {
	return Flow{Cookie: ck, Lane: lane.Interactive, MSS: 1500, Cwnd: 10, SRTT: 260 * time.Millisecond,
		MinRTT: 256 * time.Millisecond}
}

// paperWindow is the downlink cap of one of n bulk hosts, bytes: the
// paper's formula with the downlink rate, in whole segments.
func paperWindow(n int) uint32 {
	return IdealCwnd(20e6, 256*time.Millisecond, 960_000, 1500, n) * 1500
}

func TestDownlinkCapsAgreeOnN(t *testing.T) {
	g := newGroup(t, 4, downConfig())
	// on before the first tick: a download that connects before it never
	// asks for the callback
	if !g.nodes[0].caps.downOn {
		t.Errorf("the datapath's downlink callback is off after New")
	}
	for i, n := range g.nodes {
		ck := uint64(100 + i)
		n.flows.set(downloadFlow(ck))
		n.flows.recv[ck] = 50e6 // a sender faster than the AP: window-limited
	}
	for range 4 {
		g.round()
	}
	check := func(n int, nodes []*node) {
		t.Helper()
		for i, nd := range nodes {
			st := nd.c.Status()
			if st.Down.N != n || !st.Down.Capping || st.Down.RateSource != "configured" {
				t.Fatalf("node %d: downlink %+v, want N=%d capping", i, st.Down, n)
			}
			if got, want := nd.caps.getRwnd(uint64(100+i)), paperWindow(n); got != want {
				t.Errorf("N=%d node %d: downlink cap %d bytes, want %d (paper's cwnd x MSS)", n, i, got, want)
			}
			if st.N != 0 || len(nd.caps.sock) != 0 {
				t.Errorf("node %d: downloads counted as uplink senders: N=%d caps %v", i, st.N, nd.caps.sock)
			}
			if !nd.caps.downOn {
				t.Errorf("node %d: the datapath's downlink callback was not turned on", i)
			}
		}
	}
	check(4, g.nodes)
	// a host stops downloading: the others' caps follow at the next round
	g.nodes[3].flows.set()
	g.round()
	g.round()
	check(3, g.nodes[:3])
	// shutdown removes every downlink cap and turns the callback off
	nd := g.nodes[0]
	nd.c.mu.Lock()
	errs := nd.c.down.shutdown()
	nd.c.mu.Unlock()
	if len(errs) != 0 && errs[0] != nil || len(nd.caps.rwnd) != 0 || nd.caps.downOn {
		t.Errorf("after shutdown: errs %v, caps %v, on %v", errs, nd.caps.rwnd, nd.caps.downOn)
	}
}

// A light download (app-limited) keeps what it uses plus the margins; the
// bulk downloads split the rest (max-min fair, as on the uplink).
func TestDownlinkDemandAware(t *testing.T) {
	g := newGroup(t, 3, downConfig())
	for i, n := range g.nodes {
		ck := uint64(100 + i)
		n.flows.set(downloadFlow(ck))
		n.flows.recv[ck] = 50e6
	}
	g.nodes[2].flows.recv[102] = 1e6 // a 1 Mbit/s stream
	for range 8 {
		g.round()
	}
	sw := SharedWindow(20e6, 256*time.Millisecond, 960_000)
	used := 1e6 * 0.256 / 8
	light := (used*demandMargin + demandSlack*1500) / sw
	wantBulk := uint32(math.Floor((1-light)/2*sw/1500)) * 1500
	wantLight := uint32(math.Floor(light*sw/1500)) * 1500
	for i, want := range []uint32{wantBulk, wantBulk, wantLight} {
		got := g.nodes[i].caps.getRwnd(uint64(100 + i))
		// the hysteresis keeps a cap within its band of the target
		if d := math.Abs(float64(got) - float64(want)); d > math.Max(0.05*float64(want), 1500) {
			t.Errorf("node %d: downlink cap %d bytes, want %d", i, got, want)
		}
	}
	if st := g.nodes[0].c.Status(); st.Down.N != 3 || st.Down.SelfShare < 0.45 {
		t.Errorf("bulk host: %+v", st.Down)
	}
}

// Uploads and downloads are separate groups: a host that only uploads is
// not in the downlink's N, and its announcements stay version 1.
func TestDownlinkSeparateFromUplink(t *testing.T) {
	g := newGroup(t, 2, downConfig())
	g.nodes[0].flows.set(bulkFlow(100))
	g.nodes[1].flows.set(downloadFlow(101))
	g.nodes[1].flows.recv[101] = 50e6
	g.round()
	g.nodes[0].c.tick(t.Context())
	for _, b := range g.nodes[0].tr.take() {
		if b[2] != 1 {
			t.Errorf("an uploading host sent version %d", b[2])
		}
	}
	g.round()
	g.round()
	up, down := g.nodes[0].c.Status(), g.nodes[1].c.Status()
	if up.N != 1 || up.Down.N != 1 || down.N != 1 || down.Down.N != 1 {
		t.Errorf("uplink host N=%d down N=%d; downlink host N=%d down N=%d", up.N, up.Down.N, down.N, down.Down.N)
	}
	if got, want := g.nodes[1].caps.getRwnd(101), paperWindow(1); got != want {
		t.Errorf("the only download: cap %d, want %d", got, want)
	}
	if up.Down.SelfActive || g.nodes[0].caps.getRwnd(100) != 0 {
		t.Errorf("an upload got a downlink cap: %+v", up.Down)
	}
}

// Downlink caps off by policy: none is set, and the status says why.
func TestDownlinkOff(t *testing.T) {
	cfg := downConfig()
	cfg.DownlinkCaps = false
	g := newGroup(t, 1, cfg)
	g.nodes[0].flows.set(downloadFlow(100))
	g.nodes[0].flows.recv[100] = 50e6
	g.round()
	g.round()
	st := g.nodes[0].c.Status()
	if st.Down.Capping || st.Down.Reason == "" || g.nodes[0].caps.getRwnd(100) != 0 || g.nodes[0].caps.downOn {
		t.Errorf("downlink caps off: %+v, cap %d", st.Down, g.nodes[0].caps.getRwnd(100))
	}
}

// TestDownlinkRefused: where the datapath refuses the downlink callback
// (sock_ops cannot set TCP_WINDOW_CLAMP before 5.11), status says the caps
// are not applied and why, and no cap is written. On 5.10 the daemon's
// status said capping while the kernel refused every cap.
func TestDownlinkRefused(t *testing.T) {
	fakeRefuse = errors.New("downlink caps: bpf_setsockopt refuses TCP_WINDOW_CLAMP before Linux 5.11 (test)")
	defer func() { fakeRefuse = nil }()
	g := newGroup(t, 1, downConfig())
	g.nodes[0].flows.set(downloadFlow(100))
	g.nodes[0].flows.recv[100] = 50e6
	for range 3 {
		g.round()
	}
	st := g.nodes[0].c.Status()
	if st.Down.Capping || !strings.Contains(st.Down.Reason, "before Linux 5.11 (test)") || g.nodes[0].caps.getRwnd(100) != 0 {
		t.Errorf("downlink caps refused by the datapath: %+v, cap %d", st.Down, g.nodes[0].caps.getRwnd(100))
	}
}

// A receiver's min RTT comes from its few own round trips; one taken
// behind a full queue (here 2x) stays for the flow's life. The cap is
// sized for the smallest receive-side RTT estimate instead.
func TestDownlinkRTTFromReceiveSide(t *testing.T) {
	g := newGroup(t, 1, downConfig())
	f := downloadFlow(100)
	f.MinRTT, f.RcvRTT = 512*time.Millisecond, 256*time.Millisecond
	g.nodes[0].flows.set(f)
	g.nodes[0].flows.recv[100] = 50e6
	g.round()
	g.round()
	if got, want := g.nodes[0].caps.getRwnd(100), paperWindow(1); got != want {
		t.Errorf("cap %d bytes, want %d (sized for the 256 ms the receiver measures, not the 512 ms min RTT)", got, want)
	}
}

// A joining download gets its bulk share as soon as its data arrives, and
// keeps it through slow start: its first interval is partial (the join is
// seen between two ticks, the cap applied at once) and its sender still
// grows, so its receive rate is far below its cap without the application
// limiting it. Before the growth rule the first tick read it as
// application-limited and cut its cap to the window it had used (in the
// lab: 70 -> 8 segments for a second).
func TestDownlinkJoinInSlowStart(t *testing.T) {
	g := newGroup(t, 2, downConfig())
	b := g.nodes[1]
	b.flows.set(downloadFlow(101))
	b.flows.recv[101] = 50e6
	for range 3 {
		g.round()
	}
	a := g.nodes[0]
	a.flows.set(downloadFlow(100))
	a.flows.recv[100] = 0.4e6 // IW10 and its first doublings
	ctx := t.Context()
	for range 2 { // Run's between-ticks samples: first seen, then receiving
		g.clk.add(100 * time.Millisecond)
		if a.c.sampleFlows(ctx) {
			a.c.announce()
			a.c.recomputeAndApply()
		}
	}
	want := paperWindow(2)
	if got := a.caps.getRwnd(100); got != want {
		t.Fatalf("after the join: cap %d, want the bulk share %d", got, want)
	}
	for k, r := range []float64{0.4e6, 2e6, 8e6, 50e6} {
		a.flows.recv[100] = r
		g.round()
		if got := a.caps.getRwnd(100); got < want*9/10 {
			t.Errorf("tick %d at %.1f Mbit/s: cap %d bytes, want the bulk share %d", k+1, r/1e6, got, want)
		}
	}
}

// Someone else's downloads fill the AP's downlink queue while caps hold
// ours: the downlink's own safety fallback stops its caps, as the uplink's
// does (without it, downlink caps would stay on whatever the queue held).
// A queue within the allowance does not.
func TestDownlinkFallsBackOnForeignQueue(t *testing.T) {
	g := newGroup(t, 2, downConfig())
	for i, n := range g.nodes {
		f := downloadFlow(uint64(100 + i))
		f.RcvRTT = f.MinRTT
		n.flows.set(f)
		n.flows.recv[f.Cookie] = 50e6
	}
	setRcvRTT := func(x float64) {
		for _, n := range g.nodes {
			n.flows.mu.Lock()
			n.flows.flows[0].RcvRTT = time.Duration(x * float64(256*time.Millisecond))
			n.flows.mu.Unlock()
		}
	}
	capping := func() (bool, string) {
		st := g.nodes[0].c.Status()
		return st.Down.Capping, st.Down.Reason
	}
	setRcvRTT(1.05)
	for range 30 {
		g.round()
	}
	if ok, why := capping(); !ok {
		t.Fatalf("a queue within the allowance stopped the downlink caps: %q", why)
	}
	setRcvRTT(1.4)
	for i := range 30 {
		g.round()
		if ok, why := capping(); !ok {
			if i+1 < 10 || !strings.Contains(why, "foreign traffic") {
				t.Fatalf("stopped after %d intervals of the queue: %q", i+1, why)
			}
			if got := g.nodes[0].caps.getRwnd(100); got != 0 {
				t.Errorf("fallen back, the download's window clamp is still %d bytes", got)
			}
			return
		}
	}
	t.Fatal("the downlink's caps stayed on through 15 s of a foreign queue")
}
