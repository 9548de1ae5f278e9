/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * owd.h - a socket's one-way delays in the sock_ops program: each
 * direction's queue from TCP timestamps (include/lanes_owd.h) kept in
 * socket storage, read by the yield's harm (yield.h, fgrcv.h) and by
 * rLEDBAT (rledbat.h). Included by sockops.c.
 */
#ifndef LANES_SOCKOPS_OWD_H
#define LANES_SOCKOPS_OWD_H

#include "lanes_owd.h"

/* a socket's one-way delays (lanes_owd.h) and, for a foreground download,
 * its receive side (fgrcv.h) */
struct owd_sock {
	struct owd o;
	__u32 last_nxt; /* rcv_nxt at the last look (fgrcv.h) */
	__u32 last_una; /* snd_una at the last look (fgrcv.h) */
	__u32 min_rcv_us; /* the smallest receive-side RTT (no timestamps) */
	struct owd_dir rtt_span; /* the download queue's groups over a round trip (fgrcv.h's harm) */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct owd_sock);
} lanes_owd SEC(".maps");

/* sock_owd reads ops's socket's last segment into its one-way delays:
 * the upload and download directions' queues in us; ack_rtt_us: the
 * segment is an ACK of our data whose newest segment's RTT it is
 * (owd_read_ack, over the path's minimum RTT min_us), 0: data received
 * (owd_read). 0: no timestamps (or no storage, or the lab's YIELD_JOINED:
 * the RTT as before). */
static __always_inline int sock_owd(struct bpf_sock_ops *ops, struct tcp_sock *tp, __u32 ack_rtt_us, __u32 min_us,
				    __u32 *up, __u32 *down)
{
	struct owd_sock *o;

	if (!ops->sk || (CFG.yield & YIELD_JOINED))
		return 0;
	o = bpf_sk_storage_get(&lanes_owd, ops->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!o)
		return 0;
	if (ack_rtt_us)
		return owd_read_ack(tp, &o->o, ack_rtt_us, min_us, up, down);
	return owd_read(tp, &o->o, up, down);
}

#endif
