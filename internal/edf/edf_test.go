// edf_test.go: hand-checked cases, a brute-force oracle from the paper's
// definitions, and the differential test of lanes-rtd's queue (rtd/queue.c)
// against the Reference (random operations, seeds logged).
package edf

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

func impls(t *testing.T) map[string]func() Queue {
	return map[string]func() Queue{
		"reference": func() Queue { return NewReference() },
		"rtd":       func() Queue { return newRtdQueue(t) },
		"rtd4":      func() Queue { return newRtdQueue(t, "-DEDFB=4") }, // blocks split and go often
	}
}

// oracleFeasible decides admission straight from definitions (1)-(2): insert
// p into a copy of the deadline-ordered queue and check that p and every
// packet behind it finish by their deadlines starting at now. (Packets ahead
// of p are not delayed by it; if time has already made one of them late,
// that is Pop's business, not a reason to refuse p.)
func oracleFeasible(q []Packet, now int64, p Packet) bool {
	all := append(slices.Clone(q), p)
	slices.SortStableFunc(all, func(a, b Packet) int {
		switch {
		case a.Deadline < b.Deadline:
			return -1
		case a.Deadline > b.Deadline:
			return 1
		}
		return 0
	})
	t, behind := now, false
	for _, x := range all {
		t += x.Tx
		behind = behind || x == p
		if behind && t > x.Deadline {
			return false
		}
	}
	return true
}

func TestHandCases(t *testing.T) {
	for name, mk := range impls(t) {
		t.Run(name, func(t *testing.T) {
			q := mk()
			// Empty queue: own deadline only.
			if d := q.Admit(0, Packet{ID: 1, Deadline: 100, Tx: 10}); !d.OK {
				t.Fatalf("first packet refused: %v", d.Reason)
			}
			if d := q.Admit(0, Packet{ID: 2, Deadline: 5, Tx: 10}); d.OK || d.Reason != OwnDeadline {
				t.Fatalf("packet that cannot make its own deadline: got %+v", d)
			}
			// p1 (D=100,T=10) has M=90. A packet before it with T=91 would
			// push p1 to finish at 101.
			if d := q.Admit(0, Packet{ID: 3, Deadline: 95, Tx: 91}); d.OK || d.Reason != Displaces {
				t.Fatalf("displacing packet: got %+v", d)
			}
			if d := q.Admit(0, Packet{ID: 4, Deadline: 95, Tx: 90}); !d.OK {
				t.Fatalf("exactly fitting packet refused: %v", d.Reason)
			}
			// Now p4 finishes at 90, p1 at 100: zero slack everywhere.
			if d := q.Admit(0, Packet{ID: 5, Deadline: 1000, Tx: 1}); !d.OK {
				t.Fatalf("packet at the end refused: %v", d.Reason)
			}
			if d := q.Admit(0, Packet{ID: 6, Deadline: 100, Tx: 1}); d.OK {
				t.Fatalf("tie after a zero-slack packet admitted")
			}
			// Time passing makes the queue late: the head is flagged.
			p, late, ok := q.Pop(6) // 6 + 90 > 95
			if !ok || p.ID != 4 || !late {
				t.Fatalf("pop at 6: got %+v late=%v ok=%v, want id 4 late", p, late, ok)
			}
			p, late, _ = q.Pop(90)
			if p.ID != 1 || late {
				t.Fatalf("pop at 90: got %+v late=%v, want id 1 on time", p, late)
			}
			p, _, _ = q.Pop(100)
			if p.ID != 5 || q.Len() != 0 {
				t.Fatalf("pop at 100: got %+v len %d", p, q.Len())
			}
			if _, _, ok := q.Pop(100); ok {
				t.Fatal("pop of empty queue")
			}
			if d := q.Admit(0, Packet{Deadline: 1, Tx: 0}); d.OK || d.Reason != Invalid {
				t.Fatalf("zero Tx admitted: %+v", d)
			}
		})
	}
}

func TestTiesAreFIFO(t *testing.T) {
	for name, mk := range impls(t) {
		t.Run(name, func(t *testing.T) {
			q := mk()
			for i := 1; i <= 50; i++ {
				q.Admit(0, Packet{ID: uint64(i), Deadline: 1 << 40, Tx: 1})
			}
			for i := 1; i <= 50; i++ {
				p, _, _ := q.Pop(int64(i))
				if p.ID != uint64(i) {
					t.Fatalf("pop %d: got id %d", i, p.ID)
				}
			}
		})
	}
}

// workload is a random mix of admissions, dequeues and T_now moves. Its knobs
// vary per seed so that empty, shallow, deep, overloaded and tie-heavy
// queues all occur.
type workload struct {
	rng      *rand.Rand
	now      int64
	pAdmit   float64
	maxTx    int64
	maxSlack int64
	quantum  int64 // deadlines rounded to this (ties when large)
	jitter   int64 // T_now moves backwards by up to this sometimes
}

func newWorkload(seed uint64) *workload {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &workload{
		rng:      r,
		now:      int64(r.IntN(1 << 40)),
		pAdmit:   0.35 + 0.4*r.Float64(),
		maxTx:    1 + int64(r.IntN(2000)),
		maxSlack: 1 + int64(r.IntN(200000)),
		quantum:  []int64{1, 1, 100, 5000}[r.IntN(4)],
		jitter:   []int64{0, 0, 50}[r.IntN(3)],
	}
}

