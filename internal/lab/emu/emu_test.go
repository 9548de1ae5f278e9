// emu_test.go: unit tests of the link, trace and prioritiser logic (real
// clock, in-process packets; no namespaces needed).
package emu

import (
	"context"
	"encoding/binary"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/varlink"
)

func writeTrace(t *testing.T, lines string) *Trace {
	p := filepath.Join(t.TempDir(), "tr")
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := ParseTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTraceCount(t *testing.T) {
	tr := writeTrace(t, "1\n1\n3\n10\n")
	if tr.Period != 10 {
		t.Fatalf("period %d, want 10", tr.Period)
	}
	ms := time.Millisecond
	cases := []struct {
		from, to time.Duration
		want     uint64
	}{
		{0, 10 * ms, 3},         // 1,1,3 (10 is at the boundary: next)
		{0, 10*ms + 1, 4},       // + 10
		{0, 20*ms + 1, 8},       // second cycle: 11,11,13,20
		{2 * ms, 12 * ms, 4},    // 3, 10, 11, 11
		{100 * ms, 110 * ms, 4}, // 100 (end of cycle 9), 101, 101, 103
		{1000 * ms, 2000 * ms, 400},
	}
	for _, c := range cases {
		if got := tr.Count(c.from, c.to); got != c.want {
			t.Errorf("Count(%v, %v) = %d, want %d", c.from, c.to, got, c.want)
		}
	}
	if r := tr.MeanRate(); r != 4*1500*8/0.010 {
		t.Errorf("mean rate %v", r)
	}
	for _, bad := range []string{"", "x\n", "5\n3\n"} {
		p := filepath.Join(t.TempDir(), "bad")
		os.WriteFile(p, []byte(bad), 0o644)
		if _, err := ParseTrace(p); err == nil {
			t.Errorf("trace %q accepted", bad)
		}
	}
}

type sink struct {
	mu   sync.Mutex
	at   []time.Time
	data [][]byte
}

func (s *sink) out(b []byte, _ any) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.data = append(s.data, b)
	s.mu.Unlock()
}

