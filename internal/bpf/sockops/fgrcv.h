/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * fgrcv.h - a foreground download's harm, read on its receive side, so
 * that background beside it is held in the direction it harms: a
 * background download when the download direction's queue stands, a
 * background upload when the foreground's ACKs wait behind it (its upload
 * direction's queue). Included by sockops.c.
 *
 * A socket that only receives gets no RTT samples (RTT_CB, fg_rtt): it
 * sends no data to be acknowledged. Its receive side has the data's TCP
 * timestamps (lanes_owd.h: the download direction from the data's TSval to
 * its arrival, the upload direction from our ACK's TSval to the data
 * echoing it) and, without them, the kernel's receive-side RTT
 * (tcp_sock.rcv_rtt_est: both directions).
 *   - while a background transfer is active on the host (lanes_rl_active:
 *     rLEDBAT saw a download's timed data, or an upload gave an RTT sample,
 *     within FG_RCV_WANT_NS), a foreground socket established then, or
 *     giving an RTT sample then, asks for HDR_OPT_LEN_CB (each segment it
 *     sends, its ACKs included); otherwise no foreground socket pays for
 *     the callback;
 *   - at each such segment, when an ACK of its data came since the last
 *     one: its upload direction's queue, for the interface's account
 *     (fg_ack_up);
 *   - at each such segment, when data arrived since the last one: the
 *     socket was seen (fg_tcp_seen: its harm can be told), and each
 *     direction whose queue stands more than FG_HARM_QD_US is harmed
 *     (fg_sample, as fg_rtt: the cause test); for harm the download
 *     direction's queue is the least over its round trip
 *     (owd_filter_span), not a nearly full link's passing queue, while the
 *     account's reading of it (fg_dir_queue) stays the least of 4 samples,
 *     as current as the QUIC/UDP class's probes that take it off theirs.
 */
#ifndef LANES_FGRCV_H
#define LANES_FGRCV_H

#define FG_RCV_WANT_NS 1000000000ULL

/* fg_rcv_on: foreground sockets read their receive side now (the yield
 * is on, and a background transfer is active). */
static __always_inline int fg_rcv_on(void)
{
	__u32 zero = 0;
	__u64 *t;

	if (!CFG.yield)
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

/* fg_ack_up reads a foreground socket's upload direction from the ACKs
 * that came since the last segment it sent (snd_una moved) into its
 * interface's account (fg_dir_queue): RTT_CB comes once per round trip
 * (tcp_rtt_estimator), seldom behind a standing queue (2 a second at
 * 440 ms), and a reading filtered over its samples then lags a growing
 * queue by seconds. */
static __always_inline void fg_ack_up(struct bpf_sock_ops *ops, struct tcp_sock *tp, struct owd_sock *st)
{
	__u32 una = tp->snd_una, up;

	if (una == st->last_una)
		return;
	st->last_una = una;
	if (!(CFG.yield & YIELD_JOINED) && owd_read_up(tp, &st->o, &up))
		fg_dir_queue(sock_ifindex(ops), bpf_ktime_get_ns(), FG_DIR_UP, up);
}

/* fg_rcv reads a foreground socket's receive side (a segment is being
 * sent): seen when data arrived since the last segment, harmed in its
 * download direction (the data's, over its peer's minimum: fgpath.h; not
 * the upload, its ACKs' way) when its queue stands FG_HARM_QD_US (without
 * timestamps: both, by its receive-side RTT above its smallest). */
static __always_inline void fg_rcv(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct owd_sock *st;
	struct tcp_sock *tp;
	__u32 rtt, nxt, qd, idx, up, down, now_ms, unit, base, span;
	__u64 now;

	if (!bsk || !CFG.yield)
		return;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	st = bpf_sk_storage_get(&lanes_owd, bsk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st)
		return;
	fg_ack_up(ops, tp, st);
	nxt = tp->rcv_nxt;
	if (nxt == st->last_nxt)
		return;
	st->last_nxt = nxt;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	if (!(CFG.yield & YIELD_JOINED) && owd_raw(tp, &up, &down, &now_ms, &unit)) {
		base = owd_base(&st->o.down, down, now_ms);
		if (unit == 1000) /* the peer's minimum (fgpath.h), in ms as it keeps it */
			base = fg_path_down(ops, down, now_ms, base);
		down -= base;
		span = owd_filter_span(&st->rtt_span, down, now_ms, (tp->rcv_rtt_est.rtt_us >> 3) / 1000) * unit;
		down = owd_filter(&st->o.down, down) * unit;
		fg_seen_mark(idx, now);
		if (idx)
			fg_seen_mark(0, now);
		fg_dir_queue(idx, now, FG_DIR_DOWN, down);
		fg_sample(idx, now, FG_QD_UNREAD, span, FG_HARM_KIND_DELAY, tp->rcv_rtt_est.rtt_us >> 3);
		return;
	}
	rtt = tp->rcv_rtt_est.rtt_us >> 3;
	if (!rtt)
		return;
	if (!st->min_rcv_us || rtt < st->min_rcv_us)
		st->min_rcv_us = rtt;
	qd = rtt - st->min_rcv_us;
	fg_seen_mark(idx, now);
	if (idx)
		fg_seen_mark(0, now);
	fg_sample(idx, now, qd, qd, FG_HARM_KIND_DELAY, rtt);
}

#endif
