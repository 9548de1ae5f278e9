//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ledbat.c - LEDBAT++ (draft-irtf-iccrg-ledbat-plus-plus) as a BPF struct_ops
 * TCP congestion control: the background lane's scavenger. The window
 * arithmetic is in ledbat_core.h (shared with the test program
 * ledbat_step.c); this file maps the kernel's callbacks onto it:
 *   - init: fresh state in icsk_ca_priv, target = CFG.target_us;
 *   - beside a present foreground on the socket's interface (lanes_fg.h:
 *     the classifier's stamp, lanes_fg_active, handed over by the loader
 *     while the yield is on) the target is FG_SHARE_TARGET(CFG.target_us),
 *     with the share rule CFG.share (ledbat_core.h's ledbat_share: a
 *     gentler decrease, growth in proportion below the target, periodic
 *     slowdowns deferred);
 *   - pkts_acked: each ACK's delay feeds the base and current delay
 *     filters: the upload direction's queue from TCP timestamps
 *     (lanes_owd.h: the RTT above its minimum less the download
 *     direction's queue, the ACK's TSval to its arrival) over the path's
 *     minimum RTT, so that the download direction's queue its ACKs wait
 *     in (a foreground download beside it) is not this flow's; without
 *     timestamps the RTT sample (ack_sample.rtt_us). Beside a present
 *     foreground that download queue scales the window (ledbat_keep_rate):
 *     the rate kept while the ACKs wait (CFG.share's LEDBAT_F_RATE_UNKEPT,
 *     a lab switch, leaves it off);
 *   - a new socket counts itself in lanes_lb_joins; every other socket
 *     slows down on its next ack when the count changed (the host's flows
 *     make room for the latecomer: ledbat_slowdown_now);
 *   - cong_avoid: ledbat_ack with the packets acked, tcp_mstamp as the
 *     clock, srtt, and whether the socket is cwnd-limited (as
 *     tcp_is_cwnd_limited decides); before it ledbat_link_window with the
 *     window its link carries while a foreground is quiet there (fg_quiet)
 *     (lb_link_window: the account's lanes_link_rate, handed over by the
 *     loader with the presence map);
 *   - ssthresh (loss or ECN): ledbat_loss, ssthresh = cwnd / 2, the
 *     window before kept (lb_sk's loss_cwnd);
 *   - undo_cwnd (the kernel found the loss spurious: DSACKs, F-RTO or
 *     timestamps): that window back (lb_undo), at most the clamp;
 *   - every callback that may leave cwnd above snd_cwnd_clamp pulls it
 *     down (as capcc does), so the cooperative controller's caps and the
 *     foreground yield (sock_ops TCP_BPF_SNDCWND_CLAMP) hold on top; the
 *     window a clamp took is given back when the clamp rises above it
 *     (restore), so a background flow resumes where it was after a yield.
 * The name is set by the loader (one per lanes datapath; names are global);
 * registered through a struct_ops bpf_link on 6.4+, by a map update before
 * (internal/bpf/structops). No kfuncs: it runs wherever struct_ops TCP
 * congestion controls do.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "lanes_kernel.h"
#include "ledbat_core.h"
#include "lanes_fg.h"
#include "lanes_owd.h"
#include "lanes_linkrate.h"
#include "lanes_abi.h"

char __license[] SEC("license") = "GPL";

volatile const struct ledbat_config {
	__u32 target_us; /* queuing delay target */
	__u32 share;     /* LEDBAT_F_SHARE_* beside a present foreground, LB_RTT_DELAY, LEDBAT_F_RATE_UNKEPT */
} CFG = {.target_us = 25000, .share = LEDBAT_F_SHARE};

/* sk_ifindex is the device of the socket's cached route (as sock_ops'
 * sock_ifindex), 0 when it has none: then key 0, any interface. */
static __always_inline __u32 sk_ifindex(struct sock *sk)
{
	struct dst_entry *dst = sk->sk_dst_cache;
	struct net_device *dev;

	if (!dst)
		return 0;
	dev = dst->dev;
	if (!dev)
		return 0;
	return dev->ifindex;
}

/* the socket's state: LEDBAT++ and the window a clamp took away */
struct lb {
	struct ledbat l;
	__u32 held;       /* cwnd before a clamp pulled it down, 0 = none */
	__u32 joins_seen; /* lanes_lb_joins[0] when last looked at */
};

/* lanes_lb_joins[0] counts the background flows that started on this host
 * (every socket of this congestion control is one of its background
 * flows); a socket that sees it change slows down at once, so that the
 * newcomer measures the true base delay, not its elders' queue. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lanes_lb_joins SEC(".maps");

/* a socket's state beyond icsk_ca_priv (full): its one-way delays
 * (lanes_owd.h) and the window before its last loss */
struct lb_sk {
	struct owd owd;
	__u32 loss_cwnd; /* cwnd when ssthresh was last asked for, 0 = none */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct lb_sk);
} lanes_lb_sk SEC(".maps");