type op struct {
	admit bool
	now   int64
	p     Packet
}

func (w *workload) next(id uint64) op {
	r := w.rng
	switch x := r.Float64(); {
	case x < 0.1:
		w.now += int64(r.IntN(int(w.maxTx) * 4))
	case x < 0.12 && w.jitter > 0:
		w.now -= int64(r.IntN(int(w.jitter)))
	}
	if r.Float64() < w.pAdmit {
		tx := 1 + int64(r.IntN(int(w.maxTx)))
		d := w.now + int64(r.IntN(int(w.maxSlack)))
		d -= d % w.quantum
		return op{admit: true, now: w.now, p: Packet{ID: id, Deadline: d, Tx: tx}}
	}
	return op{now: w.now}
}

// runDifferential applies n operations of one seed to the Reference and
// lanes-rtd's queue and fails on the first differing decision, dequeue,
// length, backlog or slack M_1.
type diffStats struct{ admits, rejects, pops, late, maxDepth int }

func runDifferential(t *testing.T, seed uint64, n int, checkEvery int) (s diffStats) {
	t.Helper()
	w := newWorkload(seed)
	ref, rtd := NewReference(), newRtdQueue(t)
	if seed%2 == 1 {
		rtd = newRtdQueue(t, "-DEDFB=4") // tiny blocks: splits and drains all the time
	}
	var shadow []Packet // for the oracle
	for i := 0; i < n; i++ {
		o := w.next(uint64(i))
		o.admit = o.admit && ref.Len() < driverCap-1
		if o.admit {
			dr := ref.Admit(o.now, o.p)
			dc := rtd.Admit(o.now, o.p)
			if dr != dc {
				t.Fatalf("seed %d op %d: admit %+v at %d: reference %+v, lanes-rtd %+v", seed, i, o.p, o.now, dr, dc)
			}
			if checkEvery > 0 && i%checkEvery == 0 {
				if want := oracleFeasible(shadow, o.now, o.p); want != dr.OK {
					t.Fatalf("seed %d op %d: oracle says %v, reference %+v", seed, i, want, dr)
				}
			}
			if dr.OK {
				s.admits++
				shadow = append(shadow, o.p)
				s.maxDepth = max(s.maxDepth, len(shadow))
			} else {
				s.rejects++
			}
		} else {
			pr, lr, okr := ref.Pop(o.now)
			pc, lc, okc := rtd.Pop(o.now)
			if pr != pc || lr != lc || okr != okc {
				t.Fatalf("seed %d op %d: pop at %d: reference %+v/%v/%v, lanes-rtd %+v/%v/%v", seed, i, o.now, pr, lr, okr, pc, lc, okc)
			}
			if !okr {
				continue
			}
			s.pops++
			if lr {
				s.late++
			}
			j := slices.IndexFunc(shadow, func(p Packet) bool { return p.ID == pr.ID })
			shadow = slices.Delete(shadow, j, j+1)
			if !lr {
				// Sent: the link is busy for T_1 more.
				w.now = max(w.now, o.now+pr.Tx)
			}
		}
		if ref.Len() != rtd.Len() || ref.Backlog() != rtd.Backlog() {
			t.Fatalf("seed %d op %d: len/backlog %d/%d vs lanes-rtd %d/%d", seed, i, ref.Len(), ref.Backlog(), rtd.Len(), rtd.Backlog())
		}
		if ref.Len() > 0 {
			if m := ref.slack(o.now)[0]; m != rtd.slack {
				t.Fatalf("seed %d op %d: M_1 at %d: reference %d, lanes-rtd %d", seed, i, o.now, m, rtd.slack)
			}
		}
	}
	return
}

// TestRtdQueueMatchesReference: 8 seeds x 25,000 operations with identical
// admit/reject decisions (and reasons), dequeue order, late flags, lengths,
// backlogs and slack M_1, plus a brute-force oracle every 97 operations.
// Seeds are logged; LANES_EDF_SEED replays one.
func TestRtdQueueMatchesReference(t *testing.T) {
	const seeds, perSeed = 8, 25_000
	base := uint64(rand.Int64())
	if v := os.Getenv("LANES_EDF_SEED"); v != "" {
		b, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LANES_EDF_SEED: %v", err)
		}
		base = b
	}
	t.Logf("base seed %d (seeds base..base+%d)", base, seeds-1)
	var sum diffStats
	for k := uint64(0); k < seeds; k++ {
		s := runDifferential(t, base+k, perSeed, 97)
		sum.admits += s.admits
		sum.rejects += s.rejects
		sum.pops += s.pops
		sum.late += s.late
		sum.maxDepth = max(sum.maxDepth, s.maxDepth)
	}
	t.Logf("%d operations: %d admitted, %d rejected, %d dequeued (%d late), max depth %d",
		seeds*perSeed, sum.admits, sum.rejects, sum.pops, sum.late, sum.maxDepth)
	if sum.admits == 0 || sum.rejects == 0 || sum.pops == 0 || sum.late == 0 {
		t.Fatalf("degenerate workload: %+v", sum)
	}
}

// TestRtdQueueFixedSeeds keeps a few seeds that are always run.
func TestRtdQueueFixedSeeds(t *testing.T) {
	for _, s := range []uint64{1, 2, 3, 42, 1 << 33} {
		runDifferential(t, s, 10_000, 13)
	}
}
