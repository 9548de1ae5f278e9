/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * queue.c - the realtime lane's EDF queue, its cost flat in its depth: the
 * decisions of edf_core.h (the paper's test, internal/edf's Reference),
 * ties first come first served.
 *
 * With C_k the sum of T up to and including p_k, a packet inserted before
 * p_i (the first with D_i > D_ins) is admitted iff
 *   (4)  T_ins <= min_{k>=i} (D_k - C_k) - T_now, and
 *   (1)  D_ins - T_ins - (T_now + sum_{k<i} T_k) >= 0.
 *
 * Structure: sorted blocks of at most EDFB entries, kept in deadline
 * order (ord), each with its sum of T and its min(D_k - C_k), C_k summed
 * within the block. A segment tree over the blocks' positions combines
 * them in order: (sum, min) of a range then the next is
 * (s1 + s2, min(m1, m2 - s1)). An admission finds its block by binary
 * search over the blocks' last deadlines, takes the T before it and the
 * minimum after it from the segment tree (O(log blocks)), and passes over
 * its one block: O(EDFB + log(n / EDFB)), the same pass at depth 100 as
 * at 16,384, where a tree's per-level cache misses made the deep queue
 * cost 5 times the shallow one. A full block splits in two halves; an
 * emptied head block goes; both rebuild the segment tree (O(blocks),
 * once per EDFB/2 operations at most). Only the head is ever removed, so
 * every block but the first holds at least EDFB/2 entries.
 *
 * A moved T_now changes nothing stored, as in edf_core.h, and M_1, the
 * whole queue's slack, is the segment tree's root. Nothing is allocated.
 * rtd/test/edf_diff.c runs it against internal/edf's Reference
 * (internal/rtlane's TestRtdQueueMatchesReference); make bench-rtd
 * measures it.
 */
#include <string.h>

#include "rtd.h"

/* comb is a range of (sum, min) followed by the range b. */
static struct edfq_seg comb(struct edfq_seg a, struct edfq_seg b)
{
	struct edfq_seg r = {.sum = a.sum + b.sum, .min = a.min};

	if (b.min != EDF_INF && b.min - a.sum < r.min)
		r.min = b.min - a.sum;
	return r;
}

static const struct edfq_seg none = {0, EDF_INF};

/* range is the combination of the blocks at positions [l, r). */
static struct edfq_seg range(const struct edfq *q, uint32_t l, uint32_t r)
{
	struct edfq_seg left = none, right = none;

	for (l += EDFB_SEG, r += EDFB_SEG; l < r; l >>= 1, r >>= 1) {
		if (l & 1)
			left = comb(left, q->seg[l++]);
		if (r & 1)
			right = comb(q->seg[--r], right);
	}
	return comb(left, right);
}

/* set_leaf stores the block at position pos in the segment tree. */
static void set_leaf(struct edfq *q, uint32_t pos)
{
	const struct edfq_block *b = &q->b[q->ord[pos]];
	uint32_t i = EDFB_SEG + pos;

	q->seg[i] = (struct edfq_seg){.sum = b->sum, .min = b->min};
	for (i >>= 1; i; i >>= 1)
		q->seg[i] = comb(q->seg[2 * i], q->seg[2 * i + 1]);
}

/* rebuild recomputes the segment tree after the blocks' order changed. */
static void rebuild(struct edfq *q)
{
	uint32_t i;

	for (i = 0; i < EDFB_SEG; i++)
		q->seg[EDFB_SEG + i] = i < q->nb ? (struct edfq_seg){q->b[q->ord[i]].sum, q->b[q->ord[i]].min} : none;
	for (i = EDFB_SEG - 1; i; i--)
		q->seg[i] = comb(q->seg[2 * i], q->seg[2 * i + 1]);
}

/* summarise recomputes a block's sum and min. */
static void summarise(struct edfq_block *b)
{
	int64_t c = 0, m = EDF_INF;
	uint32_t k;

	for (k = 0; k < b->n; k++) {
		c += b->tx[k];
		if (b->d[k] - c < m)
			m = b->d[k] - c;
	}
	b->sum = c;
	b->min = m;
}

/* locate is the position of the block a deadline d goes into: the first
 * whose last deadline is later, else the last. */
static uint32_t locate(const struct edfq *q, int64_t d)
{
	uint32_t lo = 0, hi = q->nb - 1;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct edfq_block *b = &q->b[q->ord[mid]];

		if (b->d[b->n - 1] > d)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* split halves the full block at position pos. */
static void split(struct edfq *q, uint32_t pos)
{
	struct edfq_block *a = &q->b[q->ord[pos]], *b;
	uint32_t nb = q->free[--q->nfree], h = EDFB / 2;

	b = &q->b[nb];
	b->n = a->n - h;
	memcpy(b->d, a->d + h, b->n * sizeof(b->d[0]));
	memcpy(b->tx, a->tx + h, b->n * sizeof(b->tx[0]));
	memcpy(b->id, a->id + h, b->n * sizeof(b->id[0]));
	a->n = h;
	summarise(a);
	summarise(b);
	memmove(q->ord + pos + 2, q->ord + pos + 1, (q->nb - pos - 1) * sizeof(q->ord[0]));
	q->ord[pos + 1] = nb;
	q->nb++;
	rebuild(q);
}

void edfq_init(struct edfq *q)
{
	uint32_t i;

	q->n = q->nb = 0;
	q->backlog = 0;
	q->nfree = 0;
	for (i = EDFB_MAX; i > 0; i--)
		q->free[q->nfree++] = i - 1;
	rebuild(q);
}

/* A block's pass for an insertion at d: where it goes (i), the sum of T
 * before it, and min(D_k - C_k) before and from it, C_k within the block. */
struct pass {
	uint32_t i;
	int64_t acc, pre, suf;
};

static struct pass pass_over(const struct edfq_block *b, int64_t d)
{
	struct pass p = {.pre = EDF_INF, .suf = EDF_INF};
	int64_t c = 0;
	uint32_t k;

	for (k = 0; k < b->n && b->d[k] <= d; k++) {
		c += b->tx[k];
		if (b->d[k] - c < p.pre)
			p.pre = b->d[k] - c;
	}
	p.i = k;
	p.acc = c;
	for (; k < b->n; k++) {
		c += b->tx[k];
		if (b->d[k] - c < p.suf)
			p.suf = b->d[k] - c;
	}
	return p;
}

/* put inserts (d, tx, id) at p.i of the block at position pos. */
static void put(struct edfq *q, uint32_t pos, const struct pass *p, int64_t d, int64_t tx, uint32_t id)
{
	struct edfq_block *b = &q->b[q->ord[pos]];
	uint32_t i = p->i, m = b->n - i;

	memmove(b->d + i + 1, b->d + i, m * sizeof(b->d[0]));
	memmove(b->tx + i + 1, b->tx + i, m * sizeof(b->tx[0]));
	memmove(b->id + i + 1, b->id + i, m * sizeof(b->id[0]));
	b->d[i] = d;
	b->tx[i] = tx;
	b->id[i] = id;
	b->n++;
	b->sum += tx;
	b->min = p->pre;
	if (d - (p->acc + tx) < b->min)
		b->min = d - (p->acc + tx);
	if (p->suf != EDF_INF && p->suf - tx < b->min)
		b->min = p->suf - tx;
	set_leaf(q, pos);
}

/* edfq_admit tests a packet (deadline d, transmit time tx) with the head
 * able to start at now and inserts it as entry id if admitted; it returns
 * an edf_reason. */
int edfq_admit(struct edfq *q, int64_t now, int64_t d, int64_t tx, uint32_t id)
{
	struct edfq_seg before, after;
	uint32_t pos = 0;
	struct pass p = {.pre = EDF_INF, .suf = EDF_INF};
	int64_t acc, suf;

	if (tx <= 0)
		return EDF_INVALID;
	if (q->n >= EDF_CAP)
		return EDF_FULL;
	if (q->nb) {
		pos = locate(q, d);
		p = pass_over(&q->b[q->ord[pos]], d);
	}
	before = range(q, 0, pos);
	after = range(q, pos + 1, q->nb);
	/* acc: the T before the insertion point; suf: min(D_k - C_k) after
	 * it, both over the whole queue. */
	acc = before.sum + p.acc;
	suf = p.suf == EDF_INF ? EDF_INF : p.suf - before.sum;
	if (after.min != EDF_INF && q->nb) {
		int64_t m = after.min - before.sum - q->b[q->ord[pos]].sum;

		if (m < suf)
			suf = m;
	}
	/* (4): T_ins <= M_i = suf - T_now. */
	if (suf != EDF_INF && tx > suf - now)
		return EDF_DISPLACES;
	/* Own deadline, (1) for p_ins. */
	if (d - tx - now - acc < 0)
		return EDF_OWN_DEADLINE;
	if (!q->nb) {
		q->ord[0] = q->free[--q->nfree];
		q->b[q->ord[0]].n = 0;
		q->nb = 1;
	} else if (q->b[q->ord[pos]].n == EDFB) {
		split(q, pos);
		pos = locate(q, d);
		p = pass_over(&q->b[q->ord[pos]], d);
	}
	put(q, pos, &p, d, tx, id);
	q->n++;
	q->backlog += tx;
	return EDF_ADMITTED;
}

/* edfq_peek copies the earliest-deadline entry into *out; it returns -1
 * when the queue is empty, else 0. */
int edfq_peek(const struct edfq *q, struct edf_ent *out)
{
	const struct edfq_block *b;

	if (!q->n)
		return -1;
	b = &q->b[q->ord[0]];
	*out = (struct edf_ent){.d = b->d[0], .tx = b->tx[0], .id = b->id[0]};
	return 0;
}

/* edfq_pop removes the head into *out; it returns -1 when empty, else 1 if
 * the head is late starting at now (the caller drops and reports it), 0 if
 * it is on time. */
int edfq_pop(struct edfq *q, int64_t now, struct edf_ent *out)
{
	struct edfq_block *b;

	if (edfq_peek(q, out) < 0)
		return -1;
	b = &q->b[q->ord[0]];
	b->n--;
	memmove(b->d, b->d + 1, b->n * sizeof(b->d[0]));
	memmove(b->tx, b->tx + 1, b->n * sizeof(b->tx[0]));
	memmove(b->id, b->id + 1, b->n * sizeof(b->id[0]));
	q->n--;
	q->backlog -= out->tx;
	if (b->n) {
		summarise(b);
		set_leaf(q, 0);
	} else {
		q->free[q->nfree++] = q->ord[0];
		q->nb--;
		memmove(q->ord, q->ord + 1, q->nb * sizeof(q->ord[0]));
		rebuild(q);
	}
	return edf_late(out, now);
}

/* edfq_slack is M_1 at tnow: how much the whole queue may still slip (0
 * when empty). */
int64_t edfq_slack(const struct edfq *q, int64_t tnow) { return q->n ? q->seg[1].min - tnow : 0; }
