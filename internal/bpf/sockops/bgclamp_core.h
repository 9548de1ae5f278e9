/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * bgclamp_core.h - LEDBAT++'s window as a background socket's cwnd clamp,
 * one RTT callback at a time, free of maps, socket storage and CO-RE so
 * that two sock_ops programs share it: sockops.c (bgclamp.h: the state in
 * socket storage, the clamp applied with the caps and the yield) and the
 * Android form (internal/bpf/android/objects/bgclamp.c: the state by socket
 * cookie in a bpf_map_def hash, as Android's loaders read objects). The
 * window arithmetic is ledbat_core.h's, the congestion control's own.
 *
 * bgc_step, at an RTT callback (BPF_SOCK_OPS_RTT_CB: an ACK that gave an
 * RTT sample):
 *   delay: the sample (args[0], the measured RTT, Linux 6.10+; the
 *     smoothed RTT before) into the LEDBAT++ filters: queuing delay =
 *     current delay - the socket's minimum;
 *   progress: snd_una's advance in segments (mss_cache) = packets acked;
 *   growth only while the socket is cwnd-limited (the caller's reading)
 *     and its cwnd has reached the window (the clamp is what limits it);
 *   loss: total_retrans grew, at most once per RTT: ledbat_loss;
 *   a new background upload counts itself in *joins, the others slow down
 *     at once when it changes (ledbat_slowdown_now).
 * The clock is bpf_ktime_get_ns, the one tcp_mstamp is read from.
 */
#ifndef LANES_BGCLAMP_CORE_H
#define LANES_BGCLAMP_CORE_H

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
	__u32 joins_seen; /* *joins when last looked at */
	__u32 applied;    /* the clamp last set (the Android form), 0 = none */
};

/* bgc_joined: a new upload counts itself; the others make room. */
static __always_inline void bgc_joined(struct bgc_state *st, __u32 now, __u32 *joins)
{
	if (!joins)
		return;
	if (st->l.samples == 1 && !st->joins_seen)
		__sync_fetch_and_add(joins, 1);
	else if (*joins != st->joins_seen)
		ledbat_slowdown_now(&st->l, now);
	st->joins_seen = *joins;
}

/* bgc_step runs LEDBAT++ one RTT callback on with the queuing-delay target
 * target_us and the share flags share (LEDBAT_F_SHARE_*, 0: not sharing;
 * ledbat_share, as the congestion control); st->cwnd is then the clamp. */
static __always_inline void bgc_step(struct bgc_state *st, struct bpf_sock_ops *ops, __u32 target_us,
				     __u32 share, int cwnd_limited, __u32 *joins)
{
	struct ledbat_win w;
	__u32 rtt, srtt, una, mss, now, retrans;
	__u64 now64 = bpf_ktime_get_ns() / 1000;

	now = (__u32)now64;
	una = ops->snd_una;
	mss = ops->mss_cache;
	if (mss < 536)
		mss = 536;
	srtt = ops->srtt_us >> 3;
	if (!st->cwnd) {
		ledbat_init(&st->l, target_us, now64);
		st->cwnd = ops->snd_cwnd > BGC_INIT_WND ? ops->snd_cwnd : BGC_INIT_WND;
		st->ssthresh = 0x7fffffff;
		st->last_una = una;
		st->last_retrans = ops->total_retrans;
	}
	ledbat_share(&st->l, target_us, share);
	rtt = ops->args[0] ? ops->args[0] : srtt;
	ledbat_rtt(&st->l, rtt, 0, now64);
	bgc_joined(st, now, joins);
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
		ledbat_ack(&st->l, &w, pk, now, srtt, ops->snd_cwnd >= w.cwnd && cwnd_limited);
	}
	if (w.cwnd > BGC_MAX_WND)
		w.cwnd = BGC_MAX_WND;
	st->cwnd = w.cwnd;
	st->ssthresh = w.ssthresh;
}

#endif
