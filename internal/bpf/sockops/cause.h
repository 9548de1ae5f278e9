/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * cause.h - the cause test: whose queue a foreground's delay is. A
 * foreground socket's queue above FG_HARM_QD_US in one direction does not
 * by itself say the background put it there: the foreground's own bursts,
 * the other direction's queue or a dip in the link's rate read the same.
 * So the first harmed sample on an interface and direction starts a test
 * there: background is held (fg_harm_mark) while the foreground's samples
 * are watched. Over the second of the harmed socket's round trips (each at
 * least FG_CAUSE_MIN_NS) the queue must stay at FG_HARM_QD_US or half the
 * test's start: then it was the background's (CAUSE_OURS), and harmed
 * samples hold for FG_CAUSE_VERDICT_NS. A second round trip without a
 * sample (the foreground fell silent: a video's segment ended) proves
 * nothing: the test is void, and the next harmed sample starts another. Otherwise (a bursty foreground's
 * own queue comes back while background is held) it is not the
 * background's (CAUSE_NOT_OURS): the hold is released at once and that
 * direction's delay holds nothing for FG_CAUSE_VERDICT_NS. The first
 * harmed sample after a verdict tests again, so a direction is tested at
 * most once per FG_CAUSE_VERDICT_NS (2 s) and holds by delay at most two
 * round trips of it when the queue is not ours, a bounded cost of the
 * test (the foreground pays only where it was ours). A cwnd-limited
 * foreground (a bulk transfer that would send more)
 * holds without a test; so does the lab's joined rule (YIELD_JOINED),
 * kept as the rule this one is paired with. Included by sockops.c after
 * yield.h.
 */
#ifndef LANES_SOCKOPS_CAUSE_H
#define LANES_SOCKOPS_CAUSE_H

#define FG_CAUSE_MIN_NS 20000000ULL         /* the shortest round trip a test waits */
#define FG_CAUSE_VERDICT_NS 2000000000ULL   /* a verdict stands this long */

#define CAUSE_NONE 0     /* no test yet, or the last void */
#define CAUSE_TESTING 1  /* background held, the foreground's delay watched */
#define CAUSE_OURS 2     /* the delay fell and stayed down while background was held */
#define CAUSE_NOT_OURS 3 /* it did not: background released */

/* fg_cause: one interface's tests, per direction (FG_DIR_UP, FG_DIR_DOWN) */
struct fg_cause {
	__u64 test_at[2];  /* the running test's start, 0: none */
	__u64 wait_ns[2];  /* its round trip */
	__u64 until[2];    /* the last verdict stands until then */
	__u64 tests[2];    /* tests started */
	__u64 not_ours[2]; /* of them, found not the background's */
	__u32 start_qd[2]; /* the foreground's queue at the test's start, us */
	__u32 peak_qd[2];  /* the largest queue of its second round trip, us */
	__u32 verdict[2];  /* CAUSE_*: the last */
	__u32 seen[2];     /* samples of its second round trip */
};

LANES_MAP(lanes_fg_cause,
	  BPF_MAP_TYPE_HASH,
	  1024,
	  __u32,
	  struct fg_cause
);

/* fg_cause_fresh: a new entry's value, never written (in .bss, not on the
 * stack: the program's stack and fg_cause_holds' are near the verifier's
 * 512 bytes) */
static struct fg_cause fg_cause_fresh;

static __always_inline struct fg_cause *fg_cause_of(__u32 idx)
{
	struct fg_cause *c = bpf_map_lookup_elem(&lanes_fg_cause, &idx);

	if (c)
		return c;
	bpf_map_update_elem(&lanes_fg_cause, &idx, &fg_cause_fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&lanes_fg_cause, &idx);
}

/* fg_release ends direction d's hold on idx now (the test's verdict). */
static __always_inline void fg_release(__u32 idx, __u32 d, __u64 now)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx);

	if (h && h->dir_until[d & 1] > now)
		h->dir_until[d & 1] = now;
}

/* fg_cause_judge ends c's test in direction d at now: ours if the
 * queue of its second round trip stayed at FG_HARM_QD_US or half the
 * start, else not ours (released). Either verdict stands
 * FG_CAUSE_VERDICT_NS. A round trip without samples gives none. */
static __always_inline void fg_cause_judge(struct fg_cause *c, __u32 idx, __u32 d, __u64 now)
{
	__u32 fell = c->start_qd[d] / 2;

	if (fell < FG_HARM_QD_US)
		fell = FG_HARM_QD_US;
	c->test_at[d] = 0;
	if (!c->seen[d]) {
		c->verdict[d] = CAUSE_NONE;
		return;
	}
	c->until[d] = now + FG_CAUSE_VERDICT_NS;
	if (c->peak_qd[d] <= fell) {
		c->verdict[d] = CAUSE_OURS;
		return;
	}
	c->verdict[d] = CAUSE_NOT_OURS;
	c->not_ours[d]++;
	fg_release(idx, d, now);
}

