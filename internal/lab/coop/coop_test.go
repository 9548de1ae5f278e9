// Tests of the coop experiments: Jain's index, host lists, series statistics,
// the lab's policy file (unit), and a short run of the coop testbed with a
// lanes daemon on each host (root, builds the lanes binary).
package coop

import (
	"context"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestParseHosts(t *testing.T) {
	got, err := parseHosts("2-4,8")
	if err != nil || len(got) != 4 || got[0] != 2 || got[2] != 4 || got[3] != 8 {
		t.Errorf("parseHosts: %v %v", got, err)
	}
	for _, bad := range []string{"", "x", "0", "2-x", "100"} {
		if _, err := parseHosts(bad); err == nil {
			t.Errorf("parseHosts(%q) accepted", bad)
		}
	}
}

func TestSeriesStats(t *testing.T) {
	s := &coopSeries{Step: 200 * time.Millisecond}
	for k := 1; k <= 10; k++ {
		s.T = append(s.T, float64(k)*0.2)
		// host 0 gets 50 kB per step (2 Mbit/s), host 1 25 kB (1 Mbit/s)
		// the readers' counts alternate around the air's equal shares
		// (bytes counted one step late): Jain 200ms < 1, air = 1
		s.Samples = append(s.Samples, []hostSample{{Bytes: 50_000, Air: 30_000, SRTTms: 300, Retrans: uint32(k)}, {Bytes: 25_000, Air: 30_000, SRTTms: 260, Retrans: 1}})

		// the medium idle 20 ms of every 200 ms step, 5 KB queued
		s.MediumIdle, s.MediumQueue = append(s.MediumIdle, float64(k)*0.02), append(s.MediumQueue, 5000)
		s.MediumOther = append(s.MediumOther, int64(k)*2500) // 0.1 Mbit/s of announcements
		// a dcf medium: 10 ms of every step in collisions, 1 of 10 attempts
		s.MediumLost = append(s.MediumLost, float64(k)*0.01)
		s.MediumCollided, s.MediumFrames = append(s.MediumCollided, uint64(k)), append(s.MediumFrames, uint64(k)*9)
	}
	st := s.stats([]int{0, 1}, 0, 10)
	if math.Abs(st.PerHostMbit[0]-2) > 1e-9 || math.Abs(st.PerHostMbit[1]-1) > 1e-9 || math.Abs(st.TotalMbit-3) > 1e-9 {
		t.Errorf("goodput %+v", st)
	}
	if math.Abs(st.JainRun-0.9) > 1e-9 || math.Abs(st.JainStep-0.9) > 1e-9 || math.Abs(st.JainAir-1) > 1e-9 {
		t.Errorf("jain %v %v air %v", st.JainRun, st.JainStep, st.JainAir)
	}
	if math.Abs(st.IdlePct-10) > 1e-9 || st.QueueP50KB != 5 || math.Abs(st.OtherMbit-0.1) > 1e-9 {
		t.Errorf("medium idle %v %%, queue %v KB, non-TCP %v Mbit/s", st.IdlePct, st.QueueP50KB, st.OtherMbit)
	}
	if math.Abs(st.AirLostPct-5) > 1e-9 || math.Abs(st.CollidedPct-10) > 1e-9 {
		t.Errorf("dcf: air lost %v %%, collided %v %%", st.AirLostPct, st.CollidedPct)
	}
	// leaving out the first half: the idle time before it is not counted
	if st2 := s.stats([]int{0, 1}, 1.0, 10); math.Abs(st2.IdlePct-10) > 1e-9 || math.Abs(st2.AirLostPct-5) > 1e-9 || math.Abs(st2.CollidedPct-10) > 1e-9 {
		t.Errorf("medium from 1 s: idle %v %%, air lost %v %%, collided %v %%", st2.IdlePct, st2.AirLostPct, st2.CollidedPct)
	}
	if st.Retrans != 11 || st.RTTms < 260 || st.RTTms > 300 {
		t.Errorf("retrans %d rtt %v", st.Retrans, st.RTTms)
	}
	// a window leaving out the first half
	if st2 := s.stats([]int{0}, 1.0, 10); math.Abs(st2.TotalMbit-2) > 1e-9 {
		t.Errorf("window: %+v", st2)
	}
	// a recorder that fell behind: one sample 1 s after the last carries
	// 1 s of bytes, and the rate stays (it counted one step before: 6x)
	s.T = append(s.T, 3.0)
	s.Samples = append(s.Samples, []hostSample{{Bytes: 250_000}, {Bytes: 125_000}})
	if st3 := s.stats([]int{0, 1}, 0, 10); math.Abs(st3.TotalMbit-3) > 1e-9 {
		t.Errorf("late sample: %+v", st3)
	}
}

// tcpPayload reads an IPv4 TCP packet's addresses and payload length and
// refuses anything else.
func TestTCPPayload(t *testing.T) {
	pkt := make([]byte, 20+32+100)
	pkt[0], pkt[9] = 0x45, 6
	pkt[2], pkt[3] = 0, byte(len(pkt))
	copy(pkt[12:16], []byte{10, 77, 0, 2})
	copy(pkt[16:20], []byte{10, 77, 0, 9})
	pkt[20+12] = 8 << 4 // 32-byte TCP header (timestamps)
	src, dst, n, ok := tcpPayload(pkt)
	if !ok || n != 100 || src.String() != "10.77.0.2" || dst.String() != "10.77.0.9" {
		t.Errorf("tcpPayload = %v %v %d %v", src, dst, n, ok)
	}
	udp := append([]byte(nil), pkt...)
	udp[9] = 17
	v6 := append([]byte(nil), pkt...)
	v6[0] = 0x60
	for name, b := range map[string][]byte{"udp": udp, "ipv6": v6, "short": pkt[:30]} {
		if _, _, _, ok := tcpPayload(b); ok {
			t.Errorf("%s accepted", name)
		}
	}
}

// A short coop run with `lanes daemon` on two hosts, on each medium: the
// daemons find each other through the emulated medium (on dcf, each host's
// broadcast crosses its own uplink queue and the AP's downlink), agree on
// N=2, and clamp the uploads; the uploads registered in the background lane
// are seen in it.
func TestCoopBedLanes(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("10 s of emulated traffic per medium")
	}
	for _, m := range []string{MediumFIFO, MediumDCF} {
		t.Run(m, func(t *testing.T) { testCoopBedLanes(t, m) })
	}
}

