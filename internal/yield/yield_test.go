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
	y := New(Rule{}, func() (map[string]Counters, error) { return map[string]Counters{"eth0": c}, nil },
		func(on bool) error { calls = append(calls, on); return nil })
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
