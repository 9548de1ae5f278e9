/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * resolve_core.h - the part of a socket's lane resolution both forms of
 * sock_ops share (lanes' own, resolve.h; the Android form,
 * internal/bpf/android/objects/sockops.c): the lane stored by its cookie,
 * else its 5-tuple with the local address (flow_lookup), else its
 * destination prefix (dst_lookup); a matched lane stored by cookie in
 * lanes_cookie for the classifier, an unmatched one counted; and the lane
 * stored by cookie, read at the later callbacks (lane_of). What each
 * form asks after the flow (the socket's cgroup and uid: through CO-RE
 * in lanes' own, its creator's as recorded at socket(2) in the Android
 * form) is its own. The includer declares lanes_maps.h's maps and bump()
 * (lanes_abi.h's enum ops_counter) first.
 */
#ifndef LANES_SOCKOPS_RESOLVE_CORE_H
#define LANES_SOCKOPS_RESOLVE_CORE_H

#include "lanes_sockkey.h"

static __always_inline int valid_lane(const __u32 *v)
{
	return v && *v >= LANE_REALTIME && *v <= LANE_MAX;
}

/* lane_of is the lane stored by the socket's cookie, LANE_UNSET if none. */
static __always_inline __u32 lane_of(__u64 cookie)
{
	__u32 *v = bpf_map_lookup_elem(&lanes_cookie, &cookie);

	return valid_lane(v) ? *v : LANE_UNSET;
}

/* lane_by_flow is the socket's lane from its flow: the lane already
 * stored by its cookie (*stored set), else its 5-tuple, else its
 * destination; LANE_UNSET if none matched or the family is neither IPv4
 * nor IPv6. */
static __always_inline __u32 lane_by_flow(struct bpf_sock_ops *ops, __u64 cookie, int *stored)
{
	struct flow_key key = {};
	__u32 *v;

	v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
	if (valid_lane(v)) {
		bump(OPS_BY_COOKIE);
		*stored = 1;
		return *v;
	}
	if (!sock_flow_key(ops, &key))
		return LANE_UNSET;
	v = flow_lookup(&key);
	if (v) {
		bump(OPS_BY_TUPLE);
		return *v;
	}
	v = dst_lookup(key.daddr, key.dport);
	if (v) {
		bump(OPS_BY_DST);
		return *v;
	}
	return LANE_UNSET;
}

/* store_lane stores a matched lane by cookie and counts an unmatched
 * one; it returns lane. */
static __always_inline __u32 store_lane(__u64 cookie, __u32 lane)
{
	if (lane == LANE_UNSET) {
		bump(OPS_UNRESOLVED);
		return LANE_UNSET;
	}
	bpf_map_update_elem(&lanes_cookie, &cookie, &lane, BPF_ANY);
	return lane;
}

#endif
