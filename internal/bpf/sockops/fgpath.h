/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * fgpath.h - a foreground peer's path: its minimum RTT over all the
 * connections to it, not one connection's. A connection opened behind a
 * standing queue (a background upload filling the uplink's buffer) has
 * every RTT sample of its life in that queue, its handshake's included:
 * over its own minimum it reads no queue at all, so a page's requests,
 * each a new connection, never read the harm they suffer. Kept per peer
 * address (as the kernel's tcp_metrics keys what it remembers of a path),
 * and its download direction's one-way delay likewise (fgrcv.h), each
 * over one to two OWD_BUCKET_MS buckets (lanes_owd.h's windowed minimum):
 * a route that grows longer leaves the old minimum within a minute, and
 * meanwhile the cause test (cause.h) releases background that does not
 * lower the queue read. Included by yield.h.
 */
#ifndef LANES_SOCKOPS_FGPATH_H
#define LANES_SOCKOPS_FGPATH_H

/* a peer, by address (not port) */
struct fg_dest {
	__u32 family;
	__u32 addr[4];
};

static __always_inline void fg_dest_of(struct bpf_sock_ops *ops, struct fg_dest *d)
{
	d->family = ops->family;
	if (ops->family == 10 /* AF_INET6 */) {
		d->addr[0] = ops->remote_ip6[0];
		d->addr[1] = ops->remote_ip6[1];
		d->addr[2] = ops->remote_ip6[2];
		d->addr[3] = ops->remote_ip6[3];
	} else {
		d->addr[0] = ops->remote_ip4;
	}
}

/* a peer's path over all the foreground connections to it */
struct fg_path {
	struct owd_dir rtt;  /* RTT samples, us (owd_dir's base and bucket) */
	struct owd_dir down; /* the download direction's raw delays, ms TS units */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct fg_dest);
	__type(value, struct fg_path);
} lanes_fg_path SEC(".maps");

/* FG_PATH_SPAN_MS: a peer's download minimum lies at most this far below a
 * connection's own to be its base. Linux derives the timestamp offset from
 * the two addresses alone (secure_tcp_ts_off), so each connection to a
 * peer shares it; a peer that draws one per connection (RFC 7323 allows
 * it) lies anywhere in 2^32 ms, beyond a minute but once in 70,000. */
#define FG_PATH_SPAN_MS 60000

static __always_inline struct fg_path *fg_path_of(struct bpf_sock_ops *ops)
{
	struct fg_dest d = {};
	struct fg_path *p, fresh = {};

	fg_dest_of(ops, &d);
	p = bpf_map_lookup_elem(&lanes_fg_path, &d);
	if (p)
		return p;
	bpf_map_update_elem(&lanes_fg_path, &d, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&lanes_fg_path, &d);
}

/* fg_path_min records a foreground socket's RTT sample rtt_us (its
 * handshake's at establishment, an ACK's after) to its peer and returns
 * the smaller of the path's minimum and own_us, the socket's own (0 or
 * ~0: none). A global function: the verifier checks it once. */
__noinline __u32 fg_path_min(struct bpf_sock_ops *ops, __u32 rtt_us, __u32 own_us)
{
	struct fg_path *p;
	__u32 m;

	if (!rtt_us)
		return own_us;
	p = fg_path_of(ops);
	if (!p)
		return own_us;
	m = owd_base(&p->rtt, rtt_us, (__u32)(bpf_ktime_get_ns() / 1000000));
	return own_us && own_us != ~0U && own_us < m ? own_us : m;
}

/* fg_path_down records a foreground socket's download-direction raw delay
 * raw (ms TS units) at now_ms and returns its base: the peer's minimum
 * where it lies below own, the socket's, by less than FG_PATH_SPAN_MS,
 * else own. A global function. */
__noinline __u32 fg_path_down(struct bpf_sock_ops *ops, __u32 raw, __u32 now_ms, __u32 own)
{
	struct fg_path *p = fg_path_of(ops);
	__u32 m;

	if (!p)
		return own;
	m = owd_base(&p->down, raw, now_ms);
	return owd_smaller(m, own) && own - m < FG_PATH_SPAN_MS ? m : own;
}

#endif
