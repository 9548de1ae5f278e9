package coop

import (
	"math"
	"testing"
)

func TestAckClassRate(t *testing.T) {
	// twice what the class sent over the last RTT, never below the floor
	if got, want := AckClassRate(21.6e3), uint64(math.Ceil(AckClassGrowth*21.6e3)); got != want {
		t.Errorf("rate %d bit/s, want %d", got, want)
	}
	if AckClassGrowth < 2 {
		t.Errorf("growth %v: below slow start's (2x per round)", AckClassGrowth)
	}
	for _, v := range []float64{0, -1, math.NaN(), AckClassFloor / 4} {
		if got := AckClassRate(v); got != AckClassFloor {
			t.Errorf("AckClassRate(%v) = %d, want the floor %d", v, got, AckClassFloor)
		}
	}
}

// The controller turns the class on with the first download (at the floor
// while nothing was sent), with caps follows their window rates at the
// measured ACK ratio, and turns it off without downloads and at shutdown.
func TestDownlinkAckClass(t *testing.T) {
	g := newGroup(t, 4, downConfig())
	nd := g.nodes[0]
	var sent uint64
	nd.caps.ackOf = func() uint64 { return sent }
	for i, n := range g.nodes {
		ck := uint64(100 + i)
		n.flows.set(downloadFlow(ck))
		n.flows.recv[ck] = 50e6
	}
	g.round() // the downloads' first sample
	g.round() // their progress: active, announced
	g.round()
	if nd.caps.getAck() != AckClassFloor {
		t.Fatalf("first rounds: class %d bit/s, want on at the floor (cap %d)", nd.caps.getAck(), nd.caps.getRwnd(100))
	}
	g.round()
	if st := nd.c.Status().Down.AckClass; st == nil || !st.On {
		t.Fatalf("status %+v, want on", st)
	}
	// the class sends 20 kB per 500 ms round: 320 kbit/s, so 640 kbit/s
	for range 4 {
		sent += 20_000
		g.round()
	}
	// capped by now: AckClassFactor x the measured ratio x the window rates
	st := nd.c.Status().Down.AckClass
	if st.WindowsBits == 0 || st.Ratio <= 0 {
		t.Fatalf("status %+v, want the download capped and a measured ratio", st)
	}
	if want := AckClassCappedRate(float64(st.WindowsBits), st.Ratio); math.Abs(float64(nd.caps.getAck())/float64(want)-1) > ackChange {
		t.Errorf("class %d bit/s, want %d (status %+v)", nd.caps.getAck(), want, st)
	}
	if got := AckClassRate(float64(st.SentBits)); math.Abs(float64(got)/640e3-1) > 0.01 {
		t.Errorf("sent %d bit/s: uncapped rate %d, want 640 kbit/s", st.SentBits, got)
	}
	// no download: off
	nd.flows.set()
	for range 3 {
		g.round()
	}
	if got := nd.caps.getAck(); got != 0 {
		t.Errorf("no downloads: ACK class at %d bit/s, want off", got)
	}
	if st := nd.c.Status().Down.AckClass; st.On || st.Reason == "" {
		t.Errorf("no downloads: status %+v, want off with a reason", st)
	}
	// shutdown turns it off
	nd.flows.set(downloadFlow(100))
	for range 3 {
		g.round()
	}
	if nd.caps.getAck() == 0 {
		t.Fatal("download back: ACK class still off")
	}
	nd.c.mu.Lock()
	nd.c.ack.shutdown()
	nd.c.mu.Unlock()
	if got := nd.caps.getAck(); got != 0 {
		t.Errorf("after shutdown: ACK class at %d bit/s", got)
	}
}

// A host downloading alone keeps its ACKs unshaped (its slow start whole).
func TestDownlinkAckClassAlone(t *testing.T) {
	g := newGroup(t, 2, downConfig())
	nd := g.nodes[0]
	nd.flows.set(downloadFlow(100))
	nd.flows.recv[100] = 50e6
	for range 4 {
		g.round()
	}
	if got := nd.caps.getAck(); got != 0 {
		t.Errorf("alone: ACK class at %d bit/s, want off", got)
	}
	g.nodes[1].flows.set(downloadFlow(101))
	g.nodes[1].flows.recv[101] = 50e6
	for range 3 {
		g.round()
	}
	if got := nd.caps.getAck(); got == 0 {
		t.Errorf("a second host downloading: ACK class still off")
	}
}
