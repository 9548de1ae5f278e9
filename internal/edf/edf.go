// Package edf is the deadline queue of the realtime lane: earliest-deadline-
// first ordering with admission control, after Nomura and Ishikawa,
// "Communication control of real-time packets" (docs/papers.md). Pure Go,
// no I/O, no clocks: every operation is given T_now by the caller.
//
// Model. Each queued packet j has a transmit time T_j (its size over the link
// rate) and a deadline D_j by which its transmission must be complete. The
// queue R = p_1..p_n is kept in deadline order (ties: first come first
// served). T_now is the earliest time the head packet can start on the wire;
// the caller includes in it what cannot be preempted: the rest of the packet
// now on the wire and the device backlog. The paper's slack is
//
//	M'_j = (D_j - T_j) - (T_now + sum_{k<j} T_k)      (1)
//	M_j  = min_{k>=j} M'_k                             (2)
//
// and a new packet inserted before p_i (D_{i-1} <= D_ins < D_i) keeps every
// queued packet on time iff T_ins <= M_i (4). The new packet must also meet
// its own deadline, M'_ins >= 0: the paper's §2.4 rejects a packet when any
// packet "including p_ins" would be late, though (4) alone does not say so.
//
// The Reference here is the paper exactly as written: a deadline-sorted
// array with stored M values and the O(n) update of §2.3 (decrement,
// equation (5), backward propagation). It is the executable specification:
// lanes-rtd's queue (rtd/queue.c, sorted blocks under a segment tree,
// O(log n)) and the kernel path's edf_core.h are tested against it
// decision by decision.
//
// Operations:
//   - Admit(now, p): feasibility test and, if feasible, insertion.
//   - Pop(now): remove the head; it is flagged Late if it can no longer be
//     transmitted by its deadline starting at now (the caller drops it and
//     reports it; it is never sent late in silence).
//
// Non-goals: preemption of a packet on the wire, several links, and packet
// removal other than at the head.
package edf

import "fmt"

// Packet is one realtime datagram as the scheduler sees it. Times are in
// nanoseconds on one clock (rtlane uses CLOCK_MONOTONIC).
type Packet struct {
	ID       uint64 // opaque to edf, returned by Pop
	Deadline int64  // D: transmission complete by this time
	Tx       int64  // T: time on the wire, > 0
}

// Reason says why a packet was refused.
type Reason uint8

const (
	Admitted Reason = iota
	// Displaces: T_ins > M_i, admitting it would make a queued packet late.
	Displaces
	// OwnDeadline: M'_ins < 0, it cannot itself be sent in time.
	OwnDeadline
	// Invalid: Tx <= 0.
	Invalid
)

func (r Reason) String() string {
	switch r {
	case Admitted:
		return "admitted"
	case Displaces:
		return "would-make-others-late"
	case OwnDeadline:
		return "own-deadline-unmeetable"
	case Invalid:
		return "invalid"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Decision is the result of Admit.
type Decision struct {
	OK     bool
	Reason Reason
}

// Queue is what the Reference offers, and its tests' adapters of the C.
type Queue interface {
	// Admit tests p against the queue with the head able to start at now
	// and inserts it if every packet, p included, stays on time.
	Admit(now int64, p Packet) Decision
	// Pop removes the earliest-deadline packet. late reports that starting
	// it at now finishes after its deadline.
	Pop(now int64) (p Packet, late bool, ok bool)
	// Peek returns the earliest-deadline packet without removing it.
	Peek() (Packet, bool)
	// Len is the number of queued packets.
	Len() int
	// Backlog is the sum of T over the queue.
	Backlog() int64
}

var _ Queue = (*Reference)(nil)
