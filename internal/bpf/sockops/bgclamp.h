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
 *   - bgc_rtt, at each RTT callback of a background socket: bgc_step
 *     (bgclamp_core.h, shared with the Android form) on the socket's state
 *     in socket storage; target CFG.bg_clamp_target_us, FG_SHARE_TARGET of
 *     it with the share rule CFG.bg_clamp_share beside a present
 *     foreground (as the congestion control).
 *   - bgc_limit, in apply_cap: the clamp sock_ops applies is the smaller of
 *     the caps, the yield and this window. TCP_BPF_SNDCWND_CLAMP sets
 *     snd_cwnd_clamp and snd_ssthresh; the system's congestion control
 *     (CUBIC's tcp_cong_avoid_ai, tcp_slow_start) pulls cwnd down to the
 *     clamp at the next ACK of a cwnd-limited socket and grows it back up
 *     to it in slow start when the clamp rises. Not paced, unlike a capped
 *     socket: paced, the probe's p95 above idle at the remote bottleneck
 *     was +11 to +28 ms and background's share 60 to 98 % in three runs;
 *     unpaced +8.1 to +10.1 ms and 100 % in four (docs/results/android.md).
 * Limits: the window follows ACKs with RTT samples only (a callback per
 * such ACK; snd_una's progress between them is counted at the next); the
 * system's own loss response comes on top of LEDBAT++'s.
 */
#ifndef LANES_BGCLAMP_H
#define LANES_BGCLAMP_H

#include "bgclamp_core.h"

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

/* bgc_rtt runs LEDBAT++ one RTT sample on: shared beside a present
 * foreground (the smaller target and the share rule). */
static __noinline void bgc_rtt(struct bpf_sock_ops *ops, int shared)
{
	struct bpf_sock *bsk = ops->sk;
	struct bgc_state *st;
	__u32 target = CFG.bg_clamp_target_us, zero = 0;

	if (!bsk || !target)
		return;
	st = bpf_sk_storage_get(&lanes_bgc_state, bsk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	bgc_step(st, ops, shared ? FG_SHARE_TARGET(target) : target, shared ? CFG.bg_clamp_share : 0,
		 bgc_cwnd_limited(ops), bpf_map_lookup_elem(&lanes_bgc_joins, &zero));
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
