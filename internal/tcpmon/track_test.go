// track_test.go: the tracked sampler's output, which rewrites only the
// flows that changed, equals a full copy of its table after any sequence
// of changes, new and closed flows, samples that failed before the output,
// and samples the caller reordered; a full walk spread over samples keeps
// every flow and drops only what it did not find.
package tcpmon

import (
	"maps"
	"math/rand"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestTrackedOutputEqualsFullCopy(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s := &Sampler{track: &trackSource{pos: map[uint64]int{}}, known: map[uint64]*prevCounters{}}
	tk := s.track
	next := uint64(1)
	add := func() {
		f := Flow{Cookie: next, Cwnd: uint32(rng.Intn(100)), Throughput: float64(rng.Intn(3))}
		next++
		tk.pos[f.Cookie] = len(tk.flows)
		tk.flows = append(tk.flows, f)
		tk.upd = append(tk.upd, s.gen)
	}
	// want is the output as a full copy of the table gives it.
	want := func(now time.Time) []Flow {
		out := make([]Flow, len(tk.flows))
		for i, f := range tk.flows {
			f.Time = now
			if tk.upd[i] != s.gen {
				f.Throughput, f.RecvRate = 0, 0
			}
			out[i] = f
		}
		return out
	}
	for sample := 0; sample < 2000; sample++ {
		s.gen++
		now := time.Unix(int64(sample), 0)
		for range rng.Intn(4) {
			add()
		}
		for range rng.Intn(4) { // changes: new fields and rates
			if len(tk.flows) == 0 {
				break
			}
			i := rng.Intn(len(tk.flows))
			tk.flows[i].Cwnd = uint32(rng.Intn(100))
			tk.flows[i].Throughput, tk.flows[i].RecvRate = float64(rng.Intn(3)), float64(rng.Intn(3))
			tk.upd[i] = s.gen
		}
		for range rng.Intn(3) { // closed
			if len(tk.flows) == 0 {
				break
			}
			s.untrack(tk.flows[rng.Intn(len(tk.flows))].Cookie)
		}
		if rng.Intn(10) == 0 {
			continue // the sample failed before its output
		}
		s.trackedOutput(now)
		if w := want(now); !reflect.DeepEqual(s.buf, w) {
			t.Fatalf("sample %d: output differs from the table:\ngot  %+v\nwant %+v", sample, s.buf, w)
		}
		if rng.Intn(8) == 0 { // a caller that reorders the sample
			rng.Shuffle(len(s.buf), func(i, j int) { s.buf[i], s.buf[j] = s.buf[j], s.buf[i] })
		}
	}
}

// TestFullWalkSpread reads a full walk three records a sample: every
// sample while it runs has every flow, sockets opened and closed meanwhile
// come and go, a flow whose socket no longer exists (a close the sampler
// missed) stays until the walk ends and goes then, and the table ends as
// sock_diag sees the namespace.
func TestFullWalkSpread(t *testing.T) {
	testutil.RequireRoot(t)
	requireTracker(t)
	ns := testutil.NewNetNS(t)
	var ln net.Listener
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		if ln != nil {
			ln.Close()
		}
	})
	ns.Do(t, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err })
	pair := func() {
		ns.Do(t, func() error {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return err
			}
			s, err := ln.Accept()
			if err != nil {
				c.Close()
				return err
			}
			conns = append(conns, c, s)
			return nil
		})
	}
	for range 20 {
		pair()
	}
	s := newSampler(t, Config{NetNS: ns.Handle, Backend: BackendTrack})
	tk := s.track
	tk.walkChunk = 3
	cookies := func(fl []Flow) map[uint64]bool {
		m := map[uint64]bool{}
		for _, f := range fl {
			m[f.Cookie] = true
		}
		return m
	}
	fl, err := s.Sample()
	if err != nil || len(fl) != 40 {
		t.Fatalf("first sample: %d flows, %v; want 40", len(fl), err)
	}
	// The first two connections close while the walk runs; the others are
	// kept.
	kept := cookies(fl)
	var closing []uint64
	for _, f := range fl {
		for _, c := range conns[:4] {
			if f.Src == c.LocalAddr().String() && f.Dst == c.RemoteAddr().String() {
				closing = append(closing, f.Cookie)
				delete(kept, f.Cookie)
			}
		}
	}
	if len(kept) != 36 || len(closing) != 4 {
		t.Fatalf("first sample: %d flows kept, %d closing; want 36 and 4", len(kept), len(closing))
	}
	const missed = 1<<63 | 12345 // no socket has it
	tk.pos[missed] = len(tk.flows)
	tk.flows = append(tk.flows, Flow{Cookie: missed})
	tk.upd = append(tk.upd, s.gen)
	tk.resync = true
	samples := 0
	for {
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		samples++
		have := cookies(fl)
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
			for _, c := range conns[:4] {
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
	diag := newSampler(t, Config{NetNS: ns.Handle, Backend: BackendDiag})
	var got, want map[uint64]bool
	for range 250 { // 5 s at most
		fl, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		got = cookies(fl)
		dl, err := diag.Sample()
		if err != nil {
			t.Fatal(err)
		}
		want = cookies(dl)
		if maps.Equal(got, want) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
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
