//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tcpiter.c - one record per TCP socket of a network namespace, written
 * by a BPF iterator (iter/tcp) into the iterator's read stream: the
 * monitor's sampling backend that needs no netlink message per socket.
 *
 * The kernel walks its TCP hash tables (of the namespace the iterator was
 * opened in) and calls dump() for every socket; dump() keeps full sockets
 * whose state is in CFG.states, whose ports and cgroup match CFG and whose
 * lane (lanes_cookie map, when the daemon's map was given) is in CFG.lanes,
 * and writes a struct tcp_rec with
 * raw fields of struct tcp_sock. A request socket (a connection whose
 * handshake the listener has not completed, while the client may already
 * be ESTABLISHED) is reported as SYN-RECV with its addresses only, as
 * sock_diag does, when CFG.states has SYN-RECV. User space turns them into what tcp_info
 * reports (internal/tcpmon: the same arithmetic as tcp_get_info), so both
 * backends agree field for field.
 *
 * Tracked mode (the cheap one for sampling often): dump_track is the same
 * full walk, but it also gives every socket of the namespace an entry in
 * the sk_storage map "tracked" with a fingerprint of its last record; delta
 * then walks that map alone (no hash-table walk, no socket lock) and writes
 * only sockets whose record changed, plus a GONE record for a reported
 * socket that stopped matching; track (tp_btf/inet_sock_set_state) adds
 * sockets of the namespace as they are created and sends the cookie of a
 * reported socket that closes to the "gone" ring buffer. So a sample costs
 * a few tens of ns per idle socket in the kernel and nothing in user space.
 * Request sockets (no sk_storage) are reported by full walks only. The
 * reader's first walk is dump (creating storage for every socket would
 * cost it ~0.8 us a socket); a dump_track walk read over the following
 * samples then tracks them, and until it ends track also sends the cookie
 * of an untracked socket that closes (untracked). That first walk writes
 * its records into an array the reader maps (first_recs), not the stream.
 *
 * Kernel types are minimal and relocated against the running kernel's BTF
 * (CO-RE). Needs iter/tcp and bpf_skc_to_tcp_sock (5.9) and the tracing
 * bpf_get_socket_cookie (5.12); on an older kernel the load fails and the
 * monitor falls back to sock_diag (first_recs' count is set with an
 * atomic exchange, also 5.12). The kfunc bpf_rdonly_cast (6.2) is used
 * where the kernel has it (a weak reference: bpf_skc_to_tcp_sock instead).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lanes_kernel.h"
#include "lanes_maps.h"

char LICENSE[] SEC("license") = "GPL";

/* One socket; raw kernel fields (see the file comment). */
struct tcp_rec {
	__u64 cookie;
	__u8 saddr[16]; /* IPv4 in the first 4 bytes */
	__u8 daddr[16];
	__u16 sport; /* host order */
	__u16 dport;
	__u16 family;
	__u8 state;
	__u8 ca_state;
	__u32 uid;
	__u32 lane;
	__u64 ino;
	__u64 cgroup_id;
	char cong[16];
	__u32 snd_cwnd, snd_ssthresh, mss_cache, srtt_us, mdev_us, min_rtt;
	__u32 rto_jiffies;
	__u8 retransmits, app_limited, chrono_type;
	__u8 kind; /* REC_SOCK; REC_REQ: a request socket, only the fields up
		    * to cgroup_id are set; REC_GONE: only cookie is set */
	__u32 total_retrans, lost_out, packets_out, sacked_out;
	__u64 bytes_sent, bytes_acked, bytes_received, bytes_retrans;
	__u32 rate_delivered, rate_interval_us;
	__u64 pacing_rate;
	__u32 write_seq, snd_nxt, snd_una, rcv_nxt, copied_seq, snd_wnd;
	__u32 wmem_queued, sndbuf, rcvbuf, drops;
	__u32 rcv_rtt_us; /* receive-side RTT estimate (<< 3, tcp_get_info's >> 3 left to the reader) */
	__u32 pad3;
	__u32 chrono_start, chrono_stat[3];
	__u64 jiffies;
};

enum { REC_SOCK = 0, REC_REQ = 1, REC_GONE = 2 };

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

/* Keeps struct tcp_rec in the BTF for bpf2go -type. */
const struct tcp_rec *unused_tcp_rec __attribute__((unused));

