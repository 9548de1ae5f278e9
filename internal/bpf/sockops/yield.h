/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * yield.h - the foreground-aware yield's sock_ops side: which interface a
 * socket's packets leave by, whether background there is held (yielding)
 * or shares beside a present foreground (sharing), a foreground
 * connection's opening (fg_opened) and a foreground socket's RTT samples,
 * harmed or only seen (fg_rtt: lanes_fg_harm). Included by sockops.c.
 *
 * The foreground-aware yield is per egress interface: a background socket
 * yields while the foreground is active on the interface its packets leave
 * by (sock_ifindex), not on another one: lanes_fg_active, stamped by the
 * classifier, and lanes_fg_open, written here at a foreground connection's
 * opening (lanes_maps.h's fg_yield), hold its sockets at the minimum
 * window (cwnd and receive window); key 0, stamped with any interface,
 * holds the sockets whose interface is not known.
 */
#ifndef LANES_SOCKOPS_YIELD_H
#define LANES_SOCKOPS_YIELD_H

#define YIELD_CWND 2 /* segments, the cwnd (and receive window) of a yield */

/* sock_ifindex is the interface the socket's packets leave by: the device
 * of its cached route (sk_dst_cache, which the kernel sets at connect and
 * accept and renews when the route changes), else the device it is bound
 * to, else 0 (not known: a request socket, a route being renewed). */
static __always_inline __u32 sock_ifindex(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct sock *sk;
	__u32 idx = 0;

	if (!bsk)
		return 0;
	sk = (struct sock *)bpf_skc_to_tcp_sock(bsk);
	if (sk)
		idx = BPF_CORE_READ(sk, sk_dst_cache, dev, ifindex);
	if (!idx)
		idx = bsk->bound_dev_if;
	return idx;
}

/* yielding: the yield is on (CFG.yield) and the socket's interface (or,
 * not known, any) holds background at the minimum (lanes_maps.h's
 * fg_yield: a harmed foreground socket, a foreground connection's opening). */
static __always_inline int yielding(struct bpf_sock_ops *ops)
{
	__u32 idx;
	__u64 now;

	if (!CFG.yield)
		return 0;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	return fg_yield(idx, now);
}

#define FG_AT_CONNECT 0 /* fg_opened's at: the SYN is about to leave */
#define FG_AT_ACTIVE 1  /* our SYN was answered */
#define FG_AT_PASSIVE 2 /* a connection was accepted */

/* fg_opened records a foreground connection's opening (the yield on): at
 * connect until the handshake ends (at most FG_OPEN_HOLD_NS), at the
 * handshake's end (active: shortening the hold its connect began; passive:
 * a hold of its own) for FG_OPEN_RTTS of its RTT. Not where the
 * foreground is already present (the classifier's stamp): background
 * already keeps only FG_SHARE_TARGET of queue there, which a new
 * connection's first round trips pay little for, and a foreground that
 * opens a connection every few hundred ms would hold it for good. */
static __always_inline void fg_opened(struct bpf_sock_ops *ops, __u32 lane, int at)
{
	__u64 now, hold = FG_OPEN_HOLD_NS, rtt, *end;
	__u32 idx;

	if (!CFG.yield || lane == LANE_BACKGROUND)
		return;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	if (at == FG_AT_ACTIVE) { /* only a hold its connect began */
		end = bpf_map_lookup_elem(&lanes_fg_open, &idx);
		if (!end || now >= *end)
			return;
	} else if (fg_held(idx, now)) {
		return;
	}
	if (at != FG_AT_CONNECT) {
		rtt = (__u64)(ops->srtt_us >> 3) * 1000;
		if (FG_OPEN_RTTS * rtt < hold)
			hold = FG_OPEN_RTTS * rtt;
	}
	now += hold;
	bpf_map_update_elem(&lanes_fg_open, &idx, &now, BPF_ANY);
}

/* sharing: the yield is on and the socket's interface (or, not known, any)
 * has a foreground present (the classifier's stamp): a background upload
 * keeps FG_SHARE_TARGET of queue instead of its target (LEDBAT++, in its
 * congestion control); a background download is held at the minimum
 * (rLEDBAT's receive-side RTT is too coarse for that target: beside a
 * paced download the probe's p95 rose by 87 ms). */
static __always_inline int sharing(struct bpf_sock_ops *ops)
{
	if (!CFG.yield)
		return 0;
	return fg_held(sock_ifindex(ops), bpf_ktime_get_ns());
}

/* the foreground socket's RTT state that fg_rtt reads */
struct minmax_sample___fg {
	__u32 t;
	__u32 v;
};

struct tcp_sock___fg {
	struct {
		struct minmax_sample___fg s[3];
	} rtt_min;
	__u32 max_packets_out;
	__u8 is_cwnd_limited : 1;
	__u32 rate_delivered;
	__u32 rate_interval_us;
} __attribute__((preserve_access_index));

/* fg_harm_of is idx's harm entry, created empty if it has none. */
static __always_inline struct fg_harm *fg_harm_of(__u32 idx)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx), fresh = {};

	if (h)
		return h;
	bpf_map_update_elem(&lanes_fg_harm, &idx, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&lanes_fg_harm, &idx);
}

