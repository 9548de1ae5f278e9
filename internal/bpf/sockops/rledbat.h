/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * rledbat.h - rLEDBAT (RFC 9840) in the sock_ops program: the receiving host
 * limits the window it advertises on background sockets so that a remote
 * sender (whatever its congestion control) keeps the downlink's queue near
 * the LEDBAT++ target. Included by sockops.c.
 *
 *   - HDR_OPT_LEN_CB, which the kernel calls for every segment a
 *     background socket sends (BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG, Linux
 *     5.10+), its ACKs included, just before it computes the window the
 *     segment advertises (no option space is asked for, so nothing is
 *     written). (PARSE_HDR_OPT_CB would be per received segment, but the
 *     kernel skips it on the receive fast path, which a bulk download takes.)
 *       delay: the download direction's queue from TCP timestamps
 *         (lanes_owd.h's owd_down_us: the data's TSval to its arrival in
 *         us, above its minimum, kept in the socket's rl_state) over
 *         the path's minimum RTT, at each segment's arrival, fed to the
 *         LEDBAT++ filters (ledbat_core.h, shared with the congestion
 *         control): the upload direction's queue, which our ACKs wait in,
 *         is not this flow's (it scales the growth: ledbat_inc). Without
 *         timestamps the kernel's receive-side
 *         RTT (tp->rcv_rtt_est: from our TSval to data echoing it, both
 *         directions' queues);
 *       progress: rcv_nxt's advance in segments (advmss) = packets "acked";
 *       loss: a new out-of-order segment (tp->rcv_ooopack), at most once per
 *         RTT, halves the window;
 *       the window (packets x advmss) is applied with bpf_setsockopt
 *         (TCP_WINDOW_CLAMP) when it changes; also the per-socket receive
 *         window cap lanes_sock_rwnd (bytes, the cooperative controller's
 *         downlink cap) and, while the foreground is active, the yield.
 *   - a new background download (its first timed data) counts itself in
 *     lanes_rl_joins; the others slow down at once (latecomer fairness on
 *     the host, as the congestion control does);
 *   - Never retracting the right edge: the kernel does not shrink an offered
 *     window (net.ipv4.tcp_shrink_window = 0, the default; before 6.5
 *     always), so a smaller clamp takes effect as data is consumed; autotuning
 *     may raise window_clamp with the receive buffer, and the next segment
 *     sets it back (the applied value is compared with the socket's).
 * Note: bpf_setsockopt accepts TCP_WINDOW_CLAMP on this kernel; where it
 * does not, each refusal is counted (rwnd_err) and the window is left alone.
 */
#ifndef LANES_RLEDBAT_H
#define LANES_RLEDBAT_H

#include "../ledbat/ledbat_core.h"
#include "lanes_linkrate.h"

#define RL_INIT_WND 10              /* packets, as an initial cwnd */
#define RL_MAX_WND 65535            /* packets */

/* receive-side state of a background socket */
struct rl_state {
	struct ledbat l;
	__u32 wnd;      /* packets */
	__u32 ssthresh; /* packets */
	__u32 last_nxt;
	__u32 rem;      /* bytes received, not yet a whole segment */
	__u32 applied;  /* window clamp last set, bytes (0 = never) */
	__u32 last_ooo;
	__u32 t_loss;
	__u32 last_rtt;
	__u32 refused;  /* bpf_setsockopt(TCP_WINDOW_CLAMP) was refused */
	__u32 joins_seen; /* lanes_rl_joins[0] when last looked at */
	__u32 slot_start; /* the counting slot's first packet, tcp_mstamp (us) */
	__u32 slot_pk;    /* packets received in the slot */
	__u32 link_wnd;   /* packets: the most received in one base delay */
	__u32 link_at;    /* when link_wnd was read, tcp_mstamp (us) */
	__u32 link_peak;  /* packets: the most ever received in one base delay */
	struct owd_dir down; /* the download direction's delay, us (owd_down_us) */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct rl_state);
} lanes_rl_state SEC(".maps");

/* lanes_rl_joins[0] counts background downloads that started (their first
 * timed data); the others slow down at once when it changes, so that the
 * newcomer measures the true base delay (ledbat_slowdown_now). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lanes_rl_joins SEC(".maps");

/* lanes_sock_rwnd (the receive window cap per socket cookie) is in
 * lanes_maps.h: the classifier reads it too (the ACK class). */

/* lanes_rl_active[0]: bpf_ktime_get_ns() of a background download's timed
 * data (rledbat_packet) or a background upload's RTT sample (yield.h's
 * bg_rtt), at most every FG_RCV_STAMP_NS. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lanes_rl_active SEC(".maps");

#define FG_RCV_STAMP_NS 10000000ULL

/* rl_active_mark: a background transfer is active now. */
static __always_inline void rl_active_mark(void)
{
	__u32 zero = 0;
	__u64 *t = bpf_map_lookup_elem(&lanes_rl_active, &zero), now;

	if (!t)
		return;
	now = bpf_ktime_get_ns();
	if (now - *t >= FG_RCV_STAMP_NS)
		*t = now;
}

/* rl_link_wnd is the socket's link window at now, packets: the most it
 * received in one base delay, halved every LINK_RATE_HALF_NS since (no
 * socket measures a download's capacity: this is what the link carried
 * while background had it). */
static __always_inline __u32 rl_link_wnd(const struct rl_state *st, __u32 now)
{
	__u32 halves = (now - st->link_at) / (__u32)(LINK_RATE_HALF_NS / 1000);

	return halves >= 32 ? 0 : st->link_wnd >> halves;
}

/* rl_link_count counts pk packets received at now into the slot; a slot
 * of at least one base delay ends there, its packets per base delay
 * raising the link window where they reach it (and the peak, which does
 * not decay). */
static __always_inline void rl_link_count(struct rl_state *st, __u32 pk, __u32 now)
{
	__u32 base = ledbat_base(&st->l), span = now - st->slot_start, got;

	st->slot_pk += pk;
	if (!base || span < base)
		return;
	got = (__u32)((__u64)st->slot_pk * base / span);
	if (got > st->link_peak)
		st->link_peak = got;
	if (got >= rl_link_wnd(st, now)) {
		st->link_wnd = got;
		st->link_at = now;
	}
	st->slot_start = now;
	st->slot_pk = 0;
}

/* rl_floor_mark records in lanes_rl_floor whether the background download
 * ops, by its interface (sock_ifindex), is at its floor now: its
 * window at LEDBAT_MIN_CWND with its queue above its target, where that
 * minimum is more than 1/HOLD_RATE_DIV of the most the socket ever
 * received in one base delay (a slow link's, or one it never had); written
 * only on a change. At 10 Mbit/s and 40 ms two packets are 1/17 of the
 * link: pacing them too cost a download beside an application-paced one
 * 0.07 of its share. Not inlined, and called with nothing live: the
 * program's stack and bgc_rtt's are at the verifier's 512 bytes. */
static __always_inline __u32 sock_ifindex(struct bpf_sock_ops *ops); /* yield.h */

__noinline int rl_floor_mark(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct rl_state *st;
	__u32 idx;
	__u64 *at, now;
	int floor;

	if (!bsk)
		return 0;
	st = bpf_sk_storage_get(&lanes_rl_state, bsk, 0, 0);
	/* a download without timed data yet is not at its floor: a mark an
	 * ended download left must not pace a new one's first ACKs */
	floor = st && st->l.samples && st->wnd <= LEDBAT_MIN_CWND && st->l.phase == LEDBAT_AVOID &&
		ledbat_queuing(&st->l) > st->l.target_us && st->link_peak < HOLD_RATE_DIV * LEDBAT_MIN_CWND;
	idx = sock_ifindex(ops);
	at = bpf_map_lookup_elem(&lanes_rl_floor, &idx);
	if (at ? !*at == !floor : !floor)
		return 0;
	now = floor ? bpf_ktime_get_ns() : 0;
	if (at)
		*at = now;
	else
		bpf_map_update_elem(&lanes_rl_floor, &idx, &now, BPF_ANY);
	return 0;
}

/* rledbat_packet runs on each incoming segment of a background socket:
 * yield holds it at the minimum window; share (CFG.rl_share's bits, 0: not
 * sharing) keeps FG_SHARE_TARGET of queue with LEDBAT++'s share rule;
 * quiet (a foreground quiet on its interface: fg_quiet) hands LEDBAT++ the
 * socket's link window (ledbat_link_window), as the congestion control
 * does for uploads. */
static __always_inline void rledbat_packet(struct bpf_sock_ops *ops, __u64 cookie, int yield, __u32 share, int quiet)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock *tp;
	struct rl_state *st;
	struct ledbat_win w;
	__u32 mss, nxt, rtt, ooo, now, clamp, *cap, *joins, zero = 0, up, down, base, raw, now_ms;
	__u64 now64;
	int val;

	if (!bsk || !CFG.rl_target_us)
		return;
	tp = bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	st = bpf_sk_storage_get(&lanes_rl_state, bsk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st || st->refused)
		return;
	now64 = tp->tcp_mstamp;
	now = (__u32)now64;
	nxt = tp->rcv_nxt;
	mss = tp->advmss;
	if (mss < 536)
		mss = 536;
	if (!st->wnd) {
		ledbat_init(&st->l, CFG.rl_target_us, now64);
		/* a receive window's offered edge is never retracted, so it
		 * cannot fall as fast as the ACKs drained from the other
		 * direction's queue free it: its rate is not kept through
		 * that queue (ledbat_keep_rate), its growth is scaled */
		st->l.flags |= LEDBAT_F_RATE_UNKEPT;
		st->wnd = RL_INIT_WND;
		st->ssthresh = 0x7fffffff;
		st->last_nxt = nxt;
		st->last_ooo = tp->rcv_ooopack;
		st->slot_start = now;
	}
	rtt = tp->rcv_rtt_est.rtt_us >> 3;
	if (tp->rx_opt.rcv_tsecr && !(CFG.yield & YIELD_JOINED)) {
		/* the download direction's queue over the path's RTT, at new
		 * data: our ACKs' queue (an upload beside it) is not this
		 * flow's */
		if (nxt != st->last_nxt && sock_owd(ops, tp, 0, 0, &up, &down) && owd_down_us(tp, &raw, &now_ms)) {
			base = tp->rtt_min.s[0].v;
			if (!base || base == ~0U)
				base = rtt ? rtt : 1000;
			ledbat_rtt(&st->l, base + owd_queue(&st->down, raw, now_ms), up, now64);
		}
	} else if (rtt && rtt != st->last_rtt) {
		ledbat_rtt(&st->l, rtt, 0, now64);
		st->last_rtt = rtt;
	}
	/* a socket that has received no timed data (an upload, a request) is
	 * left alone */
	if (!st->l.samples)
		return;
	rl_active_mark(); /* foreground sockets read their receive side (fgrcv.h) */
	joins = bpf_map_lookup_elem(&lanes_rl_joins, &zero);
	if (joins) {
		if (st->l.samples == 1 && !st->joins_seen)
			__sync_fetch_and_add(joins, 1);
		else if (*joins != st->joins_seen)
			ledbat_slowdown_now(&st->l, now);
		st->joins_seen = *joins;
	}
	w.cwnd = st->wnd;
	w.ssthresh = st->ssthresh;
	ooo = tp->rcv_ooopack;
	if (ooo != st->last_ooo) {
		st->last_ooo = ooo;
		if (!st->t_loss || ledbat_after(now, st->t_loss + (rtt ? rtt : 1000))) {
			w.ssthresh = ledbat_loss(&st->l, w.cwnd, now, rtt);
			w.cwnd = w.ssthresh;
			st->t_loss = now;
			bump(OPS_RL_LOSS);
		}
	}
	st->rem += nxt - st->last_nxt;
	st->last_nxt = nxt;
	if (st->rem >= mss) {
		__u32 pk = st->rem / mss;

		st->rem -= pk * mss;
		rl_link_count(st, pk, now);
		ledbat_share(&st->l, share ? FG_SHARE_TARGET(CFG.rl_target_us) : CFG.rl_target_us, share);
		ledbat_link_window(&st->l, &w, quiet ? rl_link_wnd(st, now) : 0, CFG.rl_target_us);
		ledbat_ack(&st->l, &w, pk, now, rtt, 1);
	}
	if (w.cwnd > RL_MAX_WND)
		w.cwnd = RL_MAX_WND;
	st->wnd = w.cwnd;
	st->ssthresh = w.ssthresh;

	clamp = w.cwnd * mss;
	cap = bpf_map_lookup_elem(&lanes_sock_rwnd, &cookie);
	if (cap && *cap && *cap < clamp)
		clamp = *cap;
	if (yield && clamp > LEDBAT_MIN_CWND * mss) {
		clamp = LEDBAT_MIN_CWND * mss;
		if (st->applied != clamp)
			bump(OPS_YIELD);
	}
	if (clamp == st->applied && tp->window_clamp <= clamp)
		return;
	val = clamp;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_WINDOW_CLAMP, &val, sizeof(val)) == 0) {
		st->applied = clamp;
		bump(OPS_RWND_SET);
	} else {
		st->refused = 1; /* this kernel refuses it: leave the window alone */
		bump(OPS_RWND_ERR);
	}
}

/* RL_RELEASE: the window clamp a socket that left background gets back, in
 * bytes; large enough to limit nothing (the receive buffer and its
 * autotuning bound the window from there). */
#define RL_RELEASE (RL_MAX_WND << 14)

/* rledbat_leave releases the window clamp rLEDBAT applied to a socket that
 * is no longer background (a move back to the foreground), once; its state
 * starts over if it comes back. */
static __always_inline void rledbat_leave(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct rl_state *st;
	int val = RL_RELEASE;

	if (!bsk || !CFG.rl_target_us)
		return;
	st = bpf_sk_storage_get(&lanes_rl_state, bsk, 0, 0);
	if (!st || !st->applied)
		return;
	st->applied = 0;
	st->wnd = 0;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_WINDOW_CLAMP, &val, sizeof(val)) == 0)
		bump(OPS_RWND_SET);
	else
		bump(OPS_RWND_ERR);
}

#endif
