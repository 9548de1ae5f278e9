// heldack_test.go checks the held-ACK class on a real TCP download in the
// background lane: its pure ACKs go to 1:16 while the yield holds the
// download direction, not while only the upload direction is held nor
// beside the QUIC/UDP class's own harm, and no more once the hold ends; a
// rate set on the class paces them.
package datapath

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/testutil"
	"github.com/lanes-net/lanes/internal/yield"
)

func TestHeldAckClass(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "hack1"})
	// the host's pacer off (its event reader closed): this test sets the
	// class's rates itself
	if err := d.Background.events.close(); err != nil {
		t.Fatal(err)
	}
	dl := newDownload(t, p, "9321")
	if err := d.Lanes.SetSocketLane(dl.cookie, lane.Background); err != nil {
		t.Fatal(err)
	}
	idx := d.egress.Ifindex()
	sent := func() uint64 {
		t.Helper()
		n, err := d.egress.heldAck.packets()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	send := func() { sendUntilWnd(t, dl.snd, 500*time.Millisecond, 0, func(uint32) bool { return false }) }

	send()
	if n := sent(); n != 0 {
		t.Fatalf("nothing held: the held-ACK class sent %d packets", n)
	}
	stop := stampHarm(t, d.Host, idx, yield.Up)
	send()
	stop()
	if n := sent(); n != 0 {
		t.Fatalf("the upload direction held: the held-ACK class sent %d packets", n)
	}
	// the QUIC/UDP class's own harm holds the class, not the sockets
	now := monotonicNS()
	own := yield.Harm{At: now, Since: now, Samples: 1, QueueUS: 20000, Kind: yield.HarmOwn,
		DirUntil: [2]uint64{now + uint64(time.Hour), now + uint64(time.Hour)}}
	if err := d.cls.LanesFgHarm.Put(uint32(idx), own); err != nil {
		t.Fatal(err)
	}
	send()
	if err := d.cls.LanesFgHarm.Delete(uint32(idx)); err != nil {
		t.Fatal(err)
	}
	if n := sent(); n != 0 {
		t.Fatalf("the class's own harm: the held-ACK class sent %d packets", n)
	}
	stop = stampHarm(t, d.Host, idx, yield.Down)
	send()
	held := sent()
	if held == 0 {
		stop()
		t.Fatal("the download direction held: the held-ACK class sent nothing")
	}
	// paced at 100 bytes/s: a 66-byte ACK each 0.66 s, whatever arrives
	if err := d.egress.heldAck.SetRate(100); err != nil {
		stop()
		t.Fatal(err)
	}
	time.Sleep(time.Second) // what waited in the class before the rate
	before, t0 := sent(), time.Now()
	send()
	send()
	paced, took := sent()-before, time.Since(t0)
	// unrestricted again, still held: what waited in the class leaves and
	// the sender's RTT falls back (its socket is this test's, in the
	// foreground: paced, its RTT read as harm)
	if err := d.egress.heldAck.SetRate(0); err != nil {
		stop()
		t.Fatal(err)
	}
	send()
	send()
	stop()
	// 66-byte ACKs at 100 bytes/s, the bucket (two) and the reads' edges
	if most := uint64(took.Seconds()*100/66) + 4; paced > most {
		t.Errorf("paced at 100 bytes/s: the held-ACK class sent %d packets in %v (at most %d)", paced, took, most)
	}
	after := sent()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		if n := sent(); n != after {
			after = n
			continue
		}
		break
	}
	send()
	if n := sent(); n != after {
		t.Errorf("hold ended: the held-ACK class sent %d more packets", n-after)
	}
	t.Logf("held-ACK class: %d packets held, %d paced in %v at 100 bytes/s", held, paced, took)
}

// TestHeldAckPacer: held ACKs leaving post the classifier's event; the
// host's own event reader starts the pacer, with no background-udp
// controller subscribed (none runs in this package), which sets the
// class's rate from the interface's arrivals (HeldAckBytes of the download
// estimate) and releases the class heldAckQuiet after the hold ends.
func TestHeldAckPacer(t *testing.T) {
	requireCgroup2(t)
	p := testutil.NewVethPair(t)
	d := openIn(t, p.A, Config{Interface: p.LinkA, Instance: "hack2"})
	dl := newDownload(t, p, "9322")
	if err := d.Lanes.SetSocketLane(dl.cookie, lane.Background); err != nil {
		t.Fatal(err)
	}
	idx := d.egress.Ifindex()
	rate := func() uint64 {
		d.egress.mu.Lock()
		defer d.egress.mu.Unlock()
		return d.egress.heldAck.bytes
	}
	stop := stampHarm(t, d.Host, idx, yield.Down)
	// held ACKs leave while the download sends: the first event starts
	// the pacer, whose second reading of the arrivals sets a rate
	for deadline := time.Now().Add(5 * time.Second); rate() == 0 && time.Now().Before(deadline); {
		sendUntilWnd(t, dl.snd, 100*time.Millisecond, 0, func(uint32) bool { return false })
	}
	paced := rate()
	stop()
	if paced == 0 {
		t.Fatal("held ACKs for 5 s: no pacer set a rate (the classifier's held-ACK event not read)")
	}
	deadline := time.Now().Add(heldAckQuiet + 3*heldAckTick)
	for rate() != 0 && time.Now().Before(deadline) {
		time.Sleep(heldAckTick)
	}
	if r := rate(); r != 0 {
		t.Errorf("%v after the last event: the class still at %d bytes/s", heldAckQuiet+3*heldAckTick, r)
	}
	t.Logf("held-ACK pacer: %d bytes/s", paced)
}
