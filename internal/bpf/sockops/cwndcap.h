/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * cwndcap.h - cwnd caps: the clamp sock_ops applies to a socket (its cap,
 * its lane's, the yield's minimum or LEDBAT++'s window, the smallest),
 * the switch of a capped CUBIC socket to capcc, TCP's internal pacing for
 * a capped socket, and the release of a clamp an earlier run left.
 * Included by sockops.c.
 *
 * cwnd cap: lanes_sock_cap[cookie], else lanes_lane_cap[lane]; 0 = none.
 * Applied with bpf_setsockopt(TCP_BPF_SNDCWND_CLAMP), which sets
 * snd_cwnd_clamp and snd_ssthresh only; the congestion control then never
 * grows cwnd past the clamp. The value last applied is kept in socket-local
 * storage so the setsockopt runs only when the cap changes (it resets
 * ssthresh each time). Removing a cap sets the clamp to CAP_NONE, which also
 * resets ssthresh: the socket probes upward in slow start from there.
 *
 * The clamp alone does not lower a cwnd that is already larger: CUBIC
 * applies it only when the socket is cwnd-limited. So when a socket gets its
 * first cap and runs "cubic", it is switched (bpf_setsockopt TCP_CONGESTION,
 * once per socket) to CFG.cc_name, this datapath's BPF congestion control
 * (internal/bpf/capcc: CUBIC plus snd_cwnd = min(snd_cwnd, clamp) on every
 * ACK), whose init brings cwnd down at once; later cap changes reach cwnd on
 * the next ACK. BBR applies the clamp on every ACK itself and is left alone,
 * as are reno and the rest (counted in cc_other). CFG.cc_name is empty when
 * the kernel cannot run it: then nothing is switched. A capped socket also
 * gets TCP's internal pacing (pace(), below), so it sends its window over
 * the RTT rather than in one burst.
 * (docs/datapath.md, "cwnd caps".)
 */
#ifndef LANES_SOCKOPS_CWNDCAP_H
#define LANES_SOCKOPS_CWNDCAP_H

/* a finite SO_MAX_PACING_RATE (bytes/s) that limits nothing: it only turns
 * on TCP's internal pacing */
#define PACING_ON 0x7fffffff

/* switch_cc moves a capped CUBIC socket to the lanes congestion control
 * (CUBIC plus an enforced clamp), once per socket. Its init pulls cwnd down
 * to the clamp just set; later cap changes reach cwnd on the next ACK. */
static __always_inline void switch_cc(struct bpf_sock_ops *ops, struct sk_state *st)
{
	char cur[CC_NAME_LEN] = {}, want[CC_NAME_LEN] = {};

	if (st->cc_checked || !CFG.cc_name[0])
		return;
	st->cc_checked = 1;
	if (bpf_getsockopt(ops, SOL_TCP, TCP_CONGESTION, cur, sizeof(cur))) {
		bump(OPS_CC_SWITCH_ERR);
		return;
	}
	if (cur[0] != 'c' || cur[1] != 'u' || cur[2] != 'b' || cur[3] != 'i' ||
	    cur[4] != 'c' || cur[5] != 0) {
		bump(OPS_CC_OTHER);
		return;
	}
	/* volatile reads: a plain copy of a const global gets folded to its
	 * all-zero initializer */
	for (int i = 0; i < CC_NAME_LEN; i++)
		want[i] = CFG.cc_name[i];
	if (bpf_setsockopt(ops, SOL_TCP, TCP_CONGESTION, want, sizeof(want)) == 0)
		bump(OPS_CC_SWITCH);
	else
		bump(OPS_CC_SWITCH_ERR);
}

/* release_stale_clamp: a socket an earlier lanes run of this namespace
 * handled (killed: its RTT callbacks still reach this program, which has no
 * state for the socket) keeps the cwnd clamp that run last set, a cap or
 * the yield's 2 segments, for as long as it lives. Clear it: this run
 * applies its own caps and yield from here. A clamp at or above CAP_NONE
 * (a removed cap, or the kernel's ~0) is no clamp. */
static __always_inline void release_stale_clamp(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock *tp;
	int val = CAP_NONE;

	if (!bsk)
		return;
	/* a clamp this run set has its socket storage (an evicted
	 * lanes_sock_seen entry must not lose it) */
	if (bpf_sk_storage_get(&lanes_sk_state, bsk, 0, 0))
		return;
	tp = (struct tcp_sock *)bpf_skc_to_tcp_sock(bsk);
	if (!tp || tp->snd_cwnd_clamp >= CAP_NONE)
		return;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &val, sizeof(val)) == 0)
		bump(OPS_CAP_SET);
	else
		bump(OPS_SETSOCKOPT_ERR);
}

