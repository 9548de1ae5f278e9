/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * yield.h - the foreground-aware yield's sock_ops side: which interface a
 * socket's packets leave by, whether background there is held (yielding)
 * or shares beside a present foreground (sharing), a foreground
 * connection's opening (fg_opened) and a foreground socket's RTT samples,
 * harmed or only seen (fg_rtt: lanes_fg_harm). Included by sockops.c.
 *
 * The foreground-aware yield is per egress interface and direction: a
 * background socket yields for a harm on the interface its packets leave
 * by (sock_ifindex), not on another one, and in its own direction (an
 * upload for the upload's queue, a download for the download's: each
 * read from TCP timestamps, lanes_owd.h), or for a foreground connection's
 * opening there (lanes_fg_open, written here; lanes_maps.h's fg_yield_dir),
 * held at the minimum window (cwnd and receive window); key 0, stamped
 * with any interface, holds the sockets whose interface is not known.
 * The directions are coupled where they are: a foreground download whose
 * ACKs wait behind an upload reads its upload direction's queue, which
 * holds background uploads.
 */
#ifndef LANES_SOCKOPS_YIELD_H
#define LANES_SOCKOPS_YIELD_H

#include "fgpath.h"

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

/* own_held: a background socket's own delay holds it in direction dir
 * (bg_own_delay: the socket's storage, its own path only). */
static __always_inline int own_held(struct bpf_sock_ops *ops, __u32 dir, __u64 now)
{
	struct sk_state *st = sock_state(ops, 0);

	return st && now < st->own_until[dir & 1];
}

/* class_own: idx's last harm is the QUIC/UDP class's own delay (kind own,
 * bgudp's MarkOwnHarm), which holds the class, not background sockets:
 * each socket reads its own delay (own_held). */
static __always_inline int class_own(__u32 idx)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx);

	return h && h->limited == FG_HARM_KIND_OWN;
}

/* yielding: the yield is on (CFG.yield) and the socket's interface (or,
 * not known, any) holds background in direction dir (FG_DIR_UP for its
 * cwnd, FG_DIR_DOWN for its receive window) at the minimum (lanes_maps.h's
 * fg_yield_dir: a foreground socket harmed in that direction, a foreground
 * connection's opening; with the lab's YIELD_JOINED either direction; not
 * the class's own delay: class_own), or its own delay beside an untold
 * foreground holds it (own_held). */
static __always_inline int yielding(struct bpf_sock_ops *ops, __u32 dir)
{
	__u32 idx;
	__u64 now;

	if (!CFG.yield)
		return 0;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	if (own_held(ops, dir, now))
		return 1;
	if (class_own(idx))
		return fg_opening(idx, now) || (idx && fg_opening(0, now)) ||
		       ((CFG.yield & YIELD_UNTOLD_HELD) && fg_untold(idx, now));
	return fg_yield_dir(idx, dir, now, CFG.yield & YIELD_UNTOLD_HELD, CFG.yield & YIELD_JOINED);
}

#define FG_AT_CONNECT 0 /* fg_opened's at: the SYN is about to leave */
#define FG_AT_ACTIVE 1  /* our SYN was answered */
#define FG_AT_PASSIVE 2 /* a connection was accepted */

/* lanes_fg_dest[the peer's address]: the last opening to it that held
 * (fg_opened at connect) and whether an opening to it was answered since.
 * An opening holds at most once per destination per FG_DEST_GAP_NS, and
 * not while the last one that held was never answered: a socket that
 * opens connect() every 300 ms to an address that never answers would
 * otherwise hold background for good. Keyed by address, not port. */
struct fg_dest_seen {
	__u64 held_at;	/* bpf_ktime_get_ns() of the last opening that held */
	__u64 answered; /* an opening to it was answered since (FG_AT_ACTIVE) */
	__u64 taken;	/* its hold took a place in lanes_fg_new_dest's budget */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fg_dest);
	__type(value, struct fg_dest_seen);
} lanes_fg_dest SEC(".maps");

#define FG_DEST_GAP_NS 1000000000ULL /* one initial RTO (RFC 6298) */
_Static_assert(FG_OPEN_HOLD_NS <= FG_DEST_GAP_NS, "an opening holds at most one initial RTO");

/* lanes_fg_new_dest[0]: the openings to addresses not seen before that
 * held and are not answered yet, in the window since start. At most
 * FG_NEW_DEST_HOLDS a FG_NEW_DEST_WINDOW_NS hold (an answer gives its
 * place back): a user who connect()s every 300 ms to a new silent address
 * each time held background 96 % of the time, one FG_OPEN_HOLD_NS per
 * address; now at most one hold in five seconds, a tenth of the time.
 * One budget for the host: while it is spent, a new peer's opening does
 * not hold background (its first round trips share as a present
 * foreground's do). */
