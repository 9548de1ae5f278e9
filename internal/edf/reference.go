// reference.go: the paper's algorithm exactly as written (§2.2–2.4), an
// array in deadline order with the slack M stored per packet and the O(n)
// update on insert. It is the specification lanes-rtd's queue (rtd/queue.c)
// and the kernel path's edf_core.h are tested against.
package edf

import "sort"

type refEntry struct {
	p Packet
	m int64 // M_j relative to base
}

// Reference is the O(n) EDF queue of the paper. The zero value is empty.
type Reference struct {
	q    []refEntry
	base int64 // the T_now the stored M values refer to
	sumT int64
}

// NewReference returns an empty reference queue.
func NewReference() *Reference { return &Reference{} }

// advance moves T_now: by (1) every M'_j, hence every M_j, drops by the
// amount T_now grows.
func (r *Reference) advance(now int64) {
	d := now - r.base
	if d == 0 {
		return
	}
	for j := range r.q {
		r.q[j].m -= d
	}
	r.base = now
}

func (r *Reference) Admit(now int64, p Packet) Decision {
	if p.Tx <= 0 {
		return Decision{Reason: Invalid}
	}
	r.advance(now)
	n := len(r.q)
	// Insert between p_{i-1} and p_i with D_{i-1} <= D_ins < D_i.
	i := sort.Search(n, func(j int) bool { return r.q[j].p.Deadline > p.Deadline })
	// (4): T_ins <= M_i. With no p_i nothing is displaced.
	if i < n && p.Tx > r.q[i].m {
		return Decision{Reason: Displaces}
	}
	// Provisional M'_ins: (5) from the predecessor when there is one,
	// M'_ins = D_ins - (D_{i-1} - M_{i-1}) - T_ins, else (1) with an empty
	// prefix. (5) is exact when M_{i-1} = M'_{i-1}; otherwise M_{i-1} = M_i
	// and (5) is >= M_i - T_ins, so the propagation below overrides it.
	var mIns int64
	if i > 0 {
		prev := r.q[i-1]
		mIns = p.Deadline - (prev.p.Deadline - prev.m) - p.Tx
	} else {
		mIns = (p.Deadline - p.Tx) - r.base
	}
	// Own deadline: with (4) holding, mIns < 0 only if M'_ins < 0.
	if mIns < 0 {
		return Decision{Reason: OwnDeadline}
	}
	// Accepted (§2.3): every later packet is delayed by T_ins.
	for j := i; j < n; j++ {
		r.q[j].m -= p.Tx
	}
	r.q = append(r.q, refEntry{})
	copy(r.q[i+1:], r.q[i:])
	r.q[i] = refEntry{p: p, m: mIns}
	r.sumT += p.Tx
	// Restore (3) M_j <= M_{j+1} walking backwards from p_ins until it holds
	// for a predecessor.
	for j := i; j >= 0; j-- {
		if j+1 < len(r.q) && r.q[j].m > r.q[j+1].m {
			r.q[j].m = r.q[j+1].m
		} else if j < i {
			break
		}
	}
	return Decision{OK: true, Reason: Admitted}
}

func (r *Reference) Pop(now int64) (Packet, bool, bool) {
	if len(r.q) == 0 {
		return Packet{}, false, false
	}
	r.advance(now)
	h := r.q[0].p
	// §2.6: check the head still meets its deadline: M'_1 >= 0.
	late := (h.Deadline-h.Tx)-r.base < 0
	copy(r.q, r.q[1:])
	r.q = r.q[:len(r.q)-1]
	r.sumT -= h.Tx
	// The rest now starts T_1 later than the head did: relative to
	// base + T_1 their M values are unchanged.
	r.base += h.Tx
	return h, late, true
}

func (r *Reference) Peek() (Packet, bool) {
	if len(r.q) == 0 {
		return Packet{}, false
	}
	return r.q[0].p, true
}

func (r *Reference) Len() int       { return len(r.q) }
func (r *Reference) Backlog() int64 { return r.sumT }

// slack returns M_j for every queued packet at T_now = now (for tests).
func (r *Reference) slack(now int64) []int64 {
	r.advance(now)
	out := make([]int64, len(r.q))
	for j := range r.q {
		out[j] = r.q[j].m
	}
	return out
}