/* pace turns on TCP's internal pacing for a capped socket, once: any finite
 * SO_MAX_PACING_RATE marks the socket as needing pacing, and without the fq
 * qdisc TCP then paces itself (an hrtimer per socket) at its pacing rate,
 * 1.2 x cwnd / srtt in congestion avoidance (tcp_pacing_ca_ratio). A
 * cwnd-limited socket otherwise sends its whole window in a burst as the
 * ACKs of the previous one arrive, so at a long RTT the shares of the
 * medium are uneven over any window shorter than the RTT. Pacing stays on
 * when the cap is removed (it limits nothing but the burst).
 * Note: a maximum rate of cap x MSS / min RTT instead (the cap's own rate)
 * measured worse in the lab (Jain per 200 ms 0.935 vs 0.983, RTT 1.10x vs
 * 1.06x at N = 4): the kernel's ratio follows the RTT as it is. */
static __always_inline void pace(struct bpf_sock_ops *ops, struct sk_state *st)
{
	int val = PACING_ON;

	if (st->paced)
		return;
	st->paced = 1;
	if (bpf_setsockopt(ops, SOL_SOCKET, SO_MAX_PACING_RATE, &val, sizeof(val)))
		bump(OPS_SETSOCKOPT_ERR);
}

/* the send time of the newest segment delivered (RACK's, tcp_clock_us) */
struct tcp_rack___lr {
	__u64 mstamp;
} __attribute__((preserve_access_index));

struct tcp_sock___lr {
	struct tcp_rack___lr rack;
} __attribute__((preserve_access_index));

/* acked_sent_us is when (tcp_clock_us) ops's newest acked segment was
 * sent, 0 where not known. */
static __always_inline __u64 acked_sent_us(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock___lr *tp;

	if (!bsk)
		return 0;
	tp = (struct tcp_sock___lr *)bpf_skc_to_tcp_sock(bsk);
	return tp ? BPF_CORE_READ(tp, rack.mstamp) : 0;
}

/* window_rate is ops's delivery rate in bytes/s over its window when the
 * window is full (then a new one starts), else 0: the bytes acked over
 * the longer of the time their ACKs took to arrive and the time they took
 * to be sent, as the kernel's own rate sample (tcp_rate.c). ACKs that
 * waited behind the other direction's queue arrive bunched as it drains:
 * by their arrival alone a 10 Mbit/s upload beside page loads read 13.5
 * and 16.4 Mbit/s. */
static __always_inline __u64 window_rate(struct bpf_sock_ops *ops, __u64 now)
{
	struct sk_state *st = sock_state(ops, BPF_SK_STORAGE_GET_F_CREATE);
	__u64 acked = ops->bytes_acked, win = (__u64)(ops->srtt_us >> 3) * 1000, span, sent, bytes;

	if (!st)
		return 0;
	sent = acked_sent_us(ops);
	if (!st->rate_at || acked < st->rate_acked) {
		st->rate_at = now;
		st->rate_acked = acked;
		st->rate_sent = sent;
		return 0;
	}
	span = now - st->rate_at;
	if (span < win || span < LINK_RATE_WIN_NS)
		return 0;
	if (!(CFG.yield & YIELD_RATE_BY_ACKS) && st->rate_sent && sent > st->rate_sent && (sent - st->rate_sent) * 1000 > span)
		span = (sent - st->rate_sent) * 1000;
	bytes = acked - st->rate_acked;
	st->rate_at = now;
	st->rate_acked = acked;
	st->rate_sent = sent;
	return bytes * 1000000000ULL / span;
}