/* fg_seen_mark records that a foreground TCP socket on idx gave an RTT
 * sample (fg_tcp_seen). */
static __always_inline void fg_seen_mark(__u32 idx, __u64 now)
{
	struct fg_harm *h = fg_harm_of(idx);

	if (h)
		h->seen = now;
}

/* fg_harm_mark records a harmed foreground sample on idx. */
static __always_inline void fg_harm_mark(__u32 idx, __u64 now, __u32 qd, __u32 limited)
{
	struct fg_harm *h = fg_harm_of(idx);

	if (!h)
		return;
	if (!h->at || now - h->at >= FG_HARM_HOLD_NS)
		h->since = now;
	h->at = now;
	h->samples++;
	h->qd_us = qd;
	h->limited = limited;
}

/* fg_rate is a foreground socket's last delivery rate sample, bytes/s (0:
 * none yet). */
static __always_inline __u64 fg_rate(struct bpf_sock_ops *ops, struct tcp_sock___fg *tp)
{
	__u32 us = tp->rate_interval_us;

	if (!us)
		return 0;
	return (__u64)tp->rate_delivered * ops->mss_cache * 1000000 / us;
}

/* fg_rtt reads a foreground socket's RTT sample: it is harmed when its
 * smoothed RTT is above its minimum by more than FG_HARM_QD_US, or when it
 * is cwnd-limited in congestion avoidance (it would send more than the
 * path takes: a bulk transfer); a delay only where the background's part
 * of it puts it over (bgpart.h). Then background on its interface is held
 * (fg_yield) for FG_HARM_HOLD_NS. In slow start the window limits every
 * flow that has data; there only the delay counts. */
static __always_inline void fg_rtt(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock___fg *tp;
	__u32 srtt, min, qd = 0, limited = 0, idx;
	__u64 now;

	if (!CFG.yield || !bsk)
		return;
	tp = (struct tcp_sock___fg *)bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	srtt = ops->srtt_us >> 3;
	min = tp->rtt_min.s[0].v;
	if (min && min != ~0U && srtt > min)
		qd = srtt - min;
	if (ops->snd_cwnd >= ops->snd_ssthresh)
		limited = BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	fg_seen_mark(idx, now);
	if (idx)
		fg_seen_mark(0, now);
	if (qd <= FG_HARM_QD_US && !limited)
		return;
	if (!limited && !bg_part_harms(idx, qd, fg_rate(ops, tp), now))
		return;
	fg_harm_mark(idx, now, qd, limited);
	if (idx)
		fg_harm_mark(0, now, qd, limited);
}

#endif