/* CFG.share's LB_RTT_DELAY: the RTT sample is the delay, timestamps or
 * not (a lab switch: the rule the upload direction's queue replaced) */
#define LB_RTT_DELAY 64
/* CFG.share's LB_NO_UNDO: a spurious loss's window is not given back (a
 * lab switch: the rule lb_undo replaced) */
#define LB_NO_UNDO 256

/* lb_delay is the delay of an ACK whose RTT sample is rtt_us: the upload
 * direction's queue over the path's minimum RTT, or rtt_us where the
 * connection has no timestamps; *other_us: the download direction's queue
 * (filtered as the upload's), 0 without timestamps. */
static __always_inline __u32 lb_delay(struct sock *sk, __u32 rtt_us, __u32 *other_us)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 up, down, base;
	struct lb_sk *s;

	*other_us = 0;
	if (CFG.share & LB_RTT_DELAY)
		return rtt_us;
	s = bpf_sk_storage_get(&lanes_lb_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s || !owd_read_ack(tp, &s->owd, rtt_us, tp->rtt_min.s[0].v, &up, &down))
		return rtt_us;
	*other_us = down;
	base = tp->rtt_min.s[0].v;
	if (!base || base > rtt_us)
		base = rtt_us;
	return base + up;
}

_Static_assert(sizeof(struct lb) <= 13 * sizeof(__u64), "struct lb outgrows icsk_ca_priv");