/* link_rate_sample takes ops's delivery rate into its interface's
 * estimate. A global function: verified once, not at each call. */
__noinline int link_rate_sample(struct bpf_sock_ops *ops)
{
	struct link_rate *r, fresh;
	__u64 now = bpf_ktime_get_ns(), bps = window_rate(ops, now);
	__u32 idx;

	if (!bps)
		return 0;
	idx = sock_ifindex(ops);
	r = bpf_map_lookup_elem(&lanes_link_rate, &idx);
	if (!r) {
		fresh.bps = bps;
		fresh.at = now;
		bpf_map_update_elem(&lanes_link_rate, &idx, &fresh, BPF_NOEXIST);
		return 0;
	}
	if (bps >= link_rate_of(r, now)) {
		r->bps = bps;
		r->at = now;
	}
	return 0;
}

/* hold_pace paces a background socket the yield holds (held) at
 * 1/HOLD_RATE_DIV of its interface's capacity, where it is known, and
 * gives a released one TCP's own pacing back. */
static __always_inline void hold_pace(struct bpf_sock_ops *ops, struct sk_state *st, int held)
{
	struct link_rate *r;
	__u64 rate = 0;
	__u32 idx;
	int val;

	if (held) {
		idx = sock_ifindex(ops);
		r = bpf_map_lookup_elem(&lanes_link_rate, &idx);
		if (r)
			rate = link_rate_of(r, bpf_ktime_get_ns()) / HOLD_RATE_DIV;
	}
	if (rate) {
		if (rate < ops->mss_cache)
			rate = ops->mss_cache;
		val = rate < PACING_ON ? (int)rate : PACING_ON;
		st->hold_paced = 1;
		st->paced = 1;
	} else if (st->hold_paced) {
		val = PACING_ON;
		st->hold_paced = 0;
	} else {
		return;
	}
	if (bpf_setsockopt(ops, SOL_SOCKET, SO_MAX_PACING_RATE, &val, sizeof(val)))
		bump(OPS_SETSOCKOPT_ERR);
}

/* apply_cap sets the socket's cwnd clamp: its cap, the yield's, LEDBAT++'s
 * window. A global function (returns 0): the verifier checks it once, not
 * at each call (lanes_sockops: 105,450 instructions processed, now 65,335). */
__noinline int apply_cap(struct bpf_sock_ops *ops, __u64 cookie, __u32 lane)
{
	struct bpf_sock *sk = ops->sk;
	struct sk_state *st;
	__u32 want = 0, *c;
	int val, yield = 0, bgc = 0;

	if (!sk)
		return 0;
	c = bpf_map_lookup_elem(&lanes_sock_cap, &cookie);
	if (c && *c) {
		want = *c;
	} else {
		__u32 idx = lane ? lane : LANE_INTERACTIVE;

		c = bpf_map_lookup_elem(&lanes_lane_cap, &idx);
		if (c)
			want = *c;
	}
	/* the foreground-aware yield: background held at the minimum cwnd */
	if (lane == LANE_BACKGROUND && yielding(ops, FG_DIR_UP) && (!want || want > YIELD_CWND)) {
		want = YIELD_CWND;
		yield = 1;
	}
	/* without a BPF congestion control: LEDBAT++'s window as the clamp */
	if (lane == LANE_BACKGROUND)
		bgc = bgc_limit(ops, &want);
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0,
				want ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!st || st->applied_cap == want)
		return 0;
	val = want ? (int)want : CAP_NONE;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &val, sizeof(val)) == 0) {
		st->applied_cap = want;
		bump(yield ? OPS_YIELD : bgc ? OPS_BG_CLAMP : OPS_CAP_SET);
		/* LEDBAT++'s clamp leaves the system's congestion control
		 * and pacing alone (bgclamp.h) */
		if (want && !bgc) {
			switch_cc(ops, st);
			pace(ops, st);
		}
		/* every lane: a socket that leaves background while held
		 * (its app back at the top) gets TCP's own pacing back */
		hold_pace(ops, st, yield);
	} else {
		bump(OPS_SETSOCKOPT_ERR);
	}
	return 0;
}

#endif
