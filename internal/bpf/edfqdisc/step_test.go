// step_test.go checks edf_core.h, run by the kernel (edf_step.c through
// BPF_PROG_TEST_RUN), against internal/edf's reference: seeded random
// sequences of admissions and dequeues with identical decisions (and
// reasons), dequeue order and late flags; a full ring refuses with
// EDF_FULL and changes nothing.
package edfqdisc

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/edf"
	"github.com/lanes-net/lanes/internal/testutil"
)

// Values of edf_core.h's enum edf_reason and EDF_CAP.
const (
	reasonFull = 4
	ringCap    = 128
)

// kernelQueue is an edf_core.h queue operated by the kernel.
type kernelQueue struct {
	t    *testing.T
	prog *ebpf.Program
	m    *ebpf.Map
	s    StepEdfStep
}

func newKernelQueue(t *testing.T) *kernelQueue {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	var objs StepObjects
	if err := LoadStepObjects(&objs, nil); err != nil {
		t.Fatalf("load edf_step: %v", err)
	}
	t.Cleanup(func() { objs.Close() })
	return &kernelQueue{t: t, prog: objs.EdfRun, m: objs.LanesEdfStep}
}

func (k *kernelQueue) run() {
	k.t.Helper()
	if err := k.m.Put(uint32(0), k.s); err != nil {
		k.t.Fatal(err)
	}
	// A socket filter's test run wants at least an Ethernet header; the
	// program reads only the map.
	ret, err := k.prog.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
	if err != nil || ret != 0 {
		k.t.Fatalf("edf_step op %d: ret %d, %v", k.s.Op, ret, err)
	}
	if err := k.m.Lookup(uint32(0), &k.s); err != nil {
		k.t.Fatal(err)
	}
}

// admit returns the kernel's edf_reason for p at now.
func (k *kernelQueue) admit(now int64, p edf.Packet) int32 {
	k.s.Op, k.s.Now = 0, now
	k.s.In.D, k.s.In.Tx, k.s.In.Id = p.Deadline, p.Tx, p.ID
	k.run()
	return k.s.Ret
}

// pop returns the kernel's head, its late flag and whether there was one.
func (k *kernelQueue) pop(now int64) (edf.Packet, bool, bool) {
	k.s.Op, k.s.Now = 1, now
	k.run()
	if k.s.Ret < 0 {
		return edf.Packet{}, false, false
	}
	return edf.Packet{ID: k.s.Out.Id, Deadline: k.s.Out.D, Tx: k.s.Out.Tx}, k.s.Ret == 1, true
}

type stats struct{ admits, displaces, own, full, pops, late, maxDepth int }

// runSeed applies n random operations of one seed to the kernel queue and
// the reference and fails on the first difference. The workload's shape
// (admission share, transmit times, slack, deadline quantum for ties) is
// drawn from the seed, as in internal/edf's differential test.
func runSeed(t *testing.T, k *kernelQueue, seed uint64, n int) (s stats) {
	t.Helper()
	k.s = StepEdfStep{}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	now := int64(r.IntN(1 << 40))
	pAdmit := 0.35 + 0.45*r.Float64()
	maxTx := 1 + int64(r.IntN(2000))
	maxSlack := 1 + int64(r.IntN(300000))
	quantum := []int64{1, 1, 100, 5000}[r.IntN(4)]
	ref := edf.NewReference()
	for i := range n {
		if r.Float64() < 0.1 {
			now += int64(r.IntN(int(maxTx) * 4))
		}
		if r.Float64() < pAdmit {
			d := now + int64(r.IntN(int(maxSlack)))
			d -= d % quantum
			p := edf.Packet{ID: uint64(i), Deadline: d, Tx: 1 + int64(r.IntN(int(maxTx)))}
			got := k.admit(now, p)
			if ref.Len() == ringCap {
				if got != reasonFull {
					t.Fatalf("seed %d op %d: full ring, kernel says %d", seed, i, got)
				}
				s.full++
				continue
			}
			want := ref.Admit(now, p)
			if got != int32(want.Reason) {
				t.Fatalf("seed %d op %d: admit %+v at %d: kernel %d, reference %v", seed, i, p, now, got, want.Reason)
			}
			switch want.Reason {
			case edf.Admitted:
				s.admits++
			case edf.Displaces:
				s.displaces++
			case edf.OwnDeadline:
				s.own++
			}
			s.maxDepth = max(s.maxDepth, ref.Len())
		} else {
			pk, lk, okk := k.pop(now)
			pr, lr, okr := ref.Pop(now)
			if pk != pr || lk != lr || okk != okr {
				t.Fatalf("seed %d op %d: pop at %d: kernel %+v/%v/%v, reference %+v/%v/%v", seed, i, now, pk, lk, okk, pr, lr, okr)
			}
			if okr {
				s.pops++
				if lr {
					s.late++
				} else {
					now += pr.Tx // sent: the link is busy for T_1
				}
			}
		}
		if int(k.s.Q.N) != ref.Len() || k.s.Q.Backlog != ref.Backlog() {
			t.Fatalf("seed %d op %d: kernel len/backlog %d/%d, reference %d/%d", seed, i, k.s.Q.N, k.s.Q.Backlog, ref.Len(), ref.Backlog())
		}
	}
	return s
}

