// yield_test.go checks the rule on synthetic counter samples: a ping's
// trickle is not foreground activity, a transfer is at its first sample,
// the yield lasts Hold after the last active sample, late samples are
// scaled; and the Yielder calls its sink once per change.
package yield

import (
	"testing"
	"time"
)

func TestDetector(t *testing.T) {
	d := NewDetector(Rule{})
	t0 := time.Unix(1000, 0)
	var c Counters
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 100 * time.Millisecond) }
	if d.Sample(c, at(0)) {
		t.Fatal("first sample yields")
	}
	for i := 1; i <= 20; i++ { // a ping every 50 ms: 2 x 100 B per sample
		c.Packets, c.Bytes = c.Packets+2, c.Bytes+200
		if d.Sample(c, at(i)) {
			t.Fatalf("a ping's trickle made background yield at sample %d", i)
		}
	}
	c.Packets, c.Bytes = c.Packets+3, c.Bytes+3*1500 // a request burst: 4.5 KB
	if d.Sample(c, at(21)) {
		t.Fatal("3 packets / 4.5 KB counted as active")
	}
	c.Packets, c.Bytes = c.Packets+8, c.Bytes+8*66 // an ACK clock: 8 ACKs
	if !d.Sample(c, at(22)) {
		t.Fatal("8 packets in 100 ms did not make background yield")
	}
	for i := 23; i < 27; i++ {
		if !d.Sample(c, at(i)) {
			t.Fatalf("yield ended after %v idle, before Hold", at(i).Sub(at(22)))
		}
	}
	if d.Sample(c, at(27)) {
		t.Fatal("yield still on 500 ms after the last active sample")
	}
	// a late sample: 8 packets over 1 s is below 5 per 100 ms
	c.Packets += 8
	if d.Sample(c, at(37)) {
		t.Fatal("8 packets over a second counted as active")
	}
	c.Bytes += 7000
	if !d.Sample(c, at(38)) {
		t.Fatal("7 KB in 100 ms did not count")
	}
}

func TestYielderSink(t *testing.T) {
	var c Counters
	var calls []bool
	eth0 := Iface{"eth0", 2}
	y := New(Rule{}, func() (map[Iface]Counters, error) { return map[Iface]Counters{eth0: c}, nil },
		func(i Iface, on bool) error {
			if i != eth0 {
				t.Errorf("sink for %v", i)
			}
			calls = append(calls, on)
			return nil
		})
	t0 := time.Unix(1000, 0)
	for i := 0; i < 20; i++ {
		if i >= 5 && i < 10 {
			c.Packets += 20
		}
		if err := y.step(t0.Add(time.Duration(i) * 100 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if len(calls) != 2 || !calls[0] || calls[1] {
		t.Fatalf("sink calls %v, want [true false]", calls)
	}
	if s := y.Status(); s.Yielding || s.Yields != 1 || s.Interfaces["eth0"].Yielding {
		t.Fatalf("status %+v", s)
	}
}

// TestYielderPerInterface: foreground on one interface yields that
// interface only; an interface that stops being managed while it yields
// is released; Run's end releases what still yields.
func TestYielderPerInterface(t *testing.T) {
	a, b := Iface{"wlan0", 3}, Iface{"rmnet0", 7}
	var ca, cb Counters
	managed := map[Iface]bool{a: true, b: true}
	held := map[Iface]bool{}
	var calls int
	y := New(Rule{}, func() (map[Iface]Counters, error) {
		out := map[Iface]Counters{}
		if managed[a] {
			out[a] = ca
		}
		if managed[b] {
			out[b] = cb
		}
		return out, nil
	}, func(i Iface, on bool) error { calls++; held[i] = on; return nil })
	t0 := time.Unix(1000, 0)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 100 * time.Millisecond) }
	for i := 0; i < 5; i++ {
		ca.Packets += 20 // foreground on a only
		cb.Packets++     // a ping on b: not foreground activity
		if err := y.step(at(i)); err != nil {
			t.Fatal(err)
		}
	}
	if !held[a] || held[b] {
		t.Fatalf("foreground on %s: held %v, want %s only", a.Name, held, a.Name)
	}
	s := y.Status()
	if !s.Yielding || !s.Interfaces["wlan0"].Yielding || s.Interfaces["rmnet0"].Yielding || s.Interfaces["wlan0"].Since.IsZero() {
		t.Fatalf("status %+v", s)
	}
	cb.Packets += 100 // now b too
	if err := y.step(at(5)); err != nil {
		t.Fatal(err)
	}
	if !held[a] || !held[b] {
		t.Fatalf("foreground on both: held %v", held)
	}
	managed[a] = false // a goes away while it yields
	if err := y.step(at(6)); err != nil {
		t.Fatal(err)
	}
	if held[a] || !held[b] {
		t.Fatalf("after %s went away: held %v", a.Name, held)
	}
	if _, ok := y.Status().Interfaces["wlan0"]; ok {
		t.Error("an interface no longer managed is still in the status")
	}
	y.releaseAll()
	if held[b] {
		t.Fatalf("after the end: held %v", held)
	}
}