struct fg_new_dest {
	__u64 start;
	__u64 unanswered;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fg_new_dest);
} lanes_fg_new_dest SEC(".maps");

#define FG_NEW_DEST_HOLDS 1
#define FG_NEW_DEST_WINDOW_NS 5000000000ULL
_Static_assert(FG_NEW_DEST_HOLDS * FG_OPEN_HOLD_NS * 10 <= FG_NEW_DEST_WINDOW_NS,
	       "unanswered openings hold at most a tenth of the time");

/* fg_new_dest_take takes a place in the budget of unanswered openings to
 * new addresses: 0 when it is spent. */
static __always_inline int fg_new_dest_take(__u64 now)
{
	__u32 k = 0;
	struct fg_new_dest *b = bpf_map_lookup_elem(&lanes_fg_new_dest, &k);

	if (!b)
		return 0;
	if (now - b->start >= FG_NEW_DEST_WINDOW_NS) {
		b->start = now;
		b->unanswered = 0;
	}
	if (b->unanswered >= FG_NEW_DEST_HOLDS)
		return 0;
	__sync_fetch_and_add(&b->unanswered, 1);
	return 1;
}

/* fg_new_dest_answered gives an answered opening's place back. */
static __always_inline void fg_new_dest_answered(void)
{
	__u32 k = 0;
	struct fg_new_dest *b = bpf_map_lookup_elem(&lanes_fg_new_dest, &k);

	if (b && b->unanswered > 0)
		__sync_fetch_and_sub(&b->unanswered, 1);
}

/* fg_dest_holds: an opening to ops's peer at connect may hold (and is
 * recorded as the last that did): none held within FG_DEST_GAP_NS, the
 * last that held was answered, and for a peer not seen before a place in
 * the budget of unanswered openings (lanes_fg_new_dest). At FG_AT_ACTIVE
 * it records the answer and says whether it is the first since the hold
 * (the hold is this handshake's to end; the peer forgotten: it may be).
 * A global function: the verifier checks it once, not at each call. */
__noinline int fg_dest_holds(struct bpf_sock_ops *ops, int at, __u64 now)
{
	struct fg_dest d = {};
	struct fg_dest_seen *seen, fresh = {.held_at = now};

	fg_dest_of(ops, &d);
	seen = bpf_map_lookup_elem(&lanes_fg_dest, &d);
	if (at == FG_AT_ACTIVE) {
		if (!seen)
			return 1;
		if (seen->answered)
			return 0;
		seen->answered = 1;
		if (seen->taken)
			fg_new_dest_answered();
		return 1;
	}
	if (seen && (!seen->answered || now - seen->held_at < FG_DEST_GAP_NS))
		return 0;
	if (!seen) {
		if (!fg_new_dest_take(now))
			return 0;
		fresh.taken = 1;
	}
	bpf_map_update_elem(&lanes_fg_dest, &d, &fresh, BPF_ANY);
	return 1;
}

/* first_flight_ns is the time ops's first flight (its congestion window)
 * takes at interface idx's upload capacity (lanes_link_rate), 0 where it
 * is not known. */
static __always_inline __u64 first_flight_ns(struct bpf_sock_ops *ops, __u32 idx, __u64 now)
{
	struct link_rate *r = bpf_map_lookup_elem(&lanes_link_rate, &idx);
	__u64 bps;

	if (!r)
		return 0;
	bps = link_rate_of(r, now);
	if (!bps)
		return 0;
	return (__u64)ops->snd_cwnd * ops->mss_cache * 1000000000ULL / bps;
}

/* fg_opened records a foreground connection's opening (the yield on): at
 * connect until the handshake ends (at most FG_OPEN_HOLD_NS, within one
 * initial RTO; at most once per destination per second and not after an
 * opening there that was never answered: fg_dest_holds), at the
 * handshake's end (active: the first answer since its peer's hold ends
 * that hold; a later connection's handshake left it extending the hold
 * 500 ms at a time where the upload estimate was low, and background was
 * held 84-96 % of the churn step on the LTE traces; passive: a hold of
 * its own) for FG_OPEN_RTTS of its RTT or its first flight's
 * time on the link (first_flight_ns), the longer. Two RTTs of a path
 * whose queue is empty are under a millisecond; a 10 KB POST's flight
 * takes 170 ms at 0.5 Mbit/s, and a QUIC upload that resumed into it
 * filled the 200 ms buffer behind it: 9-10 of its segments retransmitted
 * in 3 POSTs, 5.2-5.6 times as long as alone. Not where the
 * foreground is already present (the classifier's stamp): background
 * already keeps only FG_SHARE_TARGET of queue there, which a new
 * connection's first round trips pay little for, and a foreground that
 * opens a connection every few hundred ms would hold it for good. */
