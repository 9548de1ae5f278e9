/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * rwndcap.h - the cooperative controller's downlink caps in the sock_ops
 * program: a receiving host limits the window it advertises on each capped
 * download, so the remote sender (whatever its congestion control) keeps
 * at most its share of the access point's downlink in flight. Included by
 * sockops.c, after rledbat.h (whose lanes_sock_rwnd map it reads).
 *
 *   - lanes_sock_rwnd[cookie]: the socket's downlink cap in bytes (0 or
 *     absent = none), written by the daemon (internal/coop via the
 *     datapath); rLEDBAT reads the same map for background sockets and
 *     applies the smaller of its own window and the cap, so a background
 *     download never runs coop_rwnd as well.
 *   - lanes_rwnd_on[0] != 0 while a controller may write caps: sockets
 *     established then (and live ones at their next RTT sample) ask for
 *     HDR_OPT_LEN_CB, which the kernel calls for every segment the socket
 *     sends, its ACKs included, before it computes the advertised window;
 *     off, no socket pays for the callback.
 *   - coop_rwnd, on that callback: TCP_WINDOW_CLAMP = the cap, applied when
 *     it changes or when autotuning raised window_clamp past it (the
 *     larger value seen is remembered as the socket's own); a removed cap
 *     restores the socket's own window_clamp.
 *   - A new cap is reached over the next window of data received, not at
 *     once (rwnd_ramp: the receiver's proportional rate reduction): from
 *     the clamp in force F (for a first cap, the bytes received in the
 *     last srtt: what the sender had in flight, of a window autotuning
 *     may have offered several times larger), the clamp moves to the new
 *     cap C linearly in the bytes received, so each byte that arrives lets
 *     the sender send C/F bytes and it keeps sending over the whole RTT.
 *     A clamp lowered at once held the right edge (but for the rounding of
 *     each window up to whole units of the window scale) until F - C bytes
 *     had arrived: the sender paused, then sent its C bytes at the pace of
 *     the round's last ACKs, its data squeezed into about C/F of the RTT,
 *     a hole that the ACK clock of a window-limited sender kept round
 *     after round (docs/results/coop-downlink.md: "the downlink's
 *     Jain per 200 ms at 16 downloads"); a raised clamp let it send C - F bytes
 *     in one burst.
 *   - Never retracting the right edge: the kernel does not shrink a window
 *     it has offered (net.ipv4.tcp_shrink_window = 0, the default; before
 *     6.5 always), so a smaller clamp takes effect as the application reads.
 * Note: a refused bpf_setsockopt(TCP_WINDOW_CLAMP) is counted (rwnd_err)
 * and the socket is left alone from then on.
 */
#ifndef LANES_RWNDCAP_H
#define LANES_RWNDCAP_H

/* lanes_rwnd_on[0]: downlink caps in use (sockets ask for the callback) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lanes_rwnd_on SEC(".maps");

/* per-socket state of the downlink cap */
struct rwnd_state {
	__u32 applied; /* window clamp set, bytes (0 = no cap applied) */
	__u32 own;     /* the socket's own window_clamp, restored on removal */
	__u32 refused; /* bpf_setsockopt(TCP_WINDOW_CLAMP) was refused */
	__u32 target;  /* the cap the clamp is moving to, bytes (0 = none) */
	__u32 from;    /* the clamp when the cap changed, bytes (0 = no ramp) */
	__u32 seq0;    /* rcv_nxt when the cap changed */
	__u32 round_seq;   /* rcv_nxt at the start of the current round */
	__u32 round_bytes; /* bytes received in the last round of one srtt (0 = none yet) */
	__u64 round_t;     /* the current round's start, tcp_mstamp (us) */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rwnd_state);
} lanes_rwnd_state SEC(".maps");

/* rwnd_on reports whether downlink caps are in use. */
static __always_inline int rwnd_on(void)
{
	__u32 zero = 0, *on = bpf_map_lookup_elem(&lanes_rwnd_on, &zero);

	return on && *on;
}

/* rwnd_want_cb asks for HDR_OPT_LEN_CB while downlink caps are in use. */
static __always_inline void rwnd_want_cb(struct bpf_sock_ops *ops)
{
	if (rwnd_on() && !(ops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG))
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags |
					       BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
}

/* rwnd_setclamp sets TCP_WINDOW_CLAMP; it reports success. */
static __always_inline int rwnd_setclamp(struct bpf_sock_ops *ops, struct rwnd_state *st, __u32 v)
{
	int val = v;

	if (bpf_setsockopt(ops, SOL_TCP, TCP_WINDOW_CLAMP, &val, sizeof(val)) == 0)
		return 1;
	st->refused = 1;
	bump(OPS_RWND_ERR);
	return 0;
}

/* rwnd_round counts the bytes received per srtt (for a download, the
 * handshake's RTT: the path's base RTT), what a sender that our window
 * does not yet hold has in flight. */
static __always_inline void rwnd_round(struct rwnd_state *st, __u64 now, __u32 nxt, __u32 srtt)
{
	if (!st->round_t || now < st->round_t) {
		st->round_t = now;
		st->round_seq = nxt;
		return;
	}
	if (!srtt || now - st->round_t < srtt)
		return;
	st->round_bytes = nxt - st->round_seq;
	st->round_seq = nxt;
	st->round_t = now;
}

/* rwnd_start begins the move to a new cap want: from the clamp in force,
 * or for a first cap from the bytes the last round brought (none yet, or
 * fewer than the cap: at once, the cap does not hold the sender). */
static __always_inline void rwnd_start(struct rwnd_state *st, __u32 nxt, __u32 want)
{
	st->from = st->applied ? st->applied : st->round_bytes > want ? st->round_bytes : 0;
	st->seq0 = nxt;
	st->target = want;
}

/* rwnd_ramp is the clamp d bytes after the cap changed: linear from the
 * clamp then (from) to the cap over from bytes received. */
static __always_inline __u32 rwnd_ramp(const struct rwnd_state *st, __u32 nxt)
{
	__u32 d = nxt - st->seq0, from = st->from, to = st->target;

	if (!from || d >= from || from == to)
		return to;
	if (to < from)
		return from - (__u32)((__u64)(from - to) * d / from);
	return from + (__u32)((__u64)(to - from) * d / from);
}

/* coop_rwnd applies the socket's downlink cap (a segment is being sent). */
static __always_inline void coop_rwnd(struct bpf_sock_ops *ops, __u64 cookie)
{
	struct bpf_sock *bsk = ops->sk;
	struct rwnd_state *st;
	struct tcp_sock *tp;
	__u32 want = 0, *cap, cur, nxt, clamp;

	if (!bsk)
		return;
	cap = bpf_map_lookup_elem(&lanes_sock_rwnd, &cookie);
	if (cap)
		want = *cap;
	/* a download gets its state before its first cap, to count its rounds */
	st = bpf_sk_storage_get(&lanes_rwnd_state, bsk, 0,
				want || ops->data_segs_in ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!st || st->refused)
		return;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	cur = tp->window_clamp;
	nxt = tp->rcv_nxt;
	rwnd_round(st, tp->tcp_mstamp, nxt, ops->srtt_us >> 3);
	if (!want) {
		st->target = 0;
		if (st->applied && rwnd_setclamp(ops, st, st->own > cur ? st->own : cur)) {
			st->applied = 0;
			bump(OPS_COOP_RWND);
		}
		return;
	}
	if (!st->applied)
		st->own = cur;
	else if (cur > st->applied && cur > st->own)
		st->own = cur; /* autotuning grew the socket's own clamp */
	if (want != st->target) {
		rwnd_start(st, nxt, want);
		bump(OPS_COOP_RWND);
	}
	clamp = rwnd_ramp(st, nxt);
	if (clamp == st->applied && cur <= clamp)
		return;
	if (rwnd_setclamp(ops, st, clamp))
		st->applied = clamp;
}

#endif
