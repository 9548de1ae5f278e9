//go:build ignore

// SPDX-License-Identifier: GPL-2.0-only
/*
 * edfqdisc.c - lanes' whole egress scheduler as one BPF qdisc (struct_ops
 * Qdisc_ops, Linux 6.16+ with CONFIG_NET_SCH_BPF): the realtime lane by
 * earliest deadline first with the paper's admission test (edf_core.h),
 * the interactive lane strictly below it, the background lane below that.
 * A BPF qdisc can only be a root (or a child of mq), not a leaf under HTB,
 * so it replaces the whole HTB tree of an interface.
 *
 * Lanes: the lanes classifier (classifier.c), attached on the interface's
 * clsact egress hook, has already written the lane's class minor into
 * qdisc_skb_cb(skb)->tc_classid before the qdisc sees the packet (the same
 * decision as under HTB: minor = CFG.minor_base + lane). A minor outside
 * the three lanes (the ACK class, no classifier) is interactive.
 *
 * Realtime enqueue: the deadline D is skb->tstamp when the sender set one
 * (SO_TXTIME with SCM_TXTIME, CLOCK_MONOTONIC), else now + CFG.budget_ns;
 * the transmit time T is the packet's length at CFG.rate_bps; T_now is the
 * later of now and the time the previous packet finishes on the wire at that
 * rate (busy_until). A packet the admission test refuses, a deadline beyond
 * CFG.horizon_ns (another clock's time) or a full queue is dropped at
 * enqueue with NET_XMIT_DROP: a UDP sender with IP_RECVERR gets ENOBUFS
 * from that very sendmsg, the paper's immediate notice.
 *
 * Dequeue: the realtime head first; a head that can no longer finish by
 * its deadline is dropped and reported on the lanes_qd_late ring buffer
 * (at most EDFQ_LATE_MAX per dequeue), never sent late in silence. Then the
 * interactive FIFO, then the background FIFO. With CFG.shaped the qdisc
 * sends at CFG.rate_bps: a packet waits until busy_until (earliest
 * departure time), the qdisc watchdog wakes it then.
 *
 * Data structures: the EDF ring (edf_core.h) holds (D, T, slot); the
 * packets themselves sit in lanes_qd_slots, an array of skb kptrs: slots
 * 0..EDF_CAP-1 are the realtime lane's (a free stack hands them out), then
 * a ring of EDFQ_FIFO_CAP per FIFO lane. No locks: the kernel runs a root
 * qdisc's callbacks under its root lock. All state is global, so one
 * registration serves one qdisc instance (the loader registers one per
 * interface under its own id): init refuses a second one with EBUSY (a
 * second interface, or mq's per-queue children).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "lanes_kernel.h"
#include "edf_core.h"
#include "lanes_abi.h"

char __license[] SEC("license") = "GPL";

#define EDFQ_FIFO_CAP 1024 /* per FIFO lane, a power of two */
#define EDFQ_SLOTS (EDF_CAP + 2 * EDFQ_FIFO_CAP)
#define EDFQ_LATE_MAX 8

void bpf_kfree_skb(struct sk_buff *p) __ksym;
void bpf_qdisc_skb_drop(struct sk_buff *p, struct bpf_sk_buff_ptr *to_free) __ksym;
void bpf_qdisc_watchdog_schedule(struct Qdisc *sch, __u64 expire, __u64 delta_ns) __ksym;
void bpf_qdisc_bstats_update(struct Qdisc *sch, const struct sk_buff *skb) __ksym;

volatile const struct edfq_config {
	__u64 rate_bps;   /* the link rate T is computed at */
	__u64 budget_ns;  /* deadline of a realtime packet without tstamp */
	__u64 horizon_ns; /* a deadline further ahead is another clock's */
	__u32 shaped;     /* send at rate_bps (EDT + watchdog) */
	__u32 minor_base; /* lane l's class minor is minor_base + l */
} CFG = {
	.rate_bps = 1000000000,
	.budget_ns = 1000000,
	.horizon_ns = 10000000000ULL,
	.minor_base = LANE_CLASS_MINOR,
};

/* Counters, read by the loader (the .bss map). */
struct edfq_stats {
	__u64 enqueued[LANE_SLOTS];
	__u64 dequeued[LANE_SLOTS];
	__u64 refused[5]; /* by enum edf_reason; [EDF_ADMITTED] unused */
	__u64 late;
	__u64 fifo_full;
	__u64 lost; /* an empty slot where a packet should be: a bug */
};

struct edfq_late {
	__s64 deadline;
	__s64 now; /* T_now the head was found late at */
	__s64 tx;
	__u32 len;
	__u16 sport; /* host order */
	__u16 dport; /* network order */
};

/* Keeps struct edfq_late in the object's BTF for the Go side's type. */
struct edfq_late edfq_late_type;

struct edfq_slot {
	struct sk_buff __kptr *skb;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, EDFQ_SLOTS);
	__type(key, __u32);
	__type(value, struct edfq_slot);
} lanes_qd_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} lanes_qd_late SEC(".maps");

