/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * record.h - one socket's record: struct tcp_rec (raw kernel fields, which
 * user space turns into tcp_info's), the loader's filters (CFG), the
 * filling of a record from a full or a request socket, and its writing to
 * the walk's reader (the stream, or first_recs for the first walk).
 * Included by tcpiter.c, after prefetch.h.
 */
#ifndef LANES_TCPITER_RECORD_H
#define LANES_TCPITER_RECORD_H

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
 * 100,000 sockets). Sized by the loader (1 entry: unused);
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
/* sock_ino is the inode number of a socket (its socket_alloc's vfs_inode,
 * as sock_i_ino reads it): a plain load where the kernel has
 * bpf_rdonly_cast (6.2; the verifier turns the call into a move), else a
 * bpf_probe_read_kernel (a helper call per socket: ~9 % of the walk in
 * perf). */
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
/* fill_sock fills r from a full socket; false if the filters reject it.
 * skc is the same socket as a pointer the helpers take (tp may be a
 * bpf_rdonly_cast one, good for loads only). Its loads are plain ones
 * (the verifier checks them against the kernel's BTF), written in the
 * order of the fields in the kernel's struct tcp_sock (6.8+ layout) with
 * the socket's inode first (two dependent misses: sk_socket, then the
 * inode): the first walk's socket is cold, ~17 cache lines of it are
 * read, and the CPU overlaps their misses only as far as its window
 * reaches ahead of the oldest one (perf: in field order the
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

#endif
