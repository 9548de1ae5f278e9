/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * prefetch.h - cache warmth for the walks: touch_lines issues the loads of
 * every cache line of a socket that fill_sock reads at once, so that their
 * misses overlap; prefetch_next does the same for the socket the iterator
 * is likely to visit next (next_sock: the established table's chain, else
 * the next buckets). Included by tcpiter.c.
 */
#ifndef LANES_TCPITER_PREFETCH_H
#define LANES_TCPITER_PREFETCH_H

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
 * looks for the next socket (measured: 16 beat 4 and 8; at 100,000
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

#endif