struct edfq_fifo {
	__u32 head, tail; /* free-running; tail - head packets */
};

struct edf_queue rtq;
struct edfq_fifo fifo[2]; /* interactive, background */
__u32 rt_free[EDF_CAP];   /* free realtime slots: a stack of nfree */
__u32 rt_nfree;
__s64 busy_until; /* the previous packet's end on the wire at rate_bps */
__u32 instances;  /* qdiscs created from this registration, refused ones included */
struct edfq_stats stats;

static __always_inline struct qdisc_skb_cb *qdisc_skb_cb(const struct sk_buff *skb)
{
	return (struct qdisc_skb_cb *)skb->cb;
}

/* tx_ns is a packet's time on the wire at CFG.rate_bps, at least 1 ns. */
static __always_inline __s64 tx_ns(__u32 len)
{
	__u64 rate = CFG.rate_bps ? CFG.rate_bps : 1;
	__u64 t = (__u64)len * 8000000000ULL / rate;

	return t ? t : 1;
}

static __always_inline __s64 t_now(__s64 now)
{
	return busy_until > now ? busy_until : now;
}

static __always_inline __u32 lane_of(struct sk_buff *skb)
{
	__u32 l = qdisc_skb_cb(skb)->tc_classid - CFG.minor_base;

	if (l == LANE_REALTIME || l == LANE_BACKGROUND)
		return l;
	return LANE_INTERACTIVE;
}

/* fifo_slot is the slot key of position pos of FIFO f (0 interactive). */
static __always_inline __u32 fifo_slot(__u32 f, __u32 pos)
{
	return EDF_CAP + (f ? EDFQ_FIFO_CAP : 0) + (pos & (EDFQ_FIFO_CAP - 1));
}

/* put stores skb in slot key; it is dropped if the slot is missing. */
static __always_inline int put(__u32 key, struct sk_buff *skb, struct bpf_sk_buff_ptr *to_free)
{
	struct edfq_slot *s = bpf_map_lookup_elem(&lanes_qd_slots, &key);

	if (!s) {
		bpf_qdisc_skb_drop(skb, to_free);
		return -1;
	}
	skb = bpf_kptr_xchg(&s->skb, skb);
	if (skb) {
		stats.lost++;
		bpf_qdisc_skb_drop(skb, to_free);
	}
	return 0;
}

/* take removes the packet of slot key (NULL if none). */
static __always_inline struct sk_buff *take(__u32 key)
{
	struct edfq_slot *s = bpf_map_lookup_elem(&lanes_qd_slots, &key);

	if (!s)
		return 0;
	return bpf_kptr_xchg(&s->skb, 0);
}

static __always_inline int refuse(struct sk_buff *skb, struct Qdisc *sch,
				  struct bpf_sk_buff_ptr *to_free)
{
	bpf_qdisc_skb_drop(skb, to_free);
	sch->qstats.drops++;
	return NET_XMIT_DROP;
}

/* enqueue_rt admits and queues a realtime packet (0) or drops it (-1). */
static __always_inline int enqueue_rt(struct sk_buff *skb, struct Qdisc *sch,
				      struct bpf_sk_buff_ptr *to_free, __u32 len)
{
	__s64 now = bpf_ktime_get_ns(), tn = t_now(now), tx = tx_ns(len), d;
	__u32 n = rt_nfree, slot;
	int r;

	d = skb->tstamp ? (__s64)skb->tstamp : now + (__s64)CFG.budget_ns;
	if (d - now > (__s64)CFG.horizon_ns) {
		r = EDF_INVALID;
	} else if (!n || n > EDF_CAP) {
		r = EDF_FULL;
	} else {
		slot = rt_free[(n - 1) & EDF_MASK];
		r = edf_admit(&rtq, tn, d, tx, slot);
		if (r == EDF_ADMITTED) {
			rt_nfree = n - 1;
			return put(slot, skb, to_free);
		}
	}
	if (r >= 0 && r < 5)
		stats.refused[r]++;
	refuse(skb, sch, to_free);
	return -1;
}

SEC("struct_ops")
int BPF_PROG(edfq_enqueue, struct sk_buff *skb, struct Qdisc *sch, struct bpf_sk_buff_ptr *to_free)
{
	__u32 len = qdisc_skb_cb(skb)->pkt_len, lane = lane_of(skb), f;
	struct edfq_fifo *q;

	if (lane == LANE_REALTIME) {
		if (enqueue_rt(skb, sch, to_free, len))
			return NET_XMIT_DROP;
	} else {
		f = lane == LANE_BACKGROUND;
		q = &fifo[f & 1];
		if (q->tail - q->head >= EDFQ_FIFO_CAP) {
			stats.fifo_full++;
			return refuse(skb, sch, to_free);
		}
		if (put(fifo_slot(f, q->tail), skb, to_free))
			return NET_XMIT_DROP;
		q->tail++;
	}
	stats.enqueued[lane & 3]++;
	sch->q.qlen++;
	sch->qstats.backlog += len;
	return NET_XMIT_SUCCESS;
}

