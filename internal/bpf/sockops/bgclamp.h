/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * bgclamp.h - the background upload's LEDBAT++ without struct_ops: where no
 * BPF congestion control can be registered (a kernel without struct_ops
 * TCP congestion controls, Android's loaders), a background socket keeps
 * the system's congestion control and sock_ops holds its cwnd under
 * LEDBAT++'s window with TCP_BPF_SNDCWND_CLAMP. Included by sockops.c;
 * on only when the loader sets CFG.bg_clamp_target_us (then
 * CFG.bg_cc_name is empty).
 *
 *   - bgc_rtt, at each RTT callback of a background socket
 *     (BPF_SOCK_OPS_RTT_CB: an ACK that gave an RTT sample):
 *       delay: the sample (args[0], the measured RTT, Linux 6.10+; the
 *         smoothed RTT before) into the LEDBAT++ filters (ledbat_core.h,
 *         the arithmetic the congestion control runs): queuing delay =
 *         current delay - the socket's minimum;
 *       progress: snd_una's advance in segments (mss_cache) = packets acked;
 *       growth only while the socket is cwnd-limited and its cwnd has
 *         reached the window (the clamp is what limits it);
 *       loss: total_retrans grew, at most once per RTT: ledbat_loss;
 *       target: CFG.bg_clamp_target_us, FG_SHARE_TARGET of it beside a
 *         present foreground (as the congestion control);
 *       a new background upload counts itself in lanes_bgc_joins, the
 *         others slow down at once (ledbat_slowdown_now).
 *   - bgc_limit, in apply_cap: the clamp sock_ops applies is the smaller of
 *     the caps, the yield and this window. TCP_BPF_SNDCWND_CLAMP sets
 *     snd_cwnd_clamp and snd_ssthresh; the system's congestion control
 *     (CUBIC's tcp_cong_avoid_ai, tcp_slow_start) pulls cwnd down to the
 *     clamp at the next ACK of a cwnd-limited socket and grows it back up
 *     to it in slow start when the clamp rises.
 * Limits: the window follows ACKs with RTT samples only (a callback per
 * such ACK; snd_una's progress between them is counted at the next); the
 * system's own loss response comes on top of LEDBAT++'s.
 */
#ifndef LANES_BGCLAMP_H
#define LANES_BGCLAMP_H

#include "../ledbat/ledbat_core.h"

#define BGC_INIT_WND 10    /* packets, the kernel's initial cwnd */
#define BGC_MAX_WND 65535  /* packets */

/* a background socket's LEDBAT++ window, held as its cwnd clamp */
struct bgc_state {
	struct ledbat l;
	__u32 cwnd;       /* packets: the clamp */
	__u32 ssthresh;   /* packets */
	__u32 last_una;
	__u32 rem;        /* bytes acked, not yet a whole segment */
	__u32 last_retrans;
	__u32 t_loss;     /* us */
	__u32 joins_seen; /* lanes_bgc_joins[0] when last looked at */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bgc_state);
} lanes_bgc_state SEC(".maps");

/* lanes_bgc_joins[0] counts the background uploads that started (their
 * first RTT sample); the others slow down when it changes, so that the
 * newcomer measures the true base delay. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lanes_bgc_joins SEC(".maps");

/* the socket fields bgc_rtt reads beyond bpf_sock_ops */
struct tcp_sock___bgc {
	__u8 is_cwnd_limited : 1;
} __attribute__((preserve_access_index));

/* bgc_cwnd_limited: the sender had more to send than cwnd allowed in its
 * last window (tcp_is_cwnd_limited's flag). */
static __always_inline int bgc_cwnd_limited(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock___bgc *tp;

	if (!bsk)
		return 0;
	tp = (struct tcp_sock___bgc *)bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return 0;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

/* bgc_joined: a new upload counts itself; the others make room. */
static __always_inline void bgc_joined(struct bgc_state *st, __u32 now)
{
	__u32 zero = 0, *joins = bpf_map_lookup_elem(&lanes_bgc_joins, &zero);

	if (!joins)
		return;
	if (st->l.samples == 1 && !st->joins_seen)
		__sync_fetch_and_add(joins, 1);
	else if (*joins != st->joins_seen)
		ledbat_slowdown_now(&st->l, now);
	st->joins_seen = *joins;
}

/* bgc_rtt runs LEDBAT++ one RTT sample on: shared beside a present
 * foreground (the smaller target). */
static __noinline void bgc_rtt(struct bpf_sock_ops *ops, int shared)
{
	struct bpf_sock *bsk = ops->sk;
	struct bgc_state *st;
	struct ledbat_win w;
	__u32 rtt, srtt, una, mss, now, retrans, target = CFG.bg_clamp_target_us;
	__u64 now64;
	int limited;

	if (!bsk || !target)
		return;
	st = bpf_sk_storage_get(&lanes_bgc_state, bsk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	now64 = bpf_ktime_get_ns() / 1000;
	now = (__u32)now64;
	una = ops->snd_una;
	mss = ops->mss_cache;
	if (mss < 536)
		mss = 536;
	srtt = ops->srtt_us >> 3;
	if (!st->cwnd) {
		ledbat_init(&st->l, target, now64);
		st->cwnd = ops->snd_cwnd > BGC_INIT_WND ? ops->snd_cwnd : BGC_INIT_WND;
		st->ssthresh = 0x7fffffff;
		st->last_una = una;
		st->last_retrans = ops->total_retrans;
	}
	st->l.target_us = shared ? FG_SHARE_TARGET(target) : target;
	rtt = ops->args[0] ? ops->args[0] : srtt;
	ledbat_rtt(&st->l, rtt, now64);
	bgc_joined(st, now);
	w.cwnd = st->cwnd;
	w.ssthresh = st->ssthresh;
	retrans = ops->total_retrans;
	if (retrans != st->last_retrans) {
		st->last_retrans = retrans;
		if (!st->t_loss || ledbat_after(now, st->t_loss + (srtt ? srtt : 1000))) {
			w.ssthresh = ledbat_loss(&st->l, w.cwnd, now, srtt);
			w.cwnd = w.ssthresh;
			st->t_loss = now;
		}
	}
	st->rem += una - st->last_una;
	st->last_una = una;
	if (st->rem >= mss) {
		__u32 pk = st->rem / mss;

		st->rem -= pk * mss;
		limited = ops->snd_cwnd >= w.cwnd && bgc_cwnd_limited(ops);
		ledbat_ack(&st->l, &w, pk, now, srtt, limited);
	}
	if (w.cwnd > BGC_MAX_WND)
		w.cwnd = BGC_MAX_WND;
	st->cwnd = w.cwnd;
	st->ssthresh = w.ssthresh;
}

/* bgc_limit lowers *want (a cwnd clamp in segments, 0 = none) to the
 * socket's LEDBAT++ window; it returns whether the window is the clamp. */
static __always_inline int bgc_limit(struct bpf_sock_ops *ops, __u32 *want)
{
	struct bpf_sock *bsk = ops->sk;
	struct bgc_state *st;

	if (!bsk || !CFG.bg_clamp_target_us)
		return 0;
	st = bpf_sk_storage_get(&lanes_bgc_state, bsk, 0, 0);
	if (!st || !st->cwnd || (*want && *want <= st->cwnd))
		return 0;
	*want = st->cwnd;
	return 1;
}

#endif
