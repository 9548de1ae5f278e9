/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * edf_core.h - the realtime lane's EDF queue with the paper's admission
 * test (docs/papers.md §003), in integer arithmetic for BPF: no floats, loops
 * bounded by EDF_CAP, indexes masked. The same decisions as internal/edf
 * (its Reference is the specification; edf_step.c runs this header through
 * BPF_PROG_TEST_RUN and the package's test compares it decision by
 * decision).
 *
 * Model (internal/edf/edf.go): packet j has a deadline D_j and a transmit
 * time T_j; the queue is in deadline order, ties first come first served;
 * T_now is the earliest time the head can start. With C_k the sum of T up to
 * and including p_k, the slack is M_j = min_{k>=j} (D_k - C_k) - T_now. A
 * packet inserted before p_i (the first with D_i > D_ins) is admitted iff
 *   (4)  T_ins <= M_i           (no queued packet becomes late), and
 *   (1)  D_ins - T_ins - (T_now + sum_{k<i} T_k) >= 0   (its own deadline).
 * Nothing stores M: one pass over the queue computes the prefix sum before
 * p_i and min(D_k - C_k) after it, which is what the Go Tree does per block
 * (a moved T_now or a dequeue changes no stored value).
 *
 * Data structure: a ring of EDF_CAP entries (a power of two) from head,
 * n of them in deadline order. Admission is one pass over n entries,
 * insertion shifts the entries after the insertion point by one, a dequeue
 * advances head. EDF_FULL is a refusal internal/edf does not have: the
 * ring's capacity.
 *
 * Note: the caller serialises access (the qdisc's root lock, or one test
 * run at a time), and the queue must live in map memory (a map value or a
 * global): the pass keeps its running sums in the queue's scratch fields
 * through volatile accesses, so the verifier sees unknown scalars there and
 * prunes each iteration to one state. Kept in registers, the sums made
 * every branch of every iteration a distinct state: 2^n paths, and the
 * program was refused after 1,000,000 instructions with EDF_CAP 128.
 */
#ifndef EDF_CORE_H
#define EDF_CORE_H

#include <linux/types.h>

#ifndef EDF_CAP
#define EDF_CAP 128
#endif
#define EDF_MASK (EDF_CAP - 1)
#define EDF_INF 0x7fffffffffffffffLL

_Static_assert((EDF_CAP & EDF_MASK) == 0, "EDF_CAP must be a power of two");

/* Decisions: the values of internal/edf's Reason, then the ring's own. */
enum edf_reason {
	EDF_ADMITTED = 0,
	EDF_DISPLACES = 1,    /* T_ins > M_i: a queued packet would be late */
	EDF_OWN_DEADLINE = 2, /* M'_ins < 0: it cannot make its own deadline */
	EDF_INVALID = 3,      /* T <= 0 */
	EDF_FULL = 4,         /* EDF_CAP packets queued */
};

struct edf_ent {
	__s64 d;  /* deadline, ns */
	__s64 tx; /* time on the wire, ns */
	__u64 id; /* opaque to the queue */
};

/* The admission pass's running values (see the Note). */
struct edf_scan {
	__s64 c;   /* C_k */
	__s64 acc; /* sum of T of the packets with D <= d */
	__s64 suf; /* min(D_k - C_k) over the packets with D > d */
	__u32 i;   /* the insertion point */
	__u32 pad;
};

struct edf_queue {
	__u32 head; /* ring index of the earliest deadline */
	__u32 n;
	__s64 backlog; /* sum of T */
	struct edf_scan scan;
	struct edf_ent e[EDF_CAP];
};

/* edf_admit tests a packet (deadline d, transmit time tx) with the head able
 * to start at now and inserts it if admitted; it returns an edf_reason. */
static __always_inline int edf_admit(struct edf_queue *q, __s64 now, __s64 d, __s64 tx, __u64 id)
{
	volatile struct edf_scan *sc = &q->scan;
	__u32 n = q->n, head = q->head, i, k;
	__s64 acc, suf;

	if (tx <= 0)
		return EDF_INVALID;
	if (n >= EDF_CAP)
		return EDF_FULL;
	/* One pass: acc = sum of T through the last packet with D <= d (i
	 * packets), suf = min(D_k - C_k) over the packets after it. */
	sc->c = 0;
	sc->acc = 0;
	sc->suf = EDF_INF;
	sc->i = 0;
#pragma clang loop unroll(disable)
	for (k = 0; k < EDF_CAP; k++) {
		struct edf_ent *x;
		__s64 c;

		if (k >= n)
			break;
		x = &q->e[(head + k) & EDF_MASK];
		c = sc->c + x->tx;
		sc->c = c;
		if (x->d <= d) {
			sc->acc = c;
			sc->i = k + 1;
		} else if (x->d - c < sc->suf) {
			sc->suf = x->d - c;
		}
	}
	acc = sc->acc;
	suf = sc->suf;
	i = sc->i;
	/* (4): T_ins <= M_i = suf - T_now. */
	if (suf != EDF_INF && tx > suf - now)
		return EDF_DISPLACES;
	/* Own deadline, (1) for p_ins. */
	if (d - tx - now - acc < 0)
		return EDF_OWN_DEADLINE;
	/* Insert at i: the entries i..n-1 move one place back. */
#pragma clang loop unroll(disable)
	for (k = 0; k < EDF_CAP; k++) {
		__u32 to = n - k;

		if (to <= i)
			break;
		q->e[(head + to) & EDF_MASK] = q->e[(head + to - 1) & EDF_MASK];
	}
	q->e[(head + i) & EDF_MASK].d = d;
	q->e[(head + i) & EDF_MASK].tx = tx;
	q->e[(head + i) & EDF_MASK].id = id;
	q->n = n + 1;
	q->backlog += tx;
	return EDF_ADMITTED;
}

/* edf_peek returns the earliest-deadline entry, or NULL when empty. */
static __always_inline struct edf_ent *edf_peek(struct edf_queue *q)
{
	if (!q->n)
		return 0;
	return &q->e[q->head & EDF_MASK];
}

/* edf_late says that starting x at now finishes after its deadline. */
static __always_inline int edf_late(const struct edf_ent *x, __s64 now)
{
	return x->d - x->tx - now < 0;
}

/* edf_pop removes the head into *out; it returns -1 when empty, else 1 if
 * the head is late starting at now (the caller drops and reports it), 0 if
 * it is on time. */
static __always_inline int edf_pop(struct edf_queue *q, __s64 now, struct edf_ent *out)
{
	struct edf_ent *x = edf_peek(q);

	if (!x)
		return -1;
	*out = *x;
	q->head = (q->head + 1) & EDF_MASK;
	q->n--;
	q->backlog -= out->tx;
	return edf_late(out, now);
}

#endif /* EDF_CORE_H */
