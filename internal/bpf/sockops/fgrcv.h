/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * fgrcv.h - a foreground download's harm, read on its receive side, so
 * that a background download may share beside it (rLEDBAT at
 * FG_SHARE_TARGET) and is held when it is harmed. Included by sockops.c.
 *
 * A socket that only receives gets no RTT samples (RTT_CB, fg_rtt): it
 * sends no data to be acknowledged. Its receive side has the kernel's
 * receive-side RTT (tcp_sock.rcv_rtt_est, from TCP timestamps: from our
 * TSval to the data echoing it, so it includes the downlink queue).
 *   - while a background download is active on the host (rLEDBAT saw its
 *     timed data within FG_RCV_WANT_NS: lanes_rl_active, stamped by
 *     rledbat_packet), a foreground socket established then, or giving an
 *     RTT sample then, asks for HDR_OPT_LEN_CB (each segment it sends, its
 *     ACKs included); otherwise no foreground socket pays for the callback;
 *   - at each such segment, when data arrived since the last one: the
 *     socket was seen (fg_tcp_seen: its harm can be told), and it is
 *     harmed when its receive-side RTT is above the smallest it had by
 *     more than FG_HARM_QD_US and the background's part puts it over
 *     (bg_part_harms, at its receive rate over FG_RCV_RATE_NS; fg_harm_mark,
 *     as fg_rtt).
 */
#ifndef LANES_FGRCV_H
#define LANES_FGRCV_H

#define FG_RCV_WANT_NS 1000000000ULL

/* a foreground socket's receive side */
struct fg_rcv_state {
	__u32 min_us;   /* the smallest receive-side RTT */
	__u32 last_nxt; /* rcv_nxt at the last look */
	__u64 rate_at;  /* the receive rate's window: its start */
	__u32 rate_nxt; /* rcv_nxt at its start */
	__u32 rate_Bps; /* bytes/s received over the last window */
};

#define FG_RCV_RATE_NS 50000000ULL /* the receive rate's window */

/* fg_rcv_rate updates a foreground download's receive rate. */
static __always_inline void fg_rcv_rate(struct fg_rcv_state *st, __u32 nxt, __u64 now)
{
	if (!st->rate_at) {
		st->rate_at = now;
		st->rate_nxt = nxt;
		return;
	}
	if (now - st->rate_at < FG_RCV_RATE_NS)
		return;
	st->rate_Bps = (__u64)(nxt - st->rate_nxt) * 1000000000ULL / (now - st->rate_at);
	st->rate_at = now;
	st->rate_nxt = nxt;
}

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fg_rcv_state);
} lanes_fg_rcv SEC(".maps");

/* fg_rcv_on: foreground sockets read their receive side now (a background
 * download may share: the rule is on, and one is active). */
static __always_inline int fg_rcv_on(void)
{
	__u32 zero = 0;
	__u64 *t;

	if (!CFG.yield || !(CFG.rl_share & RL_SHARE_ON))
		return 0;
	t = bpf_map_lookup_elem(&lanes_rl_active, &zero);
	return t && *t && bpf_ktime_get_ns() - *t < FG_RCV_WANT_NS;
}

/* fg_rcv_want asks for HDR_OPT_LEN_CB on a foreground socket while
 * fg_rcv_on. */
static __always_inline void fg_rcv_want(struct bpf_sock_ops *ops)
{
	if (!(ops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG) && fg_rcv_on())
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
}

/* fg_rcv reads a foreground socket's receive side (a segment is being
 * sent): seen when data arrived since the last segment, harmed when its
 * receive-side RTT stands FG_HARM_QD_US above its smallest. */
static __always_inline void fg_rcv(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct fg_rcv_state *st;
	struct tcp_sock *tp;
	__u32 rtt, nxt, qd, idx;
	__u64 now;

	if (!bsk || !CFG.yield || !(CFG.rl_share & RL_SHARE_ON))
		return;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	rtt = tp->rcv_rtt_est.rtt_us >> 3;
	if (!rtt)
		return;
	st = bpf_sk_storage_get(&lanes_fg_rcv, bsk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	nxt = tp->rcv_nxt;
	if (nxt == st->last_nxt)
		return;
	st->last_nxt = nxt;
	if (!st->min_us || rtt < st->min_us)
		st->min_us = rtt;
	qd = rtt - st->min_us;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	fg_rcv_rate(st, nxt, now);
	fg_seen_mark(idx, now);
	if (idx)
		fg_seen_mark(0, now);
	if (qd <= FG_HARM_QD_US || !bg_part_harms(idx, qd, st->rate_Bps, now))
		return;
	fg_harm_mark(idx, now, qd, 0);
	if (idx)
		fg_harm_mark(0, now, qd, 0);
}

#endif