/* Set by the loader before load. */
volatile const struct {
	__u32 states; /* bit per TCP state to report */
	__u32 lanes;  /* bit per lane to report; 0: all */
	__u32 have_lanes; /* lanes_cookie is the daemon's map */
	__u16 lport, rport, port; /* local, remote, either port; 0: any */
	__u16 pad;
	__u32 netns; /* tracked mode: the namespace's inode number */
	__u64 cgroup_id; /* socket's cgroup v2 id; 0: any */
	__u32 first_slots; /* entries of first_recs (dump writes there); 0: none */
	__u32 prefetch; /* the walks touch the next socket (prefetch_next) */
} CFG = {};

/* The first walk's records in memory the reader maps (dump, with
 * CFG.first_slots): entry 0 holds in its first 8 bytes how many records
 * entries 1.. hold; a record beyond the last entry goes to the stream.
 * Written this way, the walk is one read(2) with nothing to copy to user
 * space and no page of the reader's to fault in (~9 ms of a walk of
 * 100,000 sockets, ff4cdc3). Sized by the loader (1 entry: unused);
 * one walk at a time writes it (the reader opens dump's walk once). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct tcp_rec);
	__uint(max_entries, 1);
} first_recs SEC(".maps");

/* emit writes r to the walk's reader: with first (dump's walk) into the
 * next entry of first_recs while there is one, else into the stream. The
 * count is set with an exchange, ordered after the record's stores: the
 * reader, reading the count while the walk runs, finds whole records. */
static __always_inline void emit(struct bpf_iter_meta *meta, struct tcp_rec *r, int first)
{
	__u32 zero = 0, n;
	__u64 *count;
	struct tcp_rec *slot;

	if (first && CFG.first_slots) {
		count = bpf_map_lookup_elem(&first_recs, &zero);
		if (count) {
			n = *count + 1;
			slot = n < CFG.first_slots ? bpf_map_lookup_elem(&first_recs, &n) : 0;
			if (slot) {
				__builtin_memcpy(slot, r, sizeof(*r));
				__sync_lock_test_and_set(count, (__u64)n); /* a 64-bit one: -mcpu=v1 */
				return;
			}
		}
	}
	bpf_seq_write(meta->seq, r, sizeof(*r));
}

/* fill_common sets the record's addresses and ports from skc; false if
 * the port filter rejects them. */
static __always_inline int fill_common(struct tcp_rec *r, struct sock_common *skc)
{
	r->family = skc->skc_family;
	if (r->family == AF_INET6) {
		bpf_probe_read_kernel(r->saddr, 16, &skc->skc_v6_rcv_saddr);
		bpf_probe_read_kernel(r->daddr, 16, &skc->skc_v6_daddr);
	} else {
		*(__u32 *)r->saddr = skc->skc_rcv_saddr;
		*(__u32 *)r->daddr = skc->skc_daddr;
	}
	r->sport = skc->skc_num;
	r->dport = __builtin_bswap16(skc->skc_dport);
	return !((CFG.lport && r->sport != CFG.lport) || (CFG.rport && r->dport != CFG.rport) ||
		 (CFG.port && r->sport != CFG.port && r->dport != CFG.port));
}

/* lane_ok looks the socket's lane up (when the daemon's map was given);
 * false if CFG.lanes rejects it. */
static __always_inline int lane_ok(struct tcp_rec *r)
{
	if (CFG.have_lanes) {
		__u32 *l = bpf_map_lookup_elem(&lanes_cookie, &r->cookie);
		r->lane = l ? *l : LANE_UNSET;
		if (r->lane < LANE_REALTIME || r->lane > LANE_MAX)
			r->lane = LANE_INTERACTIVE; /* the default lane, as the classifier */
		if (CFG.lanes && !(CFG.lanes & (1u << r->lane)))
			return 0;
	}
	return 1;
}

/* dump_req reports a request socket as SYN-RECV with what sock_diag
 * reports of one (inet_req_diag_fill): addresses, ports, cookie; no
 * owner, no cgroup (so a cgroup filter drops it), no tcp_info. */
