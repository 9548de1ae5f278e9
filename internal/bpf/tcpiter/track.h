/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * track.h - tracked mode's state: per socket, the fingerprint of its last
 * record and its activity counters (struct track) in the hot map or, once
 * idle, in one of COLD cold maps; the gone ring for reported sockets that
 * closed; delta's quick check (quiet) and what it compares (remember).
 * Included by tcpiter.c, after record.h.
 */
#ifndef LANES_TCPITER_TRACK_H
#define LANES_TCPITER_TRACK_H

/* Per socket, in tracked mode: what was last reported of it, and its
 * activity counters then (delta's quick check). */
struct track {
	__u64 sum;      /* fingerprint of the last record written */
	__u64 cookie;
	__u64 sock;     /* sk_socket: set when the socket is accepted */
	__u32 reported; /* NEW, REPORTED (the reader holds it as a flow) or SKIPPED */
	__u32 dirty;    /* its state changed since (track) */
	__u32 segs_in, segs_out, copied_seq, write_seq, lane;
	__u32 idle; /* quick checks that found it quiet in a row */
};

enum { NEW = 0, REPORTED = 1, SKIPPED = 2 };

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct track);
} tracked SEC(".maps");

/* Cookies of reported sockets that closed (track). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 10);
} gone SEC(".maps");

/* Gone cookies the ring had no room for (the reader then resyncs with a
 * full walk), and the reader's sample number (set before each delta
 * walk): globals, which the reader maps into its memory, so a sample
 * costs no system call for them. */
__u64 lost_gone;
__u32 sample_no;

/* Set by the reader from its first walk (dump, which creates no storage:
 * ~0.8 us a socket) until a full walk of dump_track has tracked every
 * socket: meanwhile a socket that leaves the reported states without
 * storage may be one the reader holds, and track sends its cookie too. */
__u32 untracked;

/* Idle sockets are kept apart: one found quiet IDLE_AFTER times in a row
 * in the hot map (tracked) moves to the cold map of its cookie % COLD, and
 * a delta walk visits the hot map and one cold map in turn: an idle socket
 * costs nothing on COLD-1 samples out of COLD, and activity on it is
 * reported up to COLD-1 samples late (a state change at once: track moves
 * it back). One found active in its cold walk moves back to the hot map. */
#define IDLE_AFTER 10
#define COLD 8

/* Every field of a socket is compared about every CHECK_ALL_EVERY-th
 * delta walk (staggered by cookie), even if it looks quiet: what changes
 * without activity (see quiet) is reported at most that many samples late. */
#define CHECK_ALL_EVERY 48

#define COLD_MAP(n)                                      \
	struct {                                         \
		__uint(type, BPF_MAP_TYPE_SK_STORAGE);   \
		__uint(map_flags, BPF_F_NO_PREALLOC);    \
		__type(key, int);                        \
		__type(value, struct track);             \
	} cold##n SEC(".maps")
COLD_MAP(0);
COLD_MAP(1);
COLD_MAP(2);
COLD_MAP(3);
COLD_MAP(4);
COLD_MAP(5);
COLD_MAP(6);
COLD_MAP(7);

