// track_test.go: the tracked sampler's output, its table, in which only
// flows that changed are rewritten, holds every flow as last set, at the
// sample's time and with zero rates where unchanged, after any sequence of
// changes, new and closed flows and samples that failed before the
// output; a full walk spread over samples keeps
// every flow and drops only what it did not find; the first sample (its
// walk read ahead) agrees with the iterator backend's.
package tcpmon

import (
	"maps"
	"math/rand"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestTrackedOutputEqualsTable(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s := &Sampler{track: &trackSource{pos: map[uint64]int{}}}
	tk := s.track
	// model: every flow as last set, and the sample that set it.
	type set struct {
		f   Flow
		gen uint64
	}
	model := map[uint64]set{}
	var now time.Time
	put := func(i int, f Flow) { // as Sampler.put: the flow at the sample's time
		f.Time = now
		tk.flows[i], tk.upd[i] = f, s.gen
		model[f.Cookie] = set{f, s.gen}
	}
	next := uint64(1)
	for sample := 0; sample < 2000; sample++ {
		s.gen++
		now = time.Unix(int64(sample), 0)
		for range rng.Intn(4) { // new flows
			tk.pos[next] = len(tk.flows)
			tk.flows, tk.upd, tk.slot = append(tk.flows, Flow{}), append(tk.upd, 0), append(tk.slot, slotState{})
			put(len(tk.flows)-1, Flow{Cookie: next, Cwnd: uint32(rng.Intn(100)), Throughput: float64(rng.Intn(3))})
			next++
		}
		for range rng.Intn(4) { // changes: new fields and rates
			if len(tk.flows) == 0 {
				break
			}
			i := rng.Intn(len(tk.flows))
			f := tk.flows[i]
			f.Cwnd = uint32(rng.Intn(100))
			f.Throughput, f.RecvRate = float64(rng.Intn(3)), float64(rng.Intn(3))
			put(i, f)
		}
		for range rng.Intn(3) { // closed
			if len(tk.flows) == 0 {
				break
			}
			c := tk.flows[rng.Intn(len(tk.flows))].Cookie
			s.untrack(c)
			delete(model, c)
		}
		if rng.Intn(10) == 0 {
			continue // the sample failed before its output
		}
		s.trackedOutput(now)
		if len(s.buf) != len(model) {
			t.Fatalf("sample %d: %d flows, want %d", sample, len(s.buf), len(model))
		}
		for _, f := range s.buf {
			m, ok := model[f.Cookie]
			w := m.f
			w.Time = now
			if m.gen != s.gen {
				w.Throughput, w.RecvRate = 0, 0
			}
			if !ok || !reflect.DeepEqual(f, w) {
				t.Fatalf("sample %d: flow %d:\ngot  %+v\nwant %+v", sample, f.Cookie, f, w)
			}
		}
	}
}

// TestFullWalkSpread reads a full walk three records a sample: every
// sample while it runs has every flow, sockets opened and closed meanwhile
// come and go, a flow whose socket no longer exists (a close the sampler
// missed) stays until the walk ends and goes then, and the table ends as
// sock_diag sees the namespace.
func TestFullWalkSpread(t *testing.T) {
	lb := newLoopback(t)
	ns, pair := lb.ns, lb.pair
	for range 20 {
		pair()
	}
	s := newSampler(t, Config{NetNS: ns.Handle, Backend: BackendTrack})
	tk := s.track
	tk.walkChunk = 3
	fl, err := s.Sample()
	if err != nil || len(fl) != 40 {
		t.Fatalf("first sample: %d flows, %v; want 40", len(fl), err)
	}
	// The first two connections close while the walk runs; the others are
	// kept.
	kept, closing := splitClosing(fl, lb.conns[:4])
	if len(kept) != 36 || len(closing) != 4 {
		t.Fatalf("first sample: %d flows kept, %d closing; want 36 and 4", len(kept), len(closing))
	}
	const missed = 1<<63 | 12345 // no socket has it
	tk.pos[missed] = len(tk.flows)
	tk.flows = append(tk.flows, Flow{Cookie: missed})
	tk.upd = append(tk.upd, s.gen)
	tk.slot = append(tk.slot, slotState{})
	tk.resync = true
	samples := 0
	for {
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		samples++
		have := cookieSet(fl)
		if tk.walk == nil {
			if have[missed] {
				t.Fatalf("the walk ended after %d samples and kept the flow of a socket it did not find", samples)
			}
			break
		}
		if !have[missed] {
			t.Fatalf("sample %d of the walk: a flow dropped before the walk ended", samples)
		}
		for c := range kept {
			if !have[c] {
				t.Fatalf("sample %d of the walk: flow %d missing", samples, c)
			}
		}
		if samples == 2 { // while the walk runs: one connection opens, two close
			pair()
			for _, c := range lb.conns[:4] {
				c.Close()
			}
		}
		if samples > 200 {
			t.Fatal("the walk did not end in 200 samples")
		}
	}
	if samples < 40/3 {
		t.Fatalf("the walk took %d samples, want at least %d: not spread", samples, 40/3)
	}
	// The table converges on what sock_diag sees (the closed connections'
	// last state changes run in softirq after close returns).
	got, want := converge(t, s, newSampler(t, Config{NetNS: ns.Handle, Backend: BackendDiag}))
	if !maps.Equal(got, want) {
		t.Fatalf("tracked sampler after the walk: %d flows, sock_diag %d", len(got), len(want))
	}
	for _, c := range closing {
		if got[c] && !want[c] {
			t.Fatalf("closed socket %d still reported", c)
		}
	}
	if len(got) != 38 {
		t.Fatalf("%d flows after the walk, want 38 (20 connections, 2 closed, 1 opened)", len(got))
	}
}

// TestFirstWalkCloses: the first walk tracks no socket in the kernel (the
// walk that does is read over the following samples); a connection closed
// meanwhile still leaves the samples at once, not when that walk ends.
func TestFirstWalkCloses(t *testing.T) {
	lb := newLoopback(t)
	ns := lb.ns
	for range 20 {
		lb.pair()
	}
	s := newSampler(t, Config{NetNS: ns.Handle, Backend: BackendTrack})
	s.track.walkChunk = 1 // the tracking walk spans 40 samples
	fl, err := s.Sample()
	if err != nil || len(fl) != 40 {
		t.Fatalf("first sample: %d flows, %v; want 40", len(fl), err)
	}
	closing := map[uint64]bool{}
	for _, f := range fl {
		for _, c := range lb.conns[:4] {
			if f.Src == c.LocalAddr().String() && f.Dst == c.RemoteAddr().String() {
				closing[f.Cookie] = true
			}
		}
	}
	if len(closing) != 4 {
		t.Fatalf("found %d flows of the connections to close, want 4", len(closing))
	}
	for _, c := range lb.conns[:4] {
		c.Close()
	}
	for n := 1; ; n++ {
		time.Sleep(20 * time.Millisecond) // the closes' last steps run in softirq
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if s.track.walk == nil {
			t.Fatalf("the tracking walk ended (%d samples) with closed connections still reported", n)
		}
		left := 0
		for _, f := range fl {
			if closing[f.Cookie] {
				left++
			}
		}
		if left == 0 && len(fl) == 36 {
			return
		}
	}
}

// TestFirstFreedNext: the first walk's slots and program are freed by the
// sample after it, not by the first sample itself (their unmapping is no
// part of what the first sample reports).
func TestFirstFreedNext(t *testing.T) {
	lb := newLoopback(t)
	lb.pair()
	s := newSampler(t, Config{NetNS: lb.ns.Handle, Backend: BackendTrack})
	if fl, err := s.Sample(); err != nil || len(fl) != 2 {
		t.Fatalf("first sample: %d flows, %v; want 2", len(fl), err)
	}
	r, err := s.track.tr.OpenFirst() // opened, not read
	if err != nil {
		t.Fatalf("after the first sample: the first walk already freed: %v", err)
	}
	r.Close()
	if _, err := s.Sample(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.track.tr.OpenFirst(); err == nil {
		r.Close()
		t.Fatal("after the second sample: the first walk's program and slots still held")
	}
}

// TestDedupe: a socket the first walk met twice is kept once, as its
// later record says, and pos names every flow's slot.
func TestDedupe(t *testing.T) {
	for _, cookies := range [][]uint64{{1, 2, 1, 3, 2}, {1, 1}, {1, 2, 3, 3}, {4, 4, 4, 5}} {
		s := &Sampler{track: &trackSource{pos: map[uint64]int{}}}
		tk := s.track
		want := map[uint64]uint32{}
		for i, c := range cookies { // as put in a fresh walk: pos set blindly
			tk.flows = append(tk.flows, Flow{Cookie: c, Cwnd: uint32(i)})
			tk.upd, tk.slot = append(tk.upd, 1), append(tk.slot, slotState{})
			tk.pos[c], want[c] = i, uint32(i)
		}
		s.dedupe()
		if len(tk.flows) != len(want) || len(tk.upd) != len(want) || len(tk.slot) != len(want) {
			t.Fatalf("%v: %d flows after dedupe, want %d", cookies, len(tk.flows), len(want))
		}
		for i, f := range tk.flows {
			if tk.pos[f.Cookie] != i || f.Cwnd != want[f.Cookie] {
				t.Fatalf("%v: slot %d: %+v (pos %d), want the record %d", cookies, i, f, tk.pos[f.Cookie], want[f.Cookie])
			}
		}
	}
}

// loopback is a fresh namespace with a listener on 127.0.0.1 and the
// connections made to it (both ends), all closed at the test's end.
// cookieSet is the set of a sample's socket cookies.
func cookieSet(fl []Flow) map[uint64]bool {
	m := map[uint64]bool{}
	for _, f := range fl {
		m[f.Cookie] = true
	}
	return m
}

// splitClosing splits a sample's cookies into those of the connections
// about to close (either end of one in closing) and the rest.
func splitClosing(fl []Flow, closing []net.Conn) (kept map[uint64]bool, closed []uint64) {
	kept = cookieSet(fl)
	for _, f := range fl {
		for _, c := range closing {
			if f.Src == c.LocalAddr().String() && f.Dst == c.RemoteAddr().String() {
				closed = append(closed, f.Cookie)
				delete(kept, f.Cookie)
			}
		}
	}
	return kept, closed
}

// converge samples s and diag every 20 ms, for 5 s at most, until they see
// the same sockets; it returns the last cookies of each.
func converge(t *testing.T, s, diag *Sampler) (got, want map[uint64]bool) {
	t.Helper()
	for range 250 {
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		got = cookieSet(fl)
		dl, err := diag.Sample()
		if err != nil {
			t.Fatal(err)
		}
		want = cookieSet(dl)
		if maps.Equal(got, want) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got, want
}

type loopback struct {
	t     *testing.T
	ns    *testutil.NetNS
	ln    net.Listener
	conns []net.Conn
}

func newLoopback(t *testing.T) *loopback {
	testutil.RequireRoot(t)
	requireTracker(t)
	lb := &loopback{t: t, ns: testutil.NewNetNS(t)}
	t.Cleanup(func() {
		for _, c := range lb.conns {
			c.Close()
		}
		if lb.ln != nil {
			lb.ln.Close()
		}
	})
	lb.ns.Do(t, func() (err error) { lb.ln, err = net.Listen("tcp", "127.0.0.1:0"); return err })
	return lb
}

// pair opens one connection; both ends are appended to conns.
func (lb *loopback) pair() {
	lb.ns.Do(lb.t, func() error {
		c, err := net.Dial("tcp", lb.ln.Addr().String())
		if err != nil {
			return err
		}
		s, err := lb.ln.Accept()
		if err != nil {
			c.Close()
			return err
		}
		lb.conns = append(lb.conns, c, s)
		return nil
	})
}

// TestFirstSampleAgrees: the tracked sampler's first sample, whose walk is
// read ahead on another goroutine while the table is sized and the owners
// are walked (firstWalk), holds exactly the flows, every field but the
// time, that the iterator backend's sample (read in the same goroutine)
// holds for the same idle sockets: enough of them for the walk to span
// several read-ahead buffers. With each variant of the walk program this
// kernel loads (the touches of the next socket only warm caches).
func TestFirstSampleAgrees(t *testing.T) {
	lb := newLoopback(t)
	const pairs = 1250 // 2,500 sockets: ~2.5 read-ahead buffers
	for range pairs {
		lb.pair()
	}
	// The first walk as at 10,000 sockets or more: collections held off.
	defer func(n int) { trackHoldAt = n }(trackHoldAt)
	trackHoldAt = 1
	for _, p := range prefetchVariants(t) {
		t.Run(prefetchName(p), func(t *testing.T) { firstSampleAgrees(t, lb, pairs, p) })
	}
}

// firstSampleAgrees is TestFirstSampleAgrees with the walk program's
// variant p, in both samplers.
func firstSampleAgrees(t *testing.T, lb *loopback, pairs int, p tcpiter.Prefetch) {
	percent := gcPercent()
	sample := func(backend string) []Flow {
		s := newSampler(t, Config{NetNS: lb.ns.Handle, Backend: backend, prefetch: p})
		defer s.Close()
		if on := (p == tcpiter.PrefetchOn); backend == BackendIter && s.iter.it.Prefetching() != on ||
			backend == BackendTrack && s.track.tr.Prefetching() != on {
			t.Fatalf("%s: the walk program prefetches: %v, want %v", backend, !on, on)
		}
		fl, err := s.Sample()
		if err != nil {
			t.Fatalf("%s: %v", backend, err)
		}
		return canonFlows(fl)
	}
	// an emulated arm64 beside other work takes seconds per sample: the
	// wait for a still moment scales with it
	for deadline := time.Now().Add(testutil.Patience(5 * time.Second)); ; {
		before := sample(BackendIter)
		first := sample(BackendTrack)
		after := sample(BackendIter)
		if !reflect.DeepEqual(before, after) {
			if time.Now().After(deadline) {
				t.Fatal("the sockets never stood still between two iterator samples")
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if len(first) != 2*pairs || len(after) != 2*pairs {
			t.Fatalf("first tracked sample %d flows, iterator %d, want %d", len(first), len(after), 2*pairs)
		}
		owned := 0
		for i := range after {
			if !reflect.DeepEqual(first[i], after[i]) {
				t.Fatalf("flow %s differs:\niterator      %+v\nfirst tracked %+v", after[i].Key(), after[i], first[i])
			}
			if first[i].PID == os.Getpid() {
				owned++
			}
		}
		if owned != 2*pairs {
			t.Fatalf("%d flows with this process as owner, want %d", owned, 2*pairs)
		}
		if p := gcPercent(); p != percent || gcHold.n != 0 {
			t.Fatalf("after the first walk: GC percent %d (was %d), %d holds", p, percent, gcHold.n)
		}
		return
	}
}