static __always_inline int dump_req(struct bpf_iter__tcp *ctx, struct sock_common *skc,
				    struct tcp_rec *r, int first)
{
	if (!(CFG.states & (1u << TCP_SYN_RECV)) || CFG.cgroup_id)
		return 0;
	if (skc->skc_state != TCP_NEW_SYN_RECV)
		return 0; /* time-wait */
	r->kind = REC_REQ;
	r->state = TCP_SYN_RECV;
	r->cookie = bpf_get_socket_cookie(skc);
	if (!lane_ok(r) || !fill_common(r, skc))
		return 0;
	r->jiffies = bpf_jiffies64();
	emit(ctx->meta, r, first);
	return 0;
}

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* sock_ino is the inode number of a socket (its socket_alloc's vfs_inode,
 * as sock_i_ino reads it): a plain load where the kernel has
 * bpf_rdonly_cast (6.2; the verifier turns the call into a move), else a
 * bpf_probe_read_kernel (a helper call per socket: ~9 % of the walk in
 * perf, 17872f5). */
static __always_inline __u64 sock_ino(struct socket *so)
{
	unsigned long a;
	__u64 ino = 0;

	if (bpf_rdonly_cast) {
		struct socket_alloc *sa = bpf_rdonly_cast(so, bpf_core_type_id_kernel(struct socket_alloc));

		return sa->vfs_inode.i_ino;
	}
	a = (unsigned long)so + bpf_core_field_offset(struct socket_alloc, vfs_inode) +
	    bpf_core_field_offset(struct inode, i_ino);
	bpf_probe_read_kernel(&ino, sizeof(ino), (void *)a);
	return ino;
}

/* touch_lines loads one field of each cache line of the socket that
 * fill_sock reads (lines of the 6.8+ layout; on another layout they are
 * still spread over it), all at once, so that their misses are in flight
 * together: fill_sock's own loads, a few instructions each through the
 * JIT's checks, span more than the CPU's window. */
static __always_inline void touch_lines(struct tcp_sock *tp)
{
	struct sock *sk = &tp->inet_conn.icsk_inet.sk;
	__u64 x;

	x = sk->sk_drops.counter ^ sk->sk_rcvbuf ^ sk->sk_wmem_queued ^ sk->sk_pacing_rate ^
	    sk->sk_sndbuf ^ (__u64)tp->inet_conn.icsk_rto ^ tp->inet_conn.icsk_retransmits ^
	    tp->snd_wnd ^ tp->snd_ssthresh ^ tp->bytes_sent ^ tp->rcv_nxt ^ tp->bytes_received ^
	    tp->bytes_acked ^ tp->bytes_retrans;
	asm volatile("" : : "r"(x));
}

/* PREFETCH_SCAN: how many buckets past the current socket's prefetch_next
 * looks for the next socket (6b5e24e: 16 beat 4 and 8; at 100,000
 * sockets in 262,144 buckets one of 16 is empty ~0.2 % of the time). */
#define PREFETCH_SCAN 16

/* raw_u64 loads the 8 bytes at off of untyped kernel memory p. */
#define raw_u64(p, off) (*(const __u64 *)((const char *)(p) + (off)))

/* next_sock is the address of the socket the iterator is likely to visit
 * after sk: the next one in sk's chain of the established table, else the
 * first socket of the next non-empty bucket within PREFETCH_SCAN; 0 if
 * none. The chain's links and the bucket heads are read as numbers
 * (bpf_rdonly_cast(p, 0): untyped memory, whose loads the verifier lets
 * through as fault-safe ones) because a nulls marker is told by its bit
 * 0, which the verifier does not let a program test on a pointer. Read
 * without the bucket's lock: the answer may be stale or wrong, and is
 * only ever used to warm the cache. */
static __always_inline __u64 next_sock(struct sock *sk)
{
	__u64 off = bpf_core_field_offset(struct sock_common, skc_nulls_node);
	struct inet_hashinfo *h;
	const void *heads;
	__u64 a;
	__u32 b, m;

	a = raw_u64(bpf_rdonly_cast(sk, 0), off);
	if (a & 1) { /* the chain's end: the next buckets */
		h = sk->__sk_common.skc_net.net->ipv4.tcp_death_row.hashinfo;
		if (!h)
			return 0;
		m = h->ehash_mask;
		b = sk->__sk_common.skc_hash;
		heads = bpf_rdonly_cast(h->ehash, 0);
		for (int i = 1; i <= PREFETCH_SCAN && (a & 1); i++)
			a = raw_u64(heads, (__u64)((b + i) & m) * 8); /* a bucket is its chain's head */
		if (a & 1)
			return 0;
	}
	return a - off;
}

