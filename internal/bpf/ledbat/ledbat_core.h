/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ledbat_core.h - the LEDBAT++ window arithmetic
 * (draft-irtf-iccrg-ledbat-plus-plus), free of kernel types so that two BPF
 * programs share it: the struct_ops congestion control (ledbat.c) and a
 * BPF_PROG_TYPE_SYSCALL program (ledbat_step.c) that tests run through
 * BPF_PROG_TEST_RUN beside the Go reference model (internal/ledbat), which
 * implements the same rules with the same integer conventions.
 *
 * Data: struct ledbat lives in the socket's icsk_ca_priv (at most 104
 * bytes). Delays are round-trip times in microseconds, times are the low 32
 * bits of a microsecond clock (compared wrap-safe), cwnd is in packets with
 * a signed fraction `acc` in 1/LEDBAT_SCALE packets.
 *   - base delay: the minimum RTT over LEDBAT_BASE_BUCKETS one-minute
 *     buckets (so it may rise again after a route change);
 *   - current delay: the minimum RTT over the last LEDBAT_FILTER time
 *     slots (cur[0] the newest); a slot ends at the first sample
 *     (base + sother) / LEDBAT_SLOT_DIV after it began, so the filter spans
 *     one to 4/3 of the round trip the flow's ACK clock runs at (base, and
 *     the other direction's queue its ACKs or data wait in: behind a bulk
 *     upload's 500 ms queue a download's data comes in bursts a round trip
 *     apart, and a shorter filter reads its own burst as a standing queue)
 *     when ACKs are dense and the last LEDBAT_FILTER samples when
 *     they are sparse (a cellular link's bursty delivery swings the
 *     per-ACK RTT by several ms with no standing queue; a minimum over a
 *     few samples, well under a millisecond of ACKs, would read that as
 *     queue);
 *   - queuing delay qd = current - base;
 *   - sother: the part of the last sample's round trip that is not this
 *     flow's delay (the caller's: the other direction's queue, which its
 *     ACKs or data wait in, a filtered reading; smoothed 1/8 a sample with
 *     LEDBAT_F_RATE_UNKEPT).
 * Operations:
 *   - ledbat_rtt: one delay sample into both filters, and the part of
 *     its round trip not the flow's own (0 where the delay is the RTT).
 *   - ledbat_keep_rate: after a sample, beside a present foreground, the
 *     window scaled by the change of sother, (current + sother) /
 *     (current + sother before): its rate kept through a queue not its
 *     own.
 *   - ledbat_ack: `acked` packets were acknowledged:
 *       gain    = 1 / min(16, ceil(2 * target / base)), per round trip
 *                 (ledbat_inc)
 *       slow start (initial, or after a slowdown): cwnd += gain per acked
 *         packet, left when qd > 3/4 target or cwnd reaches ssthresh;
 *       congestion avoidance, per RTT (spread over the RTT's acks):
 *         qd <= target: cwnd += gain per round trip alone
 *         qd >  target: cwnd += max(gain - cwnd * (qd/target - 1), -cwnd/2),
 *                       and ssthresh follows cwnd down
 *       periodic slowdown: 2 RTTs after the initial slow start, then 9x the
 *         length of the previous slowdown after it ended: ssthresh = cwnd,
 *         cwnd = 2 packets held for 2 RTTs, then slow start back up to
 *         ssthresh (ended early only when qd > target). The queue the background flows built drains while they
 *         hold, so every flow (a latecomer too) sees the true base delay.
 *         Beside a present foreground, a queue seen drained since the
 *         slowdown was scheduled (qd at most a quarter of the share
 *         target: the foreground's pause, the yield's hold) measured the
 *         base already: the slowdown due is skipped and the next is due 9
 *         holds (2 RTTs each) later (LEDBAT_F_DRAINED). Alone a flow's
 *         slowdowns stay: on the LTE traces a bursty link drains the queue
 *         often, and without them the model's probe p95 rose 57 -> 72 ms.
 *       below ssthresh in congestion avoidance (after a retransmission
 *         timeout; up to the link's window: ledbat_link_window) the
 *         window grows as in slow start.
 *   - ledbat_share: the target now and how it shares beside a present
 *     foreground (a share target a quarter of its own): once the queue has
 *     come down to the share target, the decrease above it as steep as
 *     above the flow's own target (LEDBAT_F_SHARE_SLOPE; the way down from
 *     the flow's own target keeps LEDBAT++'s slope),
 *     once settled there the growth below it in proportion to the
 *     distance to it, gain * (target - qd) / target per RTT, none above it,
 *     and the decrease halved again (LEDBAT_F_SHARE_GROW, RFC 6817's
 *     off-target growth),
 *     and no periodic slowdown while sharing (LEDBAT_F_SHARE_DEFER: the
 *     one due comes at the first ack after sharing ends; a join slowdown
 *     still comes at once).
 *   - ledbat_slowdown_now: a slowdown on the next ack (a new flow joined),
 *     back to half the window after it, whatever the delay.
 *   - ledbat_loss: ssthresh = max(cwnd / 2, 2); a slow start ends there
 *     (and schedules the next slowdown); a hold goes on.
 * Growth happens only when the sender is cwnd-limited (`limited`);
 * decreases always.
 * Note: no signed division (BPF before cpu v4 has none): magnitudes are
 * divided unsigned and the sign applied after; the fraction uses shifts.
 */
#ifndef LEDBAT_CORE_H
#define LEDBAT_CORE_H

#define LEDBAT_SCALE_SHIFT 16
#define LEDBAT_SCALE (1 << LEDBAT_SCALE_SHIFT)
#define LEDBAT_MIN_CWND 2
#define LEDBAT_WIN_MAX 65535     /* an ssthresh above is none (infinite) */
#define LEDBAT_GAIN_MAX_DIV 16   /* gain is at least 1/16 */
#define LEDBAT_GROWTH_MAX 16     /* a round trip counts at most 16 currents (ledbat_keep_rate) */
#define LEDBAT_FILTER 4          /* current delay: min over 4 slots */
#define LEDBAT_SLOT_DIV 3        /* a slot lasts at least (base + sother) / 3: the filter spans 1-4/3 round trips */
#define LEDBAT_BASE_BUCKETS 10   /* base delay: min over 10 minutes */
#define LEDBAT_BUCKET_US 60000000ULL
#define LEDBAT_HOLD_RTTS 2       /* slowdown: cwnd held at 2 for 2 RTTs */
#define LEDBAT_FIRST_SLOWDOWN_RTTS 2
#define LEDBAT_SLOWDOWN_SPACING 9 /* next slowdown 9x its length later */

enum ledbat_phase {
	LEDBAT_SLOW_START = 0, /* initial slow start */
	LEDBAT_AVOID = 1,      /* congestion avoidance */
	LEDBAT_HOLD = 2,       /* slowdown: cwnd held at LEDBAT_MIN_CWND */
	LEDBAT_RESTART = 3,    /* slow start back to ssthresh after a slowdown */
};

#define LEDBAT_F_SCHEDULED 1 /* t_next is a scheduled slowdown */
#define LEDBAT_F_JOIN 2      /* the coming slowdown makes room for a new flow */
/* Sharing beside a present foreground (ledbat_share; the caller sets them
 * with the share target at each ack): */
#define LEDBAT_F_SHARE_SLOPE 4 /* the decrease's slope is that of LEDBAT_SHARE_SLOPE x the target */
#define LEDBAT_F_SHARE_DEFER 8 /* a periodic slowdown due waits until sharing ends */
#define LEDBAT_F_SHARE_GROW 32 /* the growth below the target in proportion to the distance to it */
#define LEDBAT_F_DRAINED 64    /* sharing, the queue came down to a quarter of the target since the slowdown was scheduled */
#define LEDBAT_F_SHARE (LEDBAT_F_SHARE_SLOPE | LEDBAT_F_SHARE_DEFER | LEDBAT_F_SHARE_GROW)
#define LEDBAT_F_SHARE_SETTLED 16 /* sharing, the queue came down to the share target once */
#define LEDBAT_SHARE_SLOPE 4   /* the share target is a quarter of the flow's own */
#define LEDBAT_SHARE_GROW_SLOPE 2 /* with LEDBAT_F_SHARE_GROW the decrease halves again */
/* Set by the caller at init: the window keeps no rate through the other
 * direction's queue; instead sother is smoothed 1/8 a sample and the growth
 * per round trip scaled by m^2 (ledbat_inc). rLEDBAT's receive window
 * always (its offered edge is never retracted: it cannot fall as fast as
 * drained ACKs free it, and beside bulk the other way the probe's p95 rose
 * +68 against +38 ms); LEDBAT++'s by a lab switch (the rule
 * ledbat_keep_rate replaced there) */
#define LEDBAT_F_RATE_UNKEPT 128

struct ledbat {
	__u32 base[LEDBAT_BASE_BUCKETS]; /* per-minute minimum RTT, 0 = empty */
	__u32 cur[LEDBAT_FILTER];        /* last RTT samples, newest first, 0 = empty */
	__u32 bucket;                    /* minute number of base[0] */
	__u32 samples;                   /* RTT samples seen */
	__s32 acc;                       /* cwnd fraction, 1/LEDBAT_SCALE packets */
	__u16 phase;                     /* enum ledbat_phase (u16 each: icsk_ca_priv is full) */
	__u16 flags;                     /* LEDBAT_F_* */
	__u32 target_us;
	__u32 t_hold_end;                /* HOLD ends (us) */
	__u32 t_slowdown;                /* the current slowdown began (us) */
	__u32 t_next;                    /* next slowdown (us), if SCHEDULED */
	__u32 t_slot;                    /* cur[0]'s slot began (us) */
	__u32 sother;                    /* the round trip's part not its own, the last sample's (us; smoothed 1/8 with LEDBAT_F_RATE_UNKEPT) */
};

/* a window the arithmetic reads and writes (the socket's, or a test's) */
struct ledbat_win {
	__u32 cwnd;
	__u32 ssthresh;
};

static __always_inline int ledbat_after(__u32 now, __u32 t)
{
	return (__s32)(now - t) >= 0;
}

/* ledbat_min0 is the smaller of m and x where 0 means "none", without a
 * branch: the verifier would otherwise follow every combination of
 * branches through the filters below (2^14 paths). 0 maps to 2^32 - 1. */
static __always_inline __u32 ledbat_min0(__u32 m, __u32 x)
{
	__u64 a = (__u32)(m - 1), b = (__u32)(x - 1);
	__u64 d = a - b;
	__u64 keep_a = (__u64)((__s64)d >> 63); /* all ones when a < b */

	return (__u32)(b + (d & keep_a)) + 1;
}

/* ledbat_minu and ledbat_maxu: the smaller and the larger of a and b (both
 * < 2^63) without a branch */
static __always_inline __u64 ledbat_minu(__u64 a, __u64 b)
{
	__u64 d = a - b;

	return b + (d & (__u64)((__s64)d >> 63));
}

static __always_inline __u64 ledbat_maxu(__u64 a, __u64 b)
{
	__u64 d = a - b;

	return a - (d & (__u64)((__s64)d >> 63));
}

static __always_inline void ledbat_init(struct ledbat *l, __u32 target_us, __u64 now_us)
{
	__builtin_memset(l, 0, sizeof(*l));
	l->target_us = target_us;
	l->bucket = (__u32)(now_us / LEDBAT_BUCKET_US);
	l->phase = LEDBAT_SLOW_START;
	l->t_slot = (__u32)now_us;
}

static __always_inline __u32 ledbat_base(const struct ledbat *l)
{
	__u32 m = 0;

#pragma clang loop unroll(full)
	for (int i = 0; i < LEDBAT_BASE_BUCKETS; i++)
		m = ledbat_min0(m, l->base[i]);
	return m;
}

/* ledbat_rtt records one delay sample rtt_us (us, > 0) taken at now_us and
 * other_us, the part of its round trip that is not this flow's. */
static __always_inline void ledbat_rtt(struct ledbat *l, __u32 rtt_us, __u32 other_us, __u64 now_us)
{
	__u32 minute = (__u32)(now_us / LEDBAT_BUCKET_US);
	__u32 shift = minute - l->bucket;

	if (!rtt_us)
		return;
	/* age the buckets one minute at a time (constant offsets only: the
	 * verifier refuses variable ones into the socket and the context) */
	for (int s = 0; s < LEDBAT_BASE_BUCKETS; s++) {
		if ((__u32)s >= shift)
			break;
#pragma clang loop unroll(full)
		for (int i = LEDBAT_BASE_BUCKETS - 1; i > 0; i--)
			l->base[i] = l->base[i - 1];
		l->base[0] = 0;
	}
	l->bucket = minute;
	l->base[0] = ledbat_min0(l->base[0], rtt_us);
	l->samples++;
	if (!(l->flags & LEDBAT_F_RATE_UNKEPT))
		l->sother = other_us;
	else if (other_us > l->sother)
		l->sother += (other_us - l->sother) >> 3;
	else
		l->sother -= (l->sother - other_us) >> 3;
	/* the current slot ends at the first sample (base + sother) / SLOT_DIV
	 * after it began: the filter spans the round trip the flow's clock
	 * runs at */
	if (!l->cur[0] || ledbat_after((__u32)now_us, l->t_slot + (ledbat_base(l) + l->sother) / LEDBAT_SLOT_DIV)) {
#pragma clang loop unroll(full)
		for (int i = LEDBAT_FILTER - 1; i > 0; i--)
			l->cur[i] = l->cur[i - 1];
		l->cur[0] = rtt_us;
		l->t_slot = (__u32)now_us;
		return;
	}
	l->cur[0] = ledbat_min0(l->cur[0], rtt_us);
}

static __always_inline __u32 ledbat_current(const struct ledbat *l)
{
	__u32 m = 0;

#pragma clang loop unroll(full)
	for (int i = 0; i < LEDBAT_FILTER; i++)
		m = ledbat_min0(m, l->cur[i]);
	return m;
}

static __always_inline __u32 ledbat_queuing(const struct ledbat *l)
{
	__u32 b = ledbat_base(l), c = ledbat_current(l);

	return c > b ? c - b : 0;
}

/* ledbat_gain_div returns 1/gain = min(16, ceil(2 * target / base)), >= 1. */
static __always_inline __u32 ledbat_gain_div(__u32 target_us, __u32 base_us)
{
	__u64 d;

	if (!base_us)
		return LEDBAT_GAIN_MAX_DIV;
	d = ((__u64)2 * target_us + base_us - 1) / base_us;
	if (d > LEDBAT_GAIN_MAX_DIV)
		d = LEDBAT_GAIN_MAX_DIV;
	if (d < 1)
		d = 1;
	return (__u32)d;
}

/* ledbat_apply moves whole packets from acc into cwnd (never below 2). */
static __always_inline void ledbat_apply(struct ledbat *l, struct ledbat_win *w, __s64 acc)
{
	if (acc >= 0) {
		w->cwnd += (__u32)((__u64)acc >> LEDBAT_SCALE_SHIFT);
		l->acc = (__s32)((__u64)acc & (LEDBAT_SCALE - 1));
	} else {
		__u64 mag = (__u64)(-acc);
		__u64 whole = mag >> LEDBAT_SCALE_SHIFT;

		w->cwnd = whole + LEDBAT_MIN_CWND < w->cwnd ? w->cwnd - (__u32)whole : LEDBAT_MIN_CWND;
		l->acc = -(__s32)(mag & (LEDBAT_SCALE - 1));
	}
	if (w->cwnd < LEDBAT_MIN_CWND)
		w->cwnd = LEDBAT_MIN_CWND;
}

/* ledbat_keep_rate scales w by the change of the round trip's part not the
 * flow's own, from was (sother before the last sample) to sother: its rate,
 * window / (current + sother), stays where its own queue put it. Behind
 * page loads' downloads an upload's ACKs wait 200-300 ms; an unscaled
 * window then sends a fifth of its rate. Per sample, unsmoothed: when that
 * queue drains its ACKs come at once, each for data sent a packet time
 * after the last, and the window falls as fast as they free it, so the
 * burst sends nothing. Only beside a present foreground (present): the
 * queue the ACKs wait in is then another flow's. Alone it may be the
 * flow's own: on a Wi-Fi medium an upload's airtime delays its own ACKs,
 * and scaling the window by that wait fed it (two background uploads
 * through an emulated DCF access point: 2.2-6.7 Mbit/s against 6.7-13.5,
 * TestCoopBedLanes). The round trip counts at most LEDBAT_GROWTH_MAX
 * currents; ssthresh scales alike where it is a window. */
static __always_inline void ledbat_keep_rate(struct ledbat *l, struct ledbat_win *w, __u32 was, int present)
{
	__u64 cur = ledbat_current(l), lim = (LEDBAT_GROWTH_MAX - 1) * cur;
	__u64 from = cur + ledbat_minu(was, lim), to = cur + ledbat_minu(l->sother, lim), d;

	if (!cur || from == to || !present || (l->flags & LEDBAT_F_RATE_UNKEPT))
		return;
	if (to > from) {
		d = ((__u64)w->cwnd * (to - from) << LEDBAT_SCALE_SHIFT) / from;
		ledbat_apply(l, w, (__s64)l->acc + (__s64)d);
	} else {
		d = ((__u64)w->cwnd * (from - to) << LEDBAT_SCALE_SHIFT) / from;
		ledbat_apply(l, w, (__s64)l->acc - (__s64)d);
	}
	if (w->ssthresh <= LEDBAT_WIN_MAX)
		w->ssthresh = (__u32)ledbat_maxu(ledbat_minu((__u64)w->ssthresh * to / from, LEDBAT_WIN_MAX), LEDBAT_MIN_CWND);
}

/* ledbat_schedule sets the next slowdown after a slow start ends at now. */
static __always_inline void ledbat_schedule(struct ledbat *l, __u32 now, __u32 srtt_us)
{
	if (l->phase == LEDBAT_SLOW_START)
		l->t_next = now + LEDBAT_FIRST_SLOWDOWN_RTTS * srtt_us;
	else
		l->t_next = now + LEDBAT_SLOWDOWN_SPACING * (now - l->t_slowdown);
	l->flags = (l->flags | LEDBAT_F_SCHEDULED) & ~(LEDBAT_F_JOIN | LEDBAT_F_DRAINED);
	l->phase = LEDBAT_AVOID;
	l->acc = 0;
}

/* ledbat_ss_ends says whether a slow start ends: the initial one when the
 * queuing delay exceeds 3/4 of the target (the draft); a restart after a
 * periodic slowdown only above the target itself, so that a flow returns to
 * its window even where another flow keeps the queue near the target (at
 * 3/4 the smaller of two flows would lose its share at every slowdown); a
 * restart after a join slowdown on reaching ssthresh alone. */
static __always_inline int ledbat_ss_ends(const struct ledbat *l, const struct ledbat_win *w, __u32 qd)
{
	if (w->cwnd >= w->ssthresh)
		return 1;
	if (l->phase == LEDBAT_SLOW_START)
		return (__u64)qd * 4 > (__u64)l->target_us * 3;
	if (l->flags & LEDBAT_F_JOIN)
		return 0;
	return qd > l->target_us;
}

/* ledbat_inc is the growth per acked packet in congestion avoidance, in
 * 1/LEDBAT_SCALE packets: a gain per round trip. With LEDBAT_F_RATE_UNKEPT
 * (the rule ledbat_keep_rate replaced) a round trip m times longer
 * (m = 1 + sother / current; sother: the other direction's queue, which
 * its ACKs wait in) scaled the gain per round trip by m^2, so that the
 * rate grew as alone (m at most LEDBAT_GROWTH_MAX), the part above the gain
 * shrinking as its own queue nears the target (x (target - qd) / target).
 * Its own queue shows a round trip late, m times later than alone: the
 * growth overshot by as much (a model of page loads' 250 ms: 84-150 ms of
 * its own queue at the drain, otherdir_sim_test.go). */
static __always_inline __u64 ledbat_inc(const struct ledbat *l, __u32 gdiv, __u32 cwnd, __u32 cur, __u32 qd)
{
	__u64 div = (__u64)gdiv * cwnd, x;
	__u32 target = l->target_us;

	if (!cur || !l->sother || qd >= target || !(l->flags & LEDBAT_F_RATE_UNKEPT))
		return (__u64)LEDBAT_SCALE / div;
	x = ((__u64)l->sother << LEDBAT_SCALE_SHIFT) / cur; /* m - 1 */
	if (x > (__u64)(LEDBAT_GROWTH_MAX - 1) << LEDBAT_SCALE_SHIFT)
		x = (__u64)(LEDBAT_GROWTH_MAX - 1) << LEDBAT_SCALE_SHIFT;
	x = 2 * x + ((x * x) >> LEDBAT_SCALE_SHIFT); /* m^2 - 1 */
	x = x * (target - qd) / target;
	return ((__u64)LEDBAT_SCALE + x) / div;
}

/* ledbat_ack: `acked` packets acknowledged at now (us), smoothed RTT srtt_us;
 * limited: the sender is cwnd-limited (growth allowed). */
static __always_inline void ledbat_ack(struct ledbat *l, struct ledbat_win *w, __u32 acked,
				       __u32 now, __u32 srtt_us, int limited)
{
	__u32 base = ledbat_base(l), qd = ledbat_queuing(l);
	__u32 target = l->target_us, gdiv = ledbat_gain_div(target, base);
	__u64 inc, dec;

	if (!acked)
		return;
	if (l->phase == LEDBAT_HOLD) {
		if (!ledbat_after(now, l->t_hold_end)) {
			w->cwnd = LEDBAT_MIN_CWND;
			return;
		}
		l->phase = LEDBAT_RESTART;
		l->acc = 0;
	}
	if (l->phase == LEDBAT_SLOW_START || l->phase == LEDBAT_RESTART) {
		if (ledbat_ss_ends(l, w, qd)) {
			if (w->cwnd < w->ssthresh)
				w->ssthresh = w->cwnd;
			ledbat_schedule(l, now, srtt_us);
			return;
		}
		if (limited)
			ledbat_apply(l, w, (__s64)l->acc + (__s64)(((__u64)acked << LEDBAT_SCALE_SHIFT) / gdiv));
		return;
	}
	/* LEDBAT_AVOID */
	if ((l->flags & LEDBAT_F_SHARE_DEFER) && (__u64)qd * 4 <= target)
		l->flags |= LEDBAT_F_DRAINED;
	if ((l->flags & LEDBAT_F_SCHEDULED) && ledbat_after(now, l->t_next) &&
	    (l->flags & (LEDBAT_F_DRAINED | LEDBAT_F_JOIN)) == LEDBAT_F_DRAINED) {
		/* the base was seen since: no slowdown needed for it */
		l->t_next = now + LEDBAT_SLOWDOWN_SPACING * LEDBAT_HOLD_RTTS * srtt_us;
		l->flags &= ~LEDBAT_F_DRAINED;
	}
	if ((l->flags & LEDBAT_F_SCHEDULED) && ledbat_after(now, l->t_next) &&
	    (!(l->flags & LEDBAT_F_SHARE_DEFER) || (l->flags & LEDBAT_F_JOIN))) {
		w->ssthresh = w->cwnd;
		if (l->flags & LEDBAT_F_JOIN)
			w->ssthresh = w->ssthresh / 2 > LEDBAT_MIN_CWND ? w->ssthresh / 2 : LEDBAT_MIN_CWND;
		w->cwnd = LEDBAT_MIN_CWND;
		l->phase = LEDBAT_HOLD;
		l->t_slowdown = now;
		l->t_hold_end = now + LEDBAT_HOLD_RTTS * srtt_us;
		l->flags &= ~LEDBAT_F_SCHEDULED;
		l->acc = 0;
		return;
	}
	/* below ssthresh (after a retransmission timeout): slow start with gain */
	if (w->cwnd < w->ssthresh && (__u64)qd * 4 <= (__u64)target * 3) {
		if (limited)
			ledbat_apply(l, w, (__s64)l->acc + (__s64)(((__u64)acked << LEDBAT_SCALE_SHIFT) / gdiv));
		return;
	}
	/* per acked packet: gain / cwnd per round trip alone (ledbat_inc), minus
	 * (qd / target - 1) when above the target, never below -1/2 (a
	 * decrease of at most cwnd/2 per RTT) */
	inc = ledbat_inc(l, gdiv, w->cwnd, ledbat_current(l), qd);
	dec = qd > target ? ((__u64)(qd - target) << LEDBAT_SCALE_SHIFT) / target : 0;
	if ((l->flags & (LEDBAT_F_SHARE_SLOPE | LEDBAT_F_SHARE_GROW)) && qd <= target)
		l->flags |= LEDBAT_F_SHARE_SETTLED;
	if ((l->flags & LEDBAT_F_SHARE_SLOPE) && (l->flags & LEDBAT_F_SHARE_SETTLED))
		dec /= LEDBAT_SHARE_SLOPE;
	/* the gain scaled by (target - qd) / target: one packet per RTT is
	 * half the share target at 10 Mbit/s, and the RTT or two the delay
	 * takes to show it would overshoot the target by as much again. The
	 * growth then stops at the target, and the decrease (halved again)
	 * answers only excursions, which it would overshoot the other way
	 * for as long. */
	if ((l->flags & LEDBAT_F_SHARE_GROW) && (l->flags & LEDBAT_F_SHARE_SETTLED)) {
		inc = qd < target ? inc * (target - qd) / target : 0;
		dec /= LEDBAT_SHARE_GROW_SLOPE;
	}
	if (dec > inc) {
		__u64 d = dec - inc;

		if (d > LEDBAT_SCALE / 2)
			d = LEDBAT_SCALE / 2;
		ledbat_apply(l, w, (__s64)l->acc - (__s64)(d * acked));
		/* a decrease is a congestion response: ssthresh follows it down,
		 * or the rule above would slow-start straight back up */
		if (w->ssthresh > w->cwnd)
			w->ssthresh = w->cwnd;
	} else if (limited) {
		ledbat_apply(l, w, (__s64)l->acc + (__s64)((inc - dec) * acked));
	}
}

/* ledbat_link_window raises ssthresh to win, the window the flow's link
 * carries at its base delay (0: unknown, or a foreground sends there),
 * while its queue is at most a quarter of target_us (the flow's own
 * target, not the smaller one it keeps beside a foreground: the filter's
 * minimum reads a drained link within a few hundred microseconds): the
 * link is idle, so the rule below ssthresh slow-starts back to it instead
 * of growing a packet a round trip from where a foreground's burst or a
 * hold left it. */
static __always_inline void ledbat_link_window(const struct ledbat *l, struct ledbat_win *w, __u32 win, __u32 target_us)
{
	if (l->phase == LEDBAT_AVOID && (__u64)ledbat_queuing(l) * 4 <= target_us && win > w->ssthresh)
		w->ssthresh = win;
}

/* ledbat_share sets the target for the next acks and the share flags
 * (LEDBAT_F_SHARE_*, 0: not sharing, which also forgets that the queue
 * came down to the share target). */
static __always_inline void ledbat_share(struct ledbat *l, __u32 target_us, __u32 share)
{
	__u32 settled = share & LEDBAT_F_SHARE ? l->flags & LEDBAT_F_SHARE_SETTLED : 0;

	l->target_us = target_us;
	l->flags = (l->flags & ~(LEDBAT_F_SHARE | LEDBAT_F_SHARE_SETTLED)) | (share & LEDBAT_F_SHARE) | settled;
}

/* ledbat_slowdown_now brings the next slowdown forward to now (a flow in
 * congestion avoidance slows down on its next ack): the host's own flows
 * make room at once when a new background flow starts, so that the
 * latecomer measures the true base delay instead of its elders' queue. That
 * slowdown (LEDBAT_F_JOIN) halves ssthresh, and its restart climbs back to
 * it whatever the delay: the newcomer's slow start, which began while this
 * flow held, would otherwise fill the queue first and leave this one a few
 * packets. */
static __always_inline void ledbat_slowdown_now(struct ledbat *l, __u32 now)
{
	if (l->phase != LEDBAT_AVOID)
		return;
	l->t_next = now;
	l->flags |= LEDBAT_F_SCHEDULED | LEDBAT_F_JOIN;
}

/* ledbat_loss returns the ssthresh after a loss and leaves slow start. */
static __always_inline __u32 ledbat_loss(struct ledbat *l, __u32 cwnd, __u32 now, __u32 srtt_us)
{
	__u32 ss = cwnd / 2;

	if (ss < LEDBAT_MIN_CWND)
		ss = LEDBAT_MIN_CWND;
	if (l->phase == LEDBAT_SLOW_START || l->phase == LEDBAT_RESTART)
		ledbat_schedule(l, now, srtt_us);
	return ss;
}

#endif