/* cold_get and cold_del reach cold map i with a constant map each. */
#define COLD_GET(n)     \
	case n:         \
		return bpf_sk_storage_get(&cold##n, sk, 0, flags)
static __always_inline struct track *cold_get(__u32 i, void *sk, __u64 flags)
{
	switch (i % COLD) {
		COLD_GET(0);
		COLD_GET(1);
		COLD_GET(2);
		COLD_GET(3);
		COLD_GET(4);
		COLD_GET(5);
		COLD_GET(6);
	default:
		return bpf_sk_storage_get(&cold7, sk, 0, flags);
	}
}

#define COLD_DEL(n)                               \
	case n:                                   \
		bpf_sk_storage_delete(&cold##n, sk); \
		break
static __always_inline void cold_del(__u32 i, void *sk)
{
	switch (i % COLD) {
		COLD_DEL(0);
		COLD_DEL(1);
		COLD_DEL(2);
		COLD_DEL(3);
		COLD_DEL(4);
		COLD_DEL(5);
		COLD_DEL(6);
	default:
		bpf_sk_storage_delete(&cold7, sk);
	}
}

/* to_cold moves a socket's entry from the hot map to its cold map. */
static __always_inline void to_cold(struct track *t, void *sk)
{
	struct track *n = cold_get((__u32)t->cookie, sk, BPF_SK_STORAGE_GET_F_CREATE);

	if (!n)
		return; /* stays hot */
	*n = *t;
	bpf_sk_storage_delete(&tracked, sk);
}

/* to_hot moves a socket's entry from its cold map to the hot map; returns
 * the entry now in use. */
static __always_inline struct track *to_hot(struct track *t, void *sk)
{
	struct track *n = bpf_sk_storage_get(&tracked, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);

	if (!n)
		return t; /* stays cold */
	*n = *t;
	n->idle = 0;
	cold_del((__u32)t->cookie, sk);
	return n;
}
/* fingerprint of a record, without its time (jiffies is the last field). */
static __always_inline __u64 fingerprint(const struct tcp_rec *r)
{
	const __u64 *w = (const __u64 *)r;
	__u64 h = 0xcbf29ce484222325ULL;

#pragma unroll
	for (int i = 0; i < (int)(__builtin_offsetof(struct tcp_rec, jiffies) / 8); i++)
		h = (h ^ w[i]) * 0x100000001b3ULL;
	return h;
}

/* remember records what delta's quick check compares; how: REPORTED (a
 * record was written) or SKIPPED (the filters rejected the socket). */
static __always_inline void remember(struct track *t, const struct tcp_rec *r, struct tcp_sock *tp,
				     __u32 how)
{
	if (how == REPORTED)
		t->sum = fingerprint(r);
	t->reported = how;
	t->dirty = 0;
	t->idle = 0;
	t->cookie = r->cookie;
	t->lane = r->lane;
	t->segs_in = tp->segs_in;
	t->segs_out = tp->segs_out;
	t->copied_seq = tp->copied_seq;
	t->write_seq = tp->write_seq;
}
/* as_tcp_sock: sk as a tcp_sock for plain loads. Every tracked socket is a
 * full TCP socket (dump_track and track add only those), so where the
 * kernel has bpf_rdonly_cast (6.2) it is a cast that reads nothing;
 * bpf_skc_to_tcp_sock checks the socket's state and protocol first (two
 * more cache lines of struct sock). */
static __always_inline struct tcp_sock *as_tcp_sock(struct sock *sk)
{
	if (bpf_rdonly_cast)
		return bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	return bpf_skc_to_tcp_sock(sk);
}

/* quiet: nothing happened on the socket since it was last looked at: no
 * segment in or out, no read or write by the application, no state change
 * (track sets dirty), same lane, no running chrono. Reads three cache
 * lines of struct tcp_sock (on 6.x) where a record takes ~15, with plain
 * loads that are all issued before any is tested, so that their cache
 * misses overlap (a bpf_probe_read_kernel per field, a helper call each,
 * took them one after the other). Not seen: changes with none of these,
 * such as a setsockopt of the buffer sizes or congestion control, a
 * cgroup move, an accept (the inode): the every-field comparison catches
 * them. */
static __always_inline int quiet(struct track *t, struct sock *sk)
{
	struct tcp_sock *tp;
	__u32 moved;

	if (t->reported == NEW || t->dirty)
		return 0;
	tp = as_tcp_sock(sk);
	if (!tp)
		return 0;
	moved = (tp->segs_in ^ t->segs_in) | (tp->segs_out ^ t->segs_out) |
		(tp->copied_seq ^ t->copied_seq) | (tp->write_seq ^ t->write_seq) |
		(__u32)BPF_CORE_READ_BITFIELD(tp, chrono_type);
	if (moved)
		return 0;
	if (CFG.have_lanes) {
		__u32 *l = bpf_map_lookup_elem(&lanes_cookie, &t->cookie);
		__u32 lane = l ? *l : LANE_UNSET;

		if (lane < LANE_REALTIME || lane > LANE_MAX)
			lane = LANE_INTERACTIVE;
		if (lane != t->lane)
			return 0;
	}
	if (t->idle < IDLE_AFTER)
		t->idle++;
	return 1;
}

#endif