/* prefetch_next loads one field of each cache line of the next socket
 * (next_sock) that the iterator and fill_sock read (those of touch_lines,
 * skc_net, the chain link, the lock, the socket and cgroup pointers), so
 * that the iterator's misses on it (its first touch of each socket is one
 * nothing overlaps) and this program's next ones overlap the current
 * socket's. No value loaded is used. Needs bpf_rdonly_cast of untyped
 * memory (CFG.prefetch is set only where the kernel verifies that); the
 * layout's lines are the 6.8+ ones, as touch_lines'. */
static __always_inline void prefetch_next(struct sock *cur)
{
	struct tcp_sock *tp;
	const void *raw;
	struct sock *sk;
	__u64 a, x;

	if (!bpf_rdonly_cast)
		return;
	a = next_sock(cur);
	if (!a)
		return;
	raw = bpf_rdonly_cast((void *)a, 0);
	tp = bpf_rdonly_cast((void *)a, bpf_core_type_id_kernel(struct tcp_sock));
	sk = &tp->inet_conn.icsk_inet.sk;
	x = sk->__sk_common.skc_state ^ raw_u64(raw, bpf_core_field_offset(struct sock_common, skc_nulls_node)) ^
	    sk->sk_drops.counter ^ sk->sk_lock.owned ^ sk->sk_sndbuf ^ sk->sk_rcvbuf ^
	    raw_u64(raw, bpf_core_field_offset(struct sock, sk_socket)) ^ sk->sk_pacing_rate ^
	    raw_u64(raw, bpf_core_field_offset(struct sock, sk_cgrp_data)) ^ (__u64)tp->inet_conn.icsk_rto ^
	    tp->inet_conn.icsk_retransmits ^ tp->snd_wnd ^ tp->snd_ssthresh ^ tp->bytes_sent ^
	    tp->rate_delivered ^ tp->rcv_nxt ^ tp->bytes_received ^ tp->bytes_acked ^ tp->bytes_retrans;
	asm volatile("" : : "r"(x));
}

/* fill_sock fills r from a full socket; false if the filters reject it.
 * skc is the same socket as a pointer the helpers take (tp may be a
 * bpf_rdonly_cast one, good for loads only). Its loads are plain ones
 * (the verifier checks them against the kernel's BTF), written in the
 * order of the fields in the kernel's struct tcp_sock (6.8+ layout) with
 * the socket's inode first (two dependent misses: sk_socket, then the
 * inode): the first walk's socket is cold, ~17 cache lines of it are
 * read, and the CPU overlaps their misses only as far as its window
 * reaches ahead of the oldest one (perf, f59e94a: in field order the
 * walk stalled on sk_socket, the inode, total_retrans and srtt_us in turn). */