/* report puts a late drop on the ring buffer. */
static __always_inline void report(struct sk_buff *skb, struct edf_ent *e, __s64 tn)
{
	struct edfq_late *l = bpf_ringbuf_reserve(&lanes_qd_late, sizeof(*l), 0);
	struct sock *sk;

	if (!l)
		return;
	l->deadline = e->d;
	l->now = tn;
	l->tx = e->tx;
	l->len = skb->len;
	l->sport = 0;
	l->dport = 0;
	sk = skb->sk;
	if (sk) {
		l->sport = sk->__sk_common.skc_num;
		l->dport = sk->__sk_common.skc_dport;
	}
	bpf_ringbuf_submit(l, 0);
}

/* sent accounts for a packet leaving: the link is busy for its T. */
static __always_inline struct sk_buff *sent(struct Qdisc *sch, struct sk_buff *skb,
					    __u32 lane, __s64 tn, __s64 tx)
{
	busy_until = tn + tx;
	stats.dequeued[lane & 3]++;
	bpf_qdisc_bstats_update(sch, skb);
	return skb;
}

static __always_inline void gone(struct Qdisc *sch, struct sk_buff *skb)
{
	sch->q.qlen--;
	sch->qstats.backlog -= qdisc_skb_cb(skb)->pkt_len;
}

SEC("struct_ops")
struct sk_buff *BPF_PROG(edfq_dequeue, struct Qdisc *sch)
{
	__s64 now = bpf_ktime_get_ns(), tn;
	struct sk_buff *skb;
	struct edf_ent e;
	struct edfq_fifo *q;
	__u32 k, f, n;

	if (!sch->q.qlen)
		return 0;
	if (CFG.shaped && busy_until > now) {
		bpf_qdisc_watchdog_schedule(sch, busy_until, 0);
		return 0;
	}
	tn = t_now(now);
	for (k = 0; k < EDFQ_LATE_MAX; k++) {
		int late = edf_pop(&rtq, tn, &e);

		if (late < 0)
			break;
		n = rt_nfree;
		if (n < EDF_CAP) {
			rt_free[n & EDF_MASK] = e.id & EDF_MASK;
			rt_nfree = n + 1;
		}
		skb = take(e.id & EDF_MASK);
		if (!skb) {
			stats.lost++;
			continue;
		}
		gone(sch, skb);
		if (!late)
			return sent(sch, skb, LANE_REALTIME, tn, e.tx);
		stats.late++;
		sch->qstats.drops++;
		report(skb, &e, tn);
		bpf_kfree_skb(skb);
	}
	if (rtq.n)
		return 0; /* more late heads: the next dequeue goes on */
	for (f = 0; f < 2; f++) {
		q = &fifo[f];
		if (q->tail == q->head)
			continue;
		skb = take(fifo_slot(f, q->head));
		q->head++;
		if (!skb) {
			stats.lost++;
			return 0;
		}
		gone(sch, skb);
		return sent(sch, skb, f ? LANE_BACKGROUND : LANE_INTERACTIVE, tn,
			    tx_ns(qdisc_skb_cb(skb)->pkt_len));
	}
	return 0;
}

/* drain frees every queued packet and empties the queues. */
static __always_inline void drain(struct Qdisc *sch)
{
	__u32 k;

	for (k = 0; k < EDFQ_SLOTS; k++) {
		struct sk_buff *skb = take(k);

		if (skb)
			bpf_kfree_skb(skb);
	}
	for (k = 0; k < EDF_CAP; k++)
		rt_free[k] = k;
	rt_nfree = EDF_CAP;
	rtq.head = 0;
	rtq.n = 0;
	rtq.backlog = 0;
	fifo[0].head = fifo[0].tail = 0;
	fifo[1].head = fifo[1].tail = 0;
	busy_until = 0;
	sch->q.qlen = 0;
	sch->qstats.backlog = 0;
}

/* init takes the state for the first instance only. The kernel calls
 * destroy after a failed init too, which gives the count back. (init and
 * destroy run under the RTNL lock: no atomics needed.) */
SEC("struct_ops")
int BPF_PROG(edfq_init, struct Qdisc *sch, struct nlattr *opt, struct netlink_ext_ack *extack)
{
	if (instances++)
		return -16; /* EBUSY */
	drain(sch);
	return 0;
}

SEC("struct_ops")
void BPF_PROG(edfq_reset, struct Qdisc *sch)
{
	drain(sch);
}

/* destroy: the kernel has reset the queue already (qdisc_destroy), and a
 * refused instance must not touch the first one's state. */
SEC("struct_ops")
void BPF_PROG(edfq_destroy, struct Qdisc *sch)
{
	instances--;
}

SEC(".struct_ops.link")
struct Qdisc_ops lanes_edfq = {
	.enqueue = (void *)edfq_enqueue,
	.dequeue = (void *)edfq_dequeue,
	.init = (void *)edfq_init,
	.reset = (void *)edfq_reset,
	.destroy = (void *)edfq_destroy,
	.id = "lanes_edfq",
};
