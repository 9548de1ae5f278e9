/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_linkrate.h - the account's upload capacity per interface
 * (lanes_link_rate, bytes/s): a windowed maximum of its sockets' delivery
 * rates, raised by sock_ops (cwndcap.h) and by the daemon from the shaped
 * QUIC/UDP upload, halved every LINK_RATE_HALF_NS without a raise. Read by
 * sock_ops (the yield's hold is a share of it: linkrate.h) and by LEDBAT++
 * (the window the link carries: ledbat.c). The datapath creates the map and
 * hands it to both.
 */
#ifndef LANES_LINKRATE_H
#define LANES_LINKRATE_H

#include <linux/types.h>
#include <linux/bpf.h>

#define LINK_RATE_HALF_NS 10000000000ULL
/* HOLD_RATE_DIV: no floor takes more than 1/HOLD_RATE_DIV of the link (a
 * held upload's pace: linkrate.h; a download's floor: rledbat.h) */
#define HOLD_RATE_DIV 16

struct link_rate {
	__u64 bps; /* bytes/s */
	__u64 at;  /* bpf_ktime_get_ns of the last raise */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct link_rate);
} lanes_link_rate SEC(".maps");

/* link_rate_of is r's estimate at now. */
static __always_inline __u64 link_rate_of(struct link_rate *r, __u64 now)
{
	__u64 halves = (now - r->at) / LINK_RATE_HALF_NS;

	return halves >= 64 ? 0 : r->bps >> halves;
}

#endif