static __always_inline int fill_sock(struct tcp_rec *r, struct tcp_sock *tp, void *skc, __u32 uid, int walk)
{
	struct sock *sk = &tp->inet_conn.icsk_inet.sk;
	const struct tcp_congestion_ops *ops;
	int lane_match;

	r->cookie = bpf_get_socket_cookie(skc);
	lane_match = lane_ok(r); /* sets r->lane, which remember keeps */
	r->state = sk->__sk_common.skc_state;
	if (r->state >= 32 || !(CFG.states & (1u << r->state)))
		return 0;
	if (!lane_match || !fill_common(r, &sk->__sk_common))
		return 0;
	r->uid = uid;
	r->ino = sock_ino(sk->sk_socket);
	touch_lines(tp);
	if (walk && CFG.prefetch)
		prefetch_next(sk);
	r->drops = sk->sk_drops.counter;
	r->rcvbuf = sk->sk_rcvbuf;
	r->wmem_queued = sk->sk_wmem_queued;
	r->pacing_rate = sk->sk_pacing_rate;
	r->sndbuf = sk->sk_sndbuf;
	if (bpf_core_field_exists(sk->sk_cgrp_data.cgroup)) {
		struct cgroup *cg = sk->sk_cgrp_data.cgroup;
		if (cg)
			r->cgroup_id = cg->kn->id;
	}
	if (CFG.cgroup_id && r->cgroup_id != CFG.cgroup_id)
		return 0;
	r->rto_jiffies = tp->inet_conn.icsk_rto;
	ops = tp->inet_conn.icsk_ca_ops;
	r->ca_state = BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_state);
	r->retransmits = tp->inet_conn.icsk_retransmits;
	r->snd_wnd = tp->snd_wnd;
	r->mss_cache = tp->mss_cache;
	r->snd_cwnd = tp->snd_cwnd;
	r->lost_out = tp->lost_out;
	r->sacked_out = tp->sacked_out;
	r->copied_seq = tp->copied_seq;
	r->snd_ssthresh = tp->snd_ssthresh;
	r->min_rtt = tp->rtt_min.s[0].v;
	r->bytes_sent = tp->bytes_sent;
	r->chrono_start = tp->chrono_start;
	r->chrono_stat[0] = tp->chrono_stat[0];
	r->chrono_stat[1] = tp->chrono_stat[1];
	r->chrono_stat[2] = tp->chrono_stat[2];
	r->write_seq = tp->write_seq;
	r->mdev_us = tp->mdev_us;
	r->rcv_nxt = tp->rcv_nxt;
	r->snd_nxt = tp->snd_nxt;
	r->snd_una = tp->snd_una;
	r->srtt_us = tp->srtt_us;
	r->packets_out = tp->packets_out;
	r->bytes_received = tp->bytes_received;
	r->rate_delivered = tp->rate_delivered;
	r->rate_interval_us = tp->rate_interval_us;
	r->bytes_acked = tp->bytes_acked;
	r->rcv_rtt_us = tp->rcv_rtt_est.rtt_us;
	r->bytes_retrans = tp->bytes_retrans;
	r->total_retrans = tp->total_retrans;
	r->app_limited = BPF_CORE_READ_BITFIELD(tp, rate_app_limited);
	r->chrono_type = BPF_CORE_READ_BITFIELD(tp, chrono_type);
	if (ops) { /* the name's 16 bytes, NUL-padded (the reader stops at the first NUL) */
		*(__u64 *)&r->cong[0] = *(const __u64 *)&ops->name[0];
		*(__u64 *)&r->cong[8] = *(const __u64 *)&ops->name[8];
	}
	return 1;
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

/* walk_tcp_sock: the iterator's socket as a tcp_sock, NULL for time-wait
 * and request sockets. Every socket of iter/tcp is a TCP one, so where the
 * kernel has bpf_rdonly_cast (6.2) and storage is not wanted (track, which
 * needs a pointer the sk_storage helpers take) it is a cast after a look
 * at the state (what sk_fullsock looks at); bpf_skc_to_tcp_sock, a helper
 * call, also reads the socket's protocol and type. */
static __always_inline struct tcp_sock *walk_tcp_sock(struct sock_common *skc, int track)
{
	__u8 state;

	if (track || !bpf_rdonly_cast)
		return bpf_skc_to_tcp_sock(skc);
	state = skc->skc_state;
	if (state == TCP_TIME_WAIT || state == TCP_NEW_SYN_RECV)
		return 0;
	return bpf_rdonly_cast(skc, bpf_core_type_id_kernel(struct tcp_sock));
}

/* dump_sock is the iter/tcp program's body; with track it also records the
 * socket in the tracked map (see the file comment). */
static __always_inline int dump_sock(struct bpf_iter__tcp *ctx, int track)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_rec r = {};
	struct track *t = 0;
	struct tcp_sock *tp;

	if (!skc)
		return 0;
	tp = walk_tcp_sock(skc, track);
	if (!tp)
		return dump_req(ctx, skc, &r, !track);
	if (track) {
		t = cold_get((__u32)bpf_get_socket_cookie(tp), tp, 0);
		if (!t)
			t = bpf_sk_storage_get(&tracked, tp, 0, BPF_SK_STORAGE_GET_F_CREATE);
	}
	if (!fill_sock(&r, tp, skc, ctx->uid, 1)) {
		if (t)
			remember(t, &r, tp, SKIPPED);
		return 0;
	}
	if (t)
		remember(t, &r, tp, REPORTED);
	r.jiffies = bpf_jiffies64();
	emit(ctx->meta, &r, !track);
	return 0;
}

SEC("iter/tcp")
int dump(struct bpf_iter__tcp *ctx)
{
	return dump_sock(ctx, 0);
}