func (s *sink) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func TestFixedRateAndDelay(t *testing.T) {
	var s sink
	l := NewLink(LinkConfig{Rate: 10e6, Delay: 20 * time.Millisecond}, s.out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	for l.Base().IsZero() {
		time.Sleep(time.Millisecond)
	}
	stopProbe := make(chan struct{})
	probe := make(chan time.Duration, 1)
	go func() { probe <- oversleep(stopProbe) }()
	start := time.Now()
	for i := 0; i < 50; i++ {
		l.Enqueue(make([]byte, 1250), nil) // 1 ms each at 10 Mbit/s
	}
	deadline := time.Now().Add(2 * time.Second)
	for s.n() < 50 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(stopProbe)
	late := <-probe
	if s.n() != 50 {
		t.Fatalf("delivered %d of 50", s.n())
	}
	first, last := s.at[0].Sub(start), s.at[49].Sub(start)
	// first: 1 ms serialisation + 20 ms delay; last: 50 ms + 20 ms. Never
	// early. Late only by scheduling: the bound is 20 ms plus the worst
	// oversleep a plain 1 ms sleeper saw meanwhile, so a loaded machine
	// widens it and a quiet one keeps it tight.
	slack := 20*time.Millisecond + late
	if first < 20*time.Millisecond || first > 21*time.Millisecond+slack {
		t.Errorf("first packet after %v, want ~21 ms (slack %v)", first, slack)
	}
	if last < 69*time.Millisecond || last > 70*time.Millisecond+slack {
		t.Errorf("last packet after %v, want ~70 ms (slack %v)", last, slack)
	}
}

// oversleep sleeps 1 ms at a time until stop and returns the worst lateness:
// how late this machine is running goroutines right now.
func oversleep(stop chan struct{}) time.Duration {
	var worst time.Duration
	for {
		select {
		case <-stop:
			return worst
		default:
		}
		t0 := time.Now()
		time.Sleep(time.Millisecond)
		worst = max(worst, time.Since(t0)-time.Millisecond)
	}
}

func TestDropTailAndLoss(t *testing.T) {
	l := NewLink(LinkConfig{Rate: 1e3, QueueBytes: 3000}, func([]byte, any) {})
	acc := 0
	for i := 0; i < 5; i++ {
		if l.Enqueue(make([]byte, 1000), nil) {
			acc++
		}
	}
	if acc != 3 || l.Stats().DropTail != 2 {
		t.Errorf("byte limit: accepted %d, drops %d; want 3, 2", acc, l.Stats().DropTail)
	}
	l = NewLink(LinkConfig{Rate: 1e3, QueuePackets: 2}, func([]byte, any) {})
	acc = 0
	for i := 0; i < 5; i++ {
		if l.Enqueue(make([]byte, 100), nil) {
			acc++
		}
	}
	if acc != 2 {
		t.Errorf("packet limit: accepted %d, want 2", acc)
	}
	// A reader that waited for room may overshoot by one packet, like a
	// driver stopping its queue after the threshold is crossed.
	l = NewLink(LinkConfig{Rate: 1e3, QueueBytes: 1500}, func([]byte, any) {})
	var admitted []bool
	for range 3 {
		admitted = append(admitted, l.EnqueueAdmitted(make([]byte, 1000), nil))
	}
	if !slices.Equal(admitted, []bool{true, true, false}) {
		t.Errorf("admitted enqueue: %v, want 2 accepted then refused", admitted)
	}
	l = NewLink(LinkConfig{Loss: 0.3, Seed: 7}, func([]byte, any) {})
	for i := 0; i < 10000; i++ {
		l.Enqueue([]byte{1}, nil)
	}
	if d := l.Stats().DropLoss; d < 2700 || d > 3300 {
		t.Errorf("random loss 30%%: dropped %d of 10000", d)
	}
}

func TestTraceSerialiser(t *testing.T) {
	// One opportunity every 2 ms: 1,500-byte packets leave one per
	// opportunity, never early; 500-byte packets three per opportunity.
	tr := writeTrace(t, "2\n")
	var s sink
	l := NewLink(LinkConfig{Trace: tr}, s.out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	for l.Base().IsZero() {
		time.Sleep(time.Millisecond)
	}
	base := l.Base()
	for i := 0; i < 10; i++ {
		l.Enqueue(make([]byte, 1500), nil)
	}
	waitFor := func(n int) {
		deadline := time.Now().Add(2 * time.Second)
		for s.n() < n && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		if s.n() < n {
			t.Fatalf("delivered %d, want %d (%+v)", s.n(), n, l.Stats())
		}
	}
	waitFor(10)
	for i, at := range s.at {
		if early := base.Add(time.Duration(2*(i+1))*time.Millisecond - 500*time.Microsecond); at.Before(early) {
			t.Errorf("packet %d delivered %v after start, before its opportunity", i, at.Sub(base))
		}
	}
	used := l.Stats().UsedOpportunities
	if used != 10 {
		t.Errorf("10 full packets used %d opportunities", used)
	}
	for i := 0; i < 9; i++ {
		l.Enqueue(make([]byte, 500), nil)
	}
	waitFor(19)
	if got := l.Stats().UsedOpportunities - used; got < 3 || got > 4 {
		t.Errorf("9 packets of 500 B used %d opportunities, want 3", got)
	}
}

func tcpPacket(dst netip.AddrPort, sport uint16, size int) []byte {
	b := make([]byte, size)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(size))
	b[9] = 6
	copy(b[16:20], dst.Addr().AsSlice())
	binary.BigEndian.PutUint16(b[20:], sport)
	binary.BigEndian.PutUint16(b[22:], dst.Port())
	return b
}

func TestPrioritiserStrictOrder(t *testing.T) {
	var s sink
	l := NewLink(LinkConfig{Rate: 1.2e6, QueueBytes: 1500}, s.out) // 10 ms per 1,500 B
	p := NewPrioritiser()
	p.link = l
	bg := netip.MustParseAddrPort("10.0.0.3:80")
	fg := netip.MustParseAddrPort("10.0.0.2:80")
	p.Register(FlowKey{Dst: bg, Sport: 4000})
	if k, ok := FlowOf(tcpPacket(bg, 4000, 100)); !ok || k.Sport != 4000 || k.Dst != bg {
		t.Fatalf("FlowOf: %v %v", k, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	go p.run(ctx)
	for i := 0; i < 10; i++ {
		p.enqueue(tcpPacket(bg, 4000, 1500))
	}
	time.Sleep(5 * time.Millisecond) // the device queue holds one bg packet now
	for i := 0; i < 3; i++ {
		p.enqueue(tcpPacket(fg, 5000, 1500))
	}
	deadline := time.Now().Add(2 * time.Second)
	for s.n() < 13 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.n() != 13 {
		t.Fatalf("delivered %d of 13", s.n())
	}
	// At most two background packets (in the device and its queue) may
	// precede the foreground ones.
	firstFG := -1
	for i, d := range s.data {
		if k, _ := FlowOf(d); k.Dst == fg {
			firstFG = i
			break
		}
	}
	if firstFG < 0 || firstFG > 2 {
		t.Errorf("first foreground packet delivered at position %d, want <= 2", firstFG)
	}
	if p.Moved[1].Load() != 10 || p.Moved[0].Load() != 3 {
		t.Errorf("moved %d high, %d low", p.Moved[0].Load(), p.Moved[1].Load())
	}
	if p.ThreadCPU() < 0 {
		t.Error("negative CPU")
	}
}

// BenchmarkLink is the link's own cost per packet (enqueue, serialiser at
// 1 Tbit/s, delay line, callback); `lanes lab run accuracy` reports the
// same as packets per second on one core, and the whole TUN-to-TUN path.
func BenchmarkLink(b *testing.B) {
	done := make(chan struct{})
	n := 0
	l := NewLink(LinkConfig{Rate: 1e12, QueuePackets: 1 << 20}, func([]byte, any) {
		n++
		if n == b.N {
			close(done)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	pkt := make([]byte, 1500)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Enqueue(pkt, nil)
	}
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkt/s")
}

// A link whose goroutine is held up delivers late, and the late stretch is
// counted as one stall (the lab's stall check relies on it).
func TestLinkCountsStalls(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l := NewLink(LinkConfig{Delay: 5 * time.Millisecond}, func([]byte, any) {
		once.Do(func() { close(entered); <-release }) // the first delivery holds the goroutine
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	l.Enqueue(make([]byte, 100), nil)
	<-entered
	for i := 0; i < 4; i++ { // due 5 ms from now, while the link is held
		l.Enqueue(make([]byte, 100), nil)
	}
	time.Sleep(2 * StallLate)
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().OutPackets < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := l.Stats()
	if st.StallEvents != 1 || st.LatePackets != 4 || st.MaxLate < StallLate {
		t.Errorf("stats after a %v hold-up: %+v", 2*StallLate, st)
	}
}

func TestVariableTraceFollowsItsRates(t *testing.T) {
	const steps = 8
	tr := VariableTrace(varlink.Seed, steps)
	next := varlink.Rates(varlink.Seed)
	var sum float64
	for i := range steps {
		want := next()
		sum += want
		from := time.Duration(i)*varlink.Step + time.Millisecond // a step's opportunities: (start, end] ms
		got := float64(tr.Count(from, from+varlink.Step)) * OpportunityBytes * 8 / varlink.Step.Seconds()
		if want < varlink.MinBps || want > varlink.MaxBps || math.Abs(got-want) > 30e3 {
			t.Errorf("step %d: trace at %.3f Mbit/s, sequence %.3f", i, got/1e6, want/1e6)
		}
	}
	if mean := tr.MeanRate(); math.Abs(mean-sum/steps) > 5e3 {
		t.Errorf("trace mean %.3f Mbit/s, sequence's %.3f", mean/1e6, sum/steps/1e6)
	}
}