// TestDifferential: 16 seeds x 2,500 operations through the kernel (three
// system calls each: minutes in the VM under TCG). Seeds
// are logged; LANES_EDF_SEED replays one base.
func TestDifferential(t *testing.T) {
	k := newKernelQueue(t)
	const seeds, perSeed = 16, 2500
	base := uint64(rand.Int64())
	if v := os.Getenv("LANES_EDF_SEED"); v != "" {
		b, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LANES_EDF_SEED: %v", err)
		}
		base = b
	}
	t.Logf("base seed %d (seeds base..base+%d)", base, seeds-1)
	var sum stats
	for s := range uint64(seeds) {
		x := runSeed(t, k, base+s, perSeed)
		sum.admits += x.admits
		sum.displaces += x.displaces
		sum.own += x.own
		sum.full += x.full
		sum.pops += x.pops
		sum.late += x.late
		sum.maxDepth = max(sum.maxDepth, x.maxDepth)
	}
	t.Logf("%d operations: %+v", seeds*perSeed, sum)
	if sum.admits == 0 || sum.displaces == 0 || sum.own == 0 || sum.pops == 0 || sum.late == 0 {
		t.Fatalf("degenerate workload: %+v", sum)
	}
}

// TestFixedSeeds keeps a few seeds that are always run.
func TestFixedSeeds(t *testing.T) {
	k := newKernelQueue(t)
	for _, s := range []uint64{1, 2, 3, 42, 1 << 33} {
		runSeed(t, k, s, 1500)
	}
}

// TestFullRing: EDF_CAP feasible packets fill the ring; the next is refused
// with EDF_FULL and the queue is unchanged; after one dequeue it is admitted.
func TestFullRing(t *testing.T) {
	k := newKernelQueue(t)
	for i := range ringCap {
		// Reverse deadline order: every insertion shifts the whole ring.
		p := edf.Packet{ID: uint64(i), Deadline: int64(1e9 - i*1000), Tx: 10}
		if got := k.admit(0, p); got != int32(edf.Admitted) {
			t.Fatalf("packet %d: %d", i, got)
		}
	}
	before := k.s.Q
	if got := k.admit(0, edf.Packet{ID: 999, Deadline: 2e9, Tx: 10}); got != reasonFull {
		t.Fatalf("full ring: %d, want %d", got, reasonFull)
	}
	if k.s.Q != before {
		t.Fatal("a refused packet changed the ring")
	}
	p, late, ok := k.pop(0)
	if !ok || late || p.ID != ringCap-1 {
		t.Fatalf("head %+v late %v ok %v, want id %d on time", p, late, ok, ringCap-1)
	}
	if got := k.admit(0, edf.Packet{ID: 999, Deadline: 2e9, Tx: 10}); got != int32(edf.Admitted) {
		t.Fatalf("after a dequeue: %d", got)
	}
}

// TestBoundaries: the equalities of (4) and of the own deadline admit, one
// nanosecond more refuses, in the kernel as in the reference.
func TestBoundaries(t *testing.T) {
	k := newKernelQueue(t)
	ref := edf.NewReference()
	cases := []struct {
		now  int64
		p    edf.Packet
		want edf.Reason
	}{
		{0, edf.Packet{ID: 1, Deadline: 100, Tx: 10}, edf.Admitted},   // M_1 = 90
		{0, edf.Packet{ID: 2, Deadline: 95, Tx: 91}, edf.Displaces},   // T = M_1 + 1
		{0, edf.Packet{ID: 3, Deadline: 89, Tx: 90}, edf.OwnDeadline}, // D - T = -1
		{0, edf.Packet{ID: 4, Deadline: 90, Tx: 90}, edf.Admitted},    // T = M_1, D - T = 0
		{0, edf.Packet{ID: 5, Deadline: 100, Tx: 1}, edf.OwnDeadline}, // behind both: 100 - 1 - 100 < 0
		{0, edf.Packet{ID: 6, Deadline: 101, Tx: 1}, edf.Admitted},    // tie-free tail, exactly on time
	}
	for _, c := range cases {
		got, want := k.admit(c.now, c.p), ref.Admit(c.now, c.p)
		if want.Reason != c.want || got != int32(c.want) {
			t.Fatalf("%+v: kernel %d, reference %v, want %v", c.p, got, want.Reason, c.want)
		}
	}
	for _, id := range []uint64{4, 1, 6} {
		if p, late, ok := k.pop(0); !ok || p.ID != id || late {
			t.Fatalf("pop: %+v late %v ok %v, want id %d", p, late, ok, id)
		}
	}
}
