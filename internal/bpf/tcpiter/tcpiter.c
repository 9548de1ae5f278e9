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
 *
 * This file holds the programs (dump, dump_track, delta, delta_cold,
 * track) and their bodies; beside it:
 *   record.h   struct tcp_rec, the filters (CFG), filling and writing one
 *   track.h    tracked mode's per-socket state, hot and cold maps, quiet
 *   prefetch.h cache warmth: the current and the next socket's lines
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "lanes_kernel.h"
#include "lanes_maps.h"

char LICENSE[] SEC("license") = "GPL";
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

#include "prefetch.h"
#include "record.h"
#include "track.h"

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
