// track_test.go: the tracked sampler's output, which rewrites only the
// flows that changed, equals a full copy of its table after any sequence
// of changes, new and closed flows, samples that failed before the output,
// and samples the caller reordered.
package tcpmon

import (
	"math/rand"
	"reflect"
	"testing"
	"time"
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