func testCoopBedLanes(t *testing.T, medium string) {
	var c coopCommon
	c.rate, c.headroom, c.cc, c.rtt, c.bufBDP = "20mbit", "120kbit", "cubic", 100*time.Millisecond, 0.5
	c.medium, c.seed = medium, 1
	c.lanes = labtest.LanesBinary(t)
	bc, err := c.bed(2, func(int) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cb, err := newCoopBed(ctx, labtest.TestEnv(t), bc)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	for i := 0; i < 2; i++ {
		if _, err := cb.startUpload(ctx, i, coopBulkPort, 0, lane.Background); err != nil {
			t.Fatal(err)
		}
	}
	s, err := cb.record(ctx, 200*time.Millisecond, 8*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := s.stats([]int{0, 1}, 3, 100)
	last := s.Samples[len(s.Samples)-1]
	checkCappedUploads(t, cb, s)
	checkBackgroundDaemons(t, cb)
	if n := cb.bed.Emu.Broadcast.Load(); n == 0 {
		t.Error("the daemons' announcements were not broadcast across the medium")
	}
	t.Logf("total %.2f Mbit/s, Jain %.3f, RTT p50 %.0f ms, retrans %d, caps %d/%d",
		st.TotalMbit, st.JainRun, st.RTTms, st.Retrans, last[0].Cap, last[1].Cap)
	// the uploads fill half of what their caps allow at least: the caps
	// follow the medium's measured capacity, which a loaded machine's
	// emulator lowers (caps 19 and 26 segments, 4.1 Mbit/s, in a CI run)
	allowed := float64(last[0].Cap+last[1].Cap) * 1448 * 8 / (st.RTTms / 1e3) / 1e6
	if st.TotalMbit < allowed/2 || st.TotalMbit <= 0 {
		t.Errorf("total goodput %.2f Mbit/s through a 20 Mbit/s AP, the caps allowing %.2f", st.TotalMbit, allowed)
	}
	if medium == MediumDCF {
		// two stations and the AP (the ACKs) contend
		if d := s.DCF; d == nil || d.Successes == 0 || d.Collisions == 0 || st.AirLostPct <= 0 || st.CollidedPct <= 0 {
			t.Errorf("dcf medium: %+v, air lost %.1f %%, collided %.1f %%", d, st.AirLostPct, st.CollidedPct)
		}
		if len(cb.ups) != 2 || cb.ups[0] == cb.ups[1] || s.Up.OutPackets == 0 || s.Down.OutPackets == 0 {
			t.Errorf("dcf: %d uplink queues, up %+v, down %+v", len(cb.ups), s.Up, s.Down)
		}
	}
}

// checkCappedUploads: at the end of the recording both hosts count N = 2
// and cap their uploads with the cwnd under the cap, and the air each host
// got (its payload leaving the shared uplink) is what its reader counted,
// give or take the bytes in flight beyond the medium and retransmissions.
func checkCappedUploads(t *testing.T, cb *coopBed, s *coopSeries) {
	t.Helper()
	last, prev := s.Samples[len(s.Samples)-1], s.Samples[max(0, len(s.Samples)-2)]
	for i, h := range last {
		if h.N != 2 || !h.Capping || h.Cap == 0 {
			t.Errorf("host %d at the end: N=%d capping=%v cap=%d", i, h.N, h.Capping, h.Cap)
		}
		// a lowered cap reaches the socket at its next RTT sample (sock_ops'
		// RTT_CB: once per round trip), so the cwnd answers to the cap of
		// the sample before (one interval, longer than the round trip) too
		if limit := max(h.Cap, prev[i].Cap); h.Cwnd > limit {
			t.Errorf("host %d cwnd %d above cap %d (the sample before: %d)", i, h.Cwnd, h.Cap, prev[i].Cap)
		}
	}
	for i := range cb.hosts {
		var app, air int64
		for _, row := range s.Samples {
			app, air = app+row[i].Bytes, air+row[i].Air
		}
		if app == 0 || air < app*9/10 || air > app*3/2 {
			t.Errorf("host %d: %d bytes read, %d bytes of payload left the medium", i, app, air)
		}
	}
}

// checkBackgroundDaemons: each host's daemon sees its upload in the
// background lane and accepted its peer's authenticated announcements.
func checkBackgroundDaemons(t *testing.T, cb *coopBed) {
	t.Helper()
	for _, h := range cb.hosts {
		cs, err := h.coopStatus()
		if err != nil {
			t.Fatal(err)
		}
		if len(cs.Flows) == 0 || cs.Flows[0].Lane != lane.Background.String() {
			t.Errorf("%s: daemon's flows %+v, want the upload in the background lane", h.node.Name, cs.Flows)
		}
		if !cs.Authenticated || cs.Counters.Accepted == 0 || cs.Counters.Dropped() != 0 {
			t.Errorf("%s: authenticated %v, counters %+v", h.node.Name, cs.Authenticated, cs.Counters)
		}
	}
}

// The policy the lab writes for a lanes host is valid and says what the
// experiment asked for.
func TestCoopPolicyYAML(t *testing.T) {
	c := coopControllerConfig(20e6)
	c.Enabled, c.Interface, c.Port, c.Key = true, testbed.TUNName, coopAnnPort, "00112233445566778899aabbccddeeff"
	c.UnicastPeers = []string{"10.77.0.2", "10.77.0.3"}
	c.Safety.Enabled = false
	c.Rules = []config.CoopRule{{Name: "uploads-30", Lane: "background", Segments: 30}, {Name: "app", App: "ustream", When: config.CoopWhenRealtimeActive, Segments: 20}}
	p, err := policy.Parse("h1.yaml", []byte(coopPolicyYAML("h1", c)))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Interfaces) != 1 || p.Interfaces[0].Name != testbed.TUNName || p.Interfaces[0].Mode != policy.DeviceBottleneck {
		t.Errorf("interfaces %+v", p.Interfaces)
	}
	if !reflect.DeepEqual(p.Coop, c) {
		t.Errorf("coop section read back as\n%+v\nwant\n%+v", p.Coop, c)
	}
	// drain intervals other than the default are written (the default is
	// not, so that a daemon from before it reads the file)
	c.Safety.DrainIntervals = 7
	if p, err = policy.Parse("h1.yaml", []byte(coopPolicyYAML("h1", c))); err != nil || p.Coop.Safety.DrainIntervals != 7 {
		t.Errorf("drain_intervals 7 read back as %+v, %v", p.Coop.Safety, err)
	}
}

// The lab says which daemons stopped capping, and when.
func TestCappingStops(t *testing.T) {
	s := &coopSeries{T: []float64{0.2, 0.4, 0.6, 0.8}}
	for _, row := range [][3]bool{{false, false, false}, {true, false, true}, {true, false, false}, {false, true, false}} {
		s.Samples = append(s.Samples, []hostSample{{Capping: row[0]}, {Capping: row[1]}, {Capping: row[2]}})
	}
	// host 0 stops at 0.8, host 1 never capped, host 2 stops at 0.6
	got := cappingStops(s, []int{0, 1, 2})
	if want := []float64{0.8, -1, 0.6}; !reflect.DeepEqual(got, want) {
		t.Errorf("stops %v, want %v", got, want)
	}
	if txt := stopsText(got); txt != "2/3 at 0.6-0.8 s" {
		t.Errorf("text %q", txt)
	}
	if txt := stopsText([]float64{-1, -1}); txt != "none" {
		t.Errorf("text %q", txt)
	}
}

// TestCapChangesPerMinute: the hosts' mean of their counters' increase
// after the cut, per minute of the samples there; a counter that restarts
// (a new flow) counts from its new value.
func TestCapChangesPerMinute(t *testing.T) {
	s := &coopSeries{}
	for k := range 7 { // t = 0, 10, ..., 60 s
		s.T = append(s.T, float64(10*k))
		a := uint64(5 + k) // one change per 10 s: 6 a minute
		b := uint64(20)
		if k >= 4 {
			b = uint64(k - 3) // a new flow at 40 s: 1, 2, 3
		}
		s.Samples = append(s.Samples, []hostSample{{CapChanges: a}, {CapChanges: b}})
	}
	// after 25 s: samples 30..60 s; host 0: 3 changes, host 1: 1+1+1
	if got, want := capChangesPerMinute(s, 2, 25), 6.0; got != want {
		t.Errorf("cap changes per minute %.2f, want %.2f", got, want)
	}
	if got := capChangesPerMinute(s, 2, 60); got != 0 {
		t.Errorf("no samples after the cut: %.2f, want 0", got)
	}
}