static __always_inline struct lb *lb(struct sock *sk)
{
	return (struct lb *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline struct ledbat *ca(struct sock *sk)
{
	return &lb(sk)->l;
}

/* lb_share sets the target for the next acks: beside a present foreground
 * FG_SHARE_TARGET and the share rule (CFG.share, ledbat_core.h's
 * LEDBAT_F_SHARE_*), the configured target otherwise. */
static __always_inline void lb_share(struct sock *sk)
{
	if (fg_held(sk_ifindex(sk), bpf_ktime_get_ns()))
		ledbat_share(ca(sk), FG_SHARE_TARGET(CFG.target_us), CFG.share);
	else
		ledbat_share(ca(sk), CFG.target_us, 0);
}

/* enforce sets snd_cwnd = min(snd_cwnd, snd_cwnd_clamp), remembering the
 * window it took away (a foreground yield or a cooperative cap). */
static __always_inline void enforce(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 clamp = tp->snd_cwnd_clamp;

	if (clamp && tp->snd_cwnd > clamp) {
		if (!lb(sk)->held)
			lb(sk)->held = tp->snd_cwnd;
		tp->snd_cwnd = clamp;
	}
}

/* restore gives back the window a clamp took once the clamp is above it
 * again (the yield ended: sock_ops set the clamp to "none", which also set
 * ssthresh to infinity), and puts ssthresh there, so LEDBAT++ resumes in
 * congestion avoidance where it was instead of slow-starting from 2. A
 * clamp that took nothing (LEDBAT++ had come down to it by itself) left
 * ssthresh at CAP_NONE all the same: outside the initial slow start it is
 * put back at the window, or the rule below ssthresh would slow-start
 * until the queue stood at 3/4 of the target, a filter's lag late (the
 * bottleneck's queue 123 KB, 100 ms, beside a video's segments). */
static __always_inline void restore(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 held = lb(sk)->held;

	if (!held) {
		if (tp->snd_ssthresh >= CAP_NONE && ca(sk)->phase != LEDBAT_SLOW_START)
			tp->snd_ssthresh = tp->snd_cwnd;
		return;
	}
	if (tp->snd_cwnd_clamp < held)
		return;
	if (tp->snd_cwnd < held)
		tp->snd_cwnd = held;
	tp->snd_ssthresh = held;
	lb(sk)->held = 0;
}

/* lb_link_window is the window, packets, that the socket's link carries at
 * its base delay (the account's capacity, lanes_link_rate) while a
 * foreground is quiet there (fg_quiet: its last stamp FG_QUIET_NS to
 * FG_RECENT_NS old; between a video's segments, whose own queue takes
 * 0.5 s to drain behind a CUBIC sender); 0 otherwise, and where the
 * capacity is unknown (the yield off: an empty map). Alone (no foreground
 * within FG_RECENT_NS) the flow finds the link by its own delay: the
 * capacity is a decaying maximum, and on a link whose rate falls it is a
 * window the link no longer carries. */
static __always_inline __u32 lb_link_window(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 idx = sk_ifindex(sk), mss = tp->mss_cache;
	__u64 now = bpf_ktime_get_ns(), win;
	struct link_rate *r;

	if (!idx || !mss || !fg_quiet(idx, now, 1))
		return 0;
	r = bpf_map_lookup_elem(&lanes_link_rate, &idx);
	if (!r)
		return 0;
	win = link_rate_of(r, now) * ledbat_base(ca(sk)) / 1000000 / mss;
	return win > 0xffff ? 0xffff : (__u32)win;
}

SEC("struct_ops")
void BPF_PROG(lanes_lb_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 zero = 0, *joins = bpf_map_lookup_elem(&lanes_lb_joins, &zero);

	ledbat_init(ca(sk), CFG.target_us, tp->tcp_mstamp);
	ca(sk)->flags |= CFG.share & LEDBAT_F_RATE_UNKEPT;
	lb(sk)->held = 0;
	lb(sk)->joins_seen = 0;
	if (joins) {
		__sync_fetch_and_add(joins, 1);
		lb(sk)->joins_seen = *joins;
	}
	enforce(sk);
}

SEC("struct_ops")
void BPF_PROG(lanes_lb_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 delay, other, was = ca(sk)->sother;
	struct ledbat_win w;

	if (sample->rtt_us <= 0)
		return;
	delay = lb_delay(sk, (__u32)sample->rtt_us, &other);
	ledbat_rtt(ca(sk), delay, other, tp->tcp_mstamp);
	w.cwnd = tp->snd_cwnd;
	w.ssthresh = tp->snd_ssthresh;
	ledbat_keep_rate(ca(sk), &w, was, fg_held(sk_ifindex(sk), bpf_ktime_get_ns()));
	tp->snd_cwnd = w.cwnd;
	tp->snd_ssthresh = w.ssthresh;
	enforce(sk);
}

SEC("struct_ops")
void BPF_PROG(lanes_lb_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct ledbat_win w;
	int limited = BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
	__u32 zero = 0, *joins = bpf_map_lookup_elem(&lanes_lb_joins, &zero);

	if (joins && *joins != lb(sk)->joins_seen) {
		lb(sk)->joins_seen = *joins;
		ledbat_slowdown_now(ca(sk), (__u32)tp->tcp_mstamp);
	}
	restore(sk);
	lb_share(sk);
	w.cwnd = tp->snd_cwnd;
	w.ssthresh = tp->snd_ssthresh;

	/* tcp_is_cwnd_limited: in slow start, also when cwnd < 2 * max_packets_out */
	if (!limited && w.cwnd < w.ssthresh && w.cwnd < 2 * tp->max_packets_out)
		limited = 1;
	ledbat_link_window(ca(sk), &w, lb_link_window(sk), CFG.target_us);
	ledbat_ack(ca(sk), &w, acked, (__u32)tp->tcp_mstamp, tp->srtt_us >> 3, limited);
	tp->snd_cwnd = w.cwnd;
	tp->snd_ssthresh = w.ssthresh;
	enforce(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(lanes_lb_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct lb_sk *s = bpf_sk_storage_get(&lanes_lb_sk, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (s)
		s->loss_cwnd = tp->snd_cwnd;
	return ledbat_loss(ca(sk), tp->snd_cwnd, (__u32)tp->tcp_mstamp, tp->srtt_us >> 3);
}

SEC("struct_ops")
void BPF_PROG(lanes_lb_set_state, struct sock *sk, __u8 new_state)
{
	enforce(sk);
}

SEC("struct_ops")
void BPF_PROG(lanes_lb_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	enforce(sk);
}

/* lb_undo is the window after a loss the kernel found spurious (DSACKs
 * for every retransmission, F-RTO, timestamps): the window before it, as
 * the kernel's own congestion controls give back. Behind the other
 * direction's queue a background upload's ACKs wait past its RTO (a page
 * load's download: 250-330 ms at an RTO of srtt + 200 ms): each such wait
 * took its window to 1 packet, and kept there it slow-started back from 1
 * after every page. */
static __always_inline __u32 lb_undo(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct lb_sk *s = bpf_sk_storage_get(&lanes_lb_sk, sk, 0, 0);
	__u32 cwnd = tp->snd_cwnd;

	if (s && !(CFG.share & LB_NO_UNDO) && s->loss_cwnd > cwnd)
		cwnd = s->loss_cwnd;
	return cwnd;
}

SEC("struct_ops")
__u32 BPF_PROG(lanes_lb_undo_cwnd, struct sock *sk)
{
	__u32 cwnd = lb_undo(sk), clamp = ((struct tcp_sock *)sk)->snd_cwnd_clamp;

	return clamp && cwnd > clamp ? clamp : cwnd;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops lanes_ledbat = {
	.init = (void *)lanes_lb_init,
	.ssthresh = (void *)lanes_lb_ssthresh,
	.cong_avoid = (void *)lanes_lb_cong_avoid,
	.set_state = (void *)lanes_lb_set_state,
	.cwnd_event = (void *)lanes_lb_cwnd_event,
	.pkts_acked = (void *)lanes_lb_pkts_acked,
	.undo_cwnd = (void *)lanes_lb_undo_cwnd,
	.name = "lanes_ledbat",
};