static __always_inline void fg_opened(struct bpf_sock_ops *ops, __u32 lane, int at)
{
	__u64 now, hold = FG_OPEN_HOLD_NS, rtt, flight, *end;
	__u32 idx;

	if (!CFG.yield || lane == LANE_BACKGROUND)
		return;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	if (at == FG_AT_ACTIVE) { /* only a hold its connect began */
		end = bpf_map_lookup_elem(&lanes_fg_open, &idx);
		if (!fg_dest_holds(ops, at, now) || !end || now >= *end)
			return;
	} else if (fg_held(idx, now)) {
		return;
	} else if (at == FG_AT_CONNECT && !fg_dest_holds(ops, at, now)) {
		return;
	}
	if (at != FG_AT_CONNECT) {
		rtt = (__u64)(ops->srtt_us >> 3) * 1000;
		rtt = FG_OPEN_RTTS * rtt;
		flight = first_flight_ns(ops, idx, now);
		if (flight > rtt)
			rtt = flight;
		if (rtt < hold)
			hold = rtt;
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

struct tcp_rack___fg {
	__u32 rtt_us; /* the RTT of the newest segment delivered (RACK's) */
} __attribute__((preserve_access_index));

struct tcp_sock___fg {
	struct {
		struct minmax_sample___fg s[3];
	} rtt_min;
	struct tcp_rack___fg rack;
	__u32 max_packets_out;
	__u8 is_cwnd_limited : 1;
} __attribute__((preserve_access_index));

/* ack_rtt is the RTT of the newest segment an ACK covers (RACK's), else
 * the smoothed RTT; at least 1 (sock_owd's ACK). */
static __always_inline __u32 ack_rtt(struct bpf_sock_ops *ops, struct tcp_sock___fg *tp)
{
	__u32 rtt = BPF_CORE_READ(tp, rack.rtt_us);

	if (!rtt)
		rtt = ops->srtt_us >> 3;
	return rtt ? rtt : 1;
}

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

/* fg_harm_mark records a harmed foreground sample on idx in direction dir
 * (FG_DIR_*; FG_DIR_BOTH: a sample that cannot tell) of a socket whose
 * RTT is rtt_us (0: not known): the direction is held FG_HARM_HOLD_NS or
 * 2 of its RTTs, the longer (a slow link's ACKs come further apart than
 * FG_HARM_HOLD_NS: 0.2 Mbit/s, 14 a second). */
static __always_inline void fg_harm_mark(__u32 idx, __u64 now, __u32 qd, __u32 limited, __u32 dir, __u32 rtt_us)
{
	struct fg_harm *h = fg_harm_of(idx);
	__u64 until = now + FG_HARM_HOLD_NS;

	if (!h)
		return;
	if (!h->at || now - h->at >= FG_HARM_HOLD_NS)
		h->since = now;
	h->at = now;
	h->samples++;
	h->qd_us = qd;
	h->limited = limited;
	if (2000ULL * rtt_us > FG_HARM_HOLD_NS)
		until = now + 2000ULL * rtt_us;
	if (dir != FG_DIR_DOWN && until > h->dir_until[FG_DIR_UP])
		h->dir_until[FG_DIR_UP] = until;
	if (dir != FG_DIR_UP && until > h->dir_until[FG_DIR_DOWN])
		h->dir_until[FG_DIR_DOWN] = until;
}

/* bg_own_delay reads a background socket's own queuing delay qd_us in
 * direction dir (an upload's upload direction, a download's download
 * direction) as the harm of a foreground no TCP sample speaks for: beside
 * an untold foreground (fg_untold: a call, a probe) on the socket's
 * interface, a delay above FG_HARM_QD_US holds that socket, and no other,
 * at the minimum for FG_HARM_HOLD_NS (own_held). At a shared bottleneck
 * every background flow crossing its queue reads that delay and holds
 * itself; a delay of one socket's own path (a peer that throttles or
 * delays its ACKs) holds only that socket, not other users' background on
 * the interface. Below it the background keeps FG_SHARE_TARGET by that
 * same delay (LEDBAT++, rLEDBAT). */
static __always_inline void bg_own_delay(struct bpf_sock_ops *ops, __u32 qd_us, __u32 dir)
{
	struct sk_state *st;
	__u64 now;

	if (!CFG.yield || (CFG.yield & YIELD_UNTOLD_HELD) || qd_us <= FG_HARM_QD_US)
		return;
	now = bpf_ktime_get_ns();
	if (!fg_untold(sock_ifindex(ops), now))
		return;
	st = sock_state(ops, BPF_SK_STORAGE_GET_F_CREATE);
	if (st)
		st->own_until[dir & 1] = now + FG_HARM_HOLD_NS;
}

/* bg_rtt reads a background upload's sample for bg_own_delay: its upload
 * direction's queue (lanes_owd.h: the download's queue its ACKs wait in is
 * not its harm); without timestamps the smaller of its smoothed RTT and
 * its newest segment's RTT (RACK's)
 * above the kernel's windowed minimum (itself of newest segments),
 * whatever its congestion control (LEDBAT++, the clamp's system CC). Both:
 * the smoothed RTT is of the oldest segment an ACK covers, so a socket
 * the yield holds at 2 segments, paced over the round trip (cwndcap.h),
 * reads the pacing gap as queue (+20 ms at a 40 ms round trip) and held
 * itself for good beside a UDP stream; the newest segment's alone is one
 * sample, which a stall of this host lifts. */
static __always_inline void bg_rtt(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock___fg *tp;
	__u32 rtt, last, min, up, down;

	if (!CFG.yield || !bsk)
		return;
	tp = (struct tcp_sock___fg *)bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	if (!(CFG.yield & YIELD_JOINED))
		rl_active_mark(); /* foreground downloads read their ACKs' way (fgrcv.h) */
	if (sock_owd(ops, (struct tcp_sock *)tp, ack_rtt(ops, tp), tp->rtt_min.s[0].v, &up, &down)) {
		bg_own_delay(ops, up, FG_DIR_UP);
		return;
	}
	rtt = ops->srtt_us >> 3;
	last = BPF_CORE_READ(tp, rack.rtt_us);
	if (last < rtt)
		rtt = last;
	min = tp->rtt_min.s[0].v;
	if (min && min != ~0U && rtt > min)
		bg_own_delay(ops, rtt - min, FG_DIR_UP);
}

/* bg_rcv_delay reads a background download's rLEDBAT delay (its download
 * direction's queue, rledbat.h's state) for bg_own_delay. */
static __always_inline void bg_rcv_delay(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct rl_state *st;

	if (!CFG.yield || !bsk)
		return;
	st = bpf_sk_storage_get(&lanes_rl_state, bsk, 0, 0);
	if (st && st->l.samples)
		bg_own_delay(ops, ledbat_queuing(&st->l), FG_DIR_DOWN);
}

#include "cause.h"

/* fg_rtt reads a foreground socket's sample (an ACK of its data): its
 * upload direction (lanes_owd.h: our data's way; the ACK's way is not
 * read, its delay is no harm to the data) is harmed when its queue stands
 * more than FG_HARM_QD_US and the cause test (cause.h) finds the queue
 * the background's; without timestamps the queue both ways is its smoothed
 * RTT above its minimum. The minimum is its path's (fgpath.h: the peer's
 * over all its connections), so that a new connection behind a standing
 * queue reads it. Its upload direction is harmed too
 * when it is cwnd-limited in congestion avoidance (it would send more than
 * the path takes: a bulk transfer). Then background in that direction on
 * its interface is held (fg_yield_dir) for FG_HARM_HOLD_NS. In slow start
 * the window limits every flow that has data; there only the delay
 * counts. */
static __always_inline void fg_rtt(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock___fg *tp;
	__u32 srtt, rtt, min, qd = 0, limited = 0, idx, up, down;
	__u64 now;

	if (!CFG.yield || !bsk)
		return;
	tp = (struct tcp_sock___fg *)bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	if (ops->snd_cwnd >= ops->snd_ssthresh)
		limited = BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	fg_seen_mark(idx, now);
	if (idx)
		fg_seen_mark(0, now);
	srtt = ops->srtt_us >> 3;
	rtt = ack_rtt(ops, tp);
	min = fg_path_min(ops, rtt, tp->rtt_min.s[0].v);
	if (sock_owd(ops, (struct tcp_sock *)tp, rtt, min, &up, &down)) {
		fg_sample(idx, now, up, FG_QD_UNREAD, limited, srtt);
		return;
	}
	if (srtt > min)
		qd = srtt - min;
	fg_sample(idx, now, qd, qd, limited, srtt);
}

#endif