SEC("iter/tcp")
int dump_track(struct bpf_iter__tcp *ctx)
{
	return dump_sock(ctx, 1);
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

/* delta_sock: a record if the socket changed since its last one (or was
 * not reported), a GONE record if a reported one no longer matches. A
 * socket with a running chrono (busy, rwnd- or sndbuf-limited) changes
 * every jiffy: always written. cold: the walk is of a cold map. */
static __always_inline int delta_sock(struct bpf_iter__bpf_sk_storage_map *ctx, int cold)
{
	struct track *t = ctx->value;
	struct sock *sk = ctx->sk;
	struct tcp_rec r = {};
	struct tcp_sock *tp;
	__u32 walk;
	int check_all, q;
	__u64 sum;

	if (!sk || !t)
		return 0;
	walk = *(volatile __u32 *)&sample_no;
	/* A cold map is walked every COLD-th time (the same walk numbers
	 * for all of its sockets): stagger by cookie / COLD there. */
	if (cold)
		check_all = ((__u32)(t->cookie / COLD) + walk / COLD) % (CHECK_ALL_EVERY / COLD) == 0;
	else
		check_all = ((__u32)t->cookie + walk) % CHECK_ALL_EVERY == 0;
	q = quiet(t, sk);
	if (q && !check_all) {
		if (!cold && t->idle >= IDLE_AFTER)
			to_cold(t, sk);
		return 0;
	}
	if (cold && !q) /* found active: hot again */
		t = to_hot(t, sk);
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return 0;
	if (!fill_sock(&r, tp, sk, sk->sk_uid.val, 0)) {
		__u32 was = t->reported;

		remember(t, &r, tp, SKIPPED);
		if (was == REPORTED) {
			__u64 cookie = r.cookie;

			__builtin_memset(&r, 0, sizeof(r));
			r.kind = REC_GONE;
			r.cookie = cookie;
			bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
		}
		return 0;
	}
	sum = fingerprint(&r);
	if (t->reported == REPORTED && t->sum == sum && !r.chrono_type) {
		remember(t, &r, tp, REPORTED); /* e.g. a pure ACK sent: counters moved */
		return 0;
	}
	remember(t, &r, tp, REPORTED);
	r.jiffies = bpf_jiffies64();
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

/* delta walks the hot map. */
SEC("iter/bpf_sk_storage_map")
int delta(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	return delta_sock(ctx, 0);
}

/* delta_cold walks one cold map (attached to each). */
SEC("iter/bpf_sk_storage_map")
int delta_cold(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	return delta_sock(ctx, 1);
}

/* track adds a TCP socket of the namespace to the tracked map when it
 * enters a reported state and marks a tracked one dirty on any change;
 * it sends the cookie of a reported socket that leaves the reported
 * states to the gone ring (a socket is freed only after it reached CLOSE,
 * so none goes unseen), and while untracked is set that of one without
 * storage (and storage it creates then counts as reported). */
SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(track, struct sock *sk, int oldstate, int newstate)
{
	struct track *t;
	__u64 cookie;

	if (sk->__sk_common.skc_net.net->ns.inum != CFG.netns || sk->sk_protocol != IPPROTO_TCP)
		return 0;
	cookie = bpf_get_socket_cookie(sk);
	t = cold_get((__u32)cookie, sk, 0);
	if (t)
		t = to_hot(t, sk);
	if (newstate >= 0 && newstate < 32 && (CFG.states & (1u << newstate))) {
		if (!t)
			t = bpf_sk_storage_get(&tracked, sk, 0, 0);
		if (!t) {
			t = bpf_sk_storage_get(&tracked, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
			/* The reader's first walk may have reported it: its
			 * close must send the cookie. */
			if (t && *(volatile __u32 *)&untracked)
				t->reported = REPORTED;
		}
		if (t)
			t->dirty = 1;
		return 0;
	}
	if (!t)
		t = bpf_sk_storage_get(&tracked, sk, 0, 0);
	if (!t) {
		if (*(volatile __u32 *)&untracked && bpf_ringbuf_output(&gone, &cookie, sizeof(cookie), 0))
			__sync_fetch_and_add(&lost_gone, 1);
		return 0;
	}
	t->dirty = 1;
	if (t->reported != REPORTED)
		return 0;
	t->reported = SKIPPED;
	if (bpf_ringbuf_output(&gone, &cookie, sizeof(cookie), 0))
		__sync_fetch_and_add(&lost_gone, 1);
	return 0;
}
