/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * bgpart.h - the background's part of a foreground's queue: which part of
 * a foreground socket's RTT excess holding the background would take
 * away. Included by sockops.c before yield.h.
 *
 * A foreground socket's smoothed RTT above its minimum (fg_rtt, fg_rcv)
 * is a queue, not the background's queue: on a link whose rate falls
 * below what the foreground sends (a cellular link) the foreground queues
 * behind itself, and the link's own slowdown reads as queue too. Holding
 * the background takes away what it has in flight beyond the hold's
 * YIELD_CWND segments, no more. Per interface, lanes_bg_part sums those
 * bytes over its background TCP sockets: an upload's packets in flight at
 * each ACK (RTT_CB), a download's window clamp (rLEDBAT's window, at each
 * segment it sends); each socket keeps the bytes it added
 * (lanes_bg_part_sk) and takes them back when it changes, closes or
 * leaves background. At a foreground sample above FG_HARM_QD_US, those
 * bytes at the foreground's own delivery rate are the relief a hold would
 * bring: the sample is harm (bg_part_harms) when the excess without them
 * is within FG_HARM_QD_US, that is when the background's part is what
 * puts the foreground over. Otherwise the background keeps sharing
 * (LEDBAT++ and rLEDBAT at FG_SHARE_TARGET answer the queue in
 * proportion). The foreground's rate is below the link's, so the relief
 * read is an upper bound (a hold when in doubt). No background TCP socket
 * counted within FG_HOLD_NS (only the QUIC/UDP class, or none), or no
 * rate: every sample above FG_HARM_QD_US is harm. CFG.harm_part 0 (the
 * default; the daemon's --harm-part, a lab switch, sets it): every such
 * sample is harm. Measured beside a stream that queues behind itself on
 * the LTE traces, the background's share did not rise with it: released,
 * LEDBAT++ at the share target reads that queue as its own (the hold
 * keeps its window, and gives it back).
 */
#ifndef LANES_SOCKOPS_BGPART_H
#define LANES_SOCKOPS_BGPART_H

#define BG_PART_SEGS 2 /* YIELD_CWND: what a hold leaves in flight */

/* lanes_bg_part[ifindex]: the background TCP sockets' bytes beyond the
 * hold's window (key 0: every interface's) */
struct bg_part {
	__s64 bytes;  /* summed over the sockets (atomic adds) */
	__u64 at;     /* the last socket's update, bpf_ktime_get_ns */
	__u64 spared; /* foreground samples above FG_HARM_QD_US not counted as harm */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct bg_part);
} lanes_bg_part SEC(".maps");

/* a background socket's share of lanes_bg_part */
struct bg_part_sk {
	__u32 bytes;
	__u32 idx;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bg_part_sk);
} lanes_bg_part_sk SEC(".maps");

/* bg_part_of is idx's entry, created empty if it has none. */
static __always_inline struct bg_part *bg_part_of(__u32 idx)
{
	struct bg_part *p = bpf_map_lookup_elem(&lanes_bg_part, &idx), fresh = {};

	if (p)
		return p;
	bpf_map_update_elem(&lanes_bg_part, &idx, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&lanes_bg_part, &idx);
}

/* bg_part_add adds delta bytes to idx's sum (and key 0's). */
static __always_inline void bg_part_add(__u32 idx, __s64 delta, __u64 now)
{
	struct bg_part *p = bg_part_of(idx);

	if (p) {
		__sync_fetch_and_add(&p->bytes, delta);
		p->at = now;
	}
	if (!idx)
		return;
	p = bg_part_of(0);
	if (p) {
		__sync_fetch_and_add(&p->bytes, delta);
		p->at = now;
	}
}

/* bg_part_set makes a background socket's share inflight bytes (its whole
 * in flight or window) beyond the hold's on interface idx. */
static __always_inline void bg_part_set(struct bpf_sock_ops *ops, __u32 idx, __u32 inflight, __u32 mss)
{
	struct bg_part_sk *s;
	__u32 held = BG_PART_SEGS * mss, bytes = inflight > held ? inflight - held : 0;
	__u64 now = bpf_ktime_get_ns();

	if (!ops->sk || !CFG.harm_part)
		return;
	s = bpf_sk_storage_get(&lanes_bg_part_sk, ops->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return;
	if (s->idx != idx && s->bytes) {
		bg_part_add(s->idx, -(__s64)s->bytes, now);
		s->bytes = 0;
	}
	s->idx = idx;
	bg_part_add(idx, (__s64)bytes - (__s64)s->bytes, now);
	s->bytes = bytes;
}

/* bg_part_drop takes a socket's share back (it closes or leaves
 * background). */
static __always_inline void bg_part_drop(struct bpf_sock_ops *ops)
{
	struct bg_part_sk *s;

	if (!ops->sk)
		return;
	s = bpf_sk_storage_get(&lanes_bg_part_sk, ops->sk, 0, 0);
	if (!s || !s->bytes)
		return;
	bg_part_add(s->idx, -(__s64)s->bytes, bpf_ktime_get_ns());
	s->bytes = 0;
}

/* bg_part_download makes a background download's share its receive
 * window clamp (rLEDBAT's window as applied, rl_state.applied; a socket
 * rLEDBAT never clamped, an upload, is left to bg_part_set at its ACKs). */
static __always_inline void bg_part_download(struct bpf_sock_ops *ops, __u32 idx)
{
	struct rl_state *st;

	if (!ops->sk || !CFG.harm_part)
		return;
	st = bpf_sk_storage_get(&lanes_rl_state, ops->sk, 0, 0);
	if (st && st->applied)
		bg_part_set(ops, idx, st->applied, ops->mss_cache);
}

/* bg_part_harms says whether a foreground sample qd_us above its minimum
 * (> FG_HARM_QD_US) on interface idx, delivering rate_bps bytes/s, is
 * harm: the background's part is not known, or without it the excess
 * would be within FG_HARM_QD_US. */
static __always_inline int bg_part_harms(__u32 idx, __u32 qd_us, __u64 rate_Bps, __u64 now)
{
	struct bg_part *p;
	__u64 relief_us;
	__s64 bytes;

	if (!CFG.harm_part || !rate_Bps)
		return 1;
	p = bpf_map_lookup_elem(&lanes_bg_part, &idx);
	if (!p || !p->at || now - p->at >= FG_HOLD_NS)
		return 1;
	bytes = p->bytes;
	if (bytes < 0)
		bytes = 0;
	relief_us = (__u64)bytes * 1000000 / rate_Bps;
	if ((__u64)qd_us <= FG_HARM_QD_US + relief_us)
		return 1;
	__sync_fetch_and_add(&p->spared, 1);
	return 0;
}

#endif