/* fg_cause_holds reads a foreground sample's queue qd_us in direction d
 * (FG_DIR_UP or FG_DIR_DOWN) on idx, of a socket whose round trip is
 * rtt_us: whether it holds background there (the test above). A global
 * function: the verifier checks it once, not at each of fg_sample's four
 * calls. */
__noinline int fg_cause_holds(__u32 idx, __u64 now, __u32 d, __u32 qd_us, __u32 rtt_us)
{
	struct fg_cause *c;
	__u64 el, wait;

	d &= 1;
	if (CFG.yield & YIELD_JOINED)
		return qd_us > FG_HARM_QD_US;
	c = fg_cause_of(idx);
	if (!c)
		return qd_us > FG_HARM_QD_US;
	if (c->test_at[d]) {
		el = now - c->test_at[d];
		wait = c->wait_ns[d];
		if (el >= 2 * wait)
			fg_cause_judge(c, idx, d, now);
		else if (el >= wait) {
			c->seen[d]++;
			if (qd_us > c->peak_qd[d])
				c->peak_qd[d] = qd_us;
		}
	}
	if (qd_us <= FG_HARM_QD_US)
		return 0;
	if (c->test_at[d])
		return 1;
	if (c->verdict[d] == CAUSE_NOT_OURS && now < c->until[d])
		return 0;
	if (c->verdict[d] == CAUSE_OURS && now < c->until[d])
		return 1;
	wait = 1000ULL * rtt_us;
	c->test_at[d] = now;
	c->wait_ns[d] = wait > FG_CAUSE_MIN_NS ? wait : FG_CAUSE_MIN_NS;
	c->start_qd[d] = qd_us;
	c->peak_qd[d] = 0;
	c->seen[d] = 0;
	c->verdict[d] = CAUSE_TESTING;
	c->tests[d]++;
	return 1;
}

#define FG_QD_UNREAD 0xffffffffU /* a direction the sample does not read */

/* fg_dir_sample is one foreground sample of direction d's queue on idx:
 * marked harmed (fg_harm_mark) where the cause test holds or, upload, the
 * socket is cwnd-limited (kind: limited); none where d is FG_QD_UNREAD. */
static __always_inline void fg_dir_sample(__u32 idx, __u64 now, __u32 d, __u32 qd_us, __u32 limited, __u32 rtt_us)
{
	if (qd_us == FG_QD_UNREAD)
		return;
	if (fg_cause_holds(idx, now, d, qd_us, rtt_us) || (limited && d == FG_DIR_UP))
		fg_harm_mark(idx, now, qd_us, limited, d, rtt_us);
}

/* fg_dir_note records reading qd_us of direction d in h at now: the
 * slot's largest, the slot before kept (lanes_maps.h's dir_qd_*). */
static __always_inline void fg_dir_note(struct fg_harm *h, __u64 now, __u32 d, __u32 qd_us)
{
	__u64 slot = now / FG_DIRQ_SLOT_NS, last = h->dir_qd_at[d & 1] / FG_DIRQ_SLOT_NS;

	if (slot != last) {
		h->dir_qd_prev_us[d & 1] = slot == last + 1 ? h->dir_qd_us[d & 1] : 0;
		h->dir_qd_us[d & 1] = qd_us;
	} else if (qd_us > h->dir_qd_us[d & 1]) {
		h->dir_qd_us[d & 1] = qd_us;
	}
	h->dir_qd_at[d & 1] = now;
}

/* fg_dir_queue records direction d's queue qd_us on idx and key 0, read
 * from a foreground socket's timestamps (FG_QD_UNREAD: not read), harmed
 * or not: the QUIC/UDP class, whose probes' RTT crosses both directions,
 * takes the other direction's off its own (bgudp). */
static __always_inline void fg_dir_queue(__u32 idx, __u64 now, __u32 d, __u32 qd_us)
{
	struct fg_harm *h;

	if (qd_us == FG_QD_UNREAD)
		return;
	h = fg_harm_of(idx);
	if (h)
		fg_dir_note(h, now, d, qd_us);
	if (!idx)
		return;
	h = fg_harm_of(0);
	if (h)
		fg_dir_note(h, now, d, qd_us);
}

/* fg_sample is a foreground sample (lanes_owd.h's per-direction queues
 * up_us and down_us: with timestamps only its data's direction, the
 * other FG_QD_UNREAD; without, the same queue both ways) on idx
 * and key 0 (any interface). */
static __always_inline void fg_sample(__u32 idx, __u64 now, __u32 up_us, __u32 down_us, __u32 limited, __u32 rtt_us)
{
	fg_dir_sample(idx, now, FG_DIR_UP, up_us, limited, rtt_us);
	fg_dir_sample(idx, now, FG_DIR_DOWN, down_us, 0, rtt_us);
	if (!idx)
		return;
	fg_dir_sample(0, now, FG_DIR_UP, up_us, limited, rtt_us);
	fg_dir_sample(0, now, FG_DIR_DOWN, down_us, 0, rtt_us);
}

#endif
