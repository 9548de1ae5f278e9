/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * dscp.h - a socket's lane from its own DSCP marking (IP_TOS, IPV6_TCLASS
 * as set before connect or on the listener), where no flow, cgroup or uid
 * rule gave one: the policy's DSCP table (dscp.le_background: LE, 1, to
 * background), which the daemon writes here as into the classifier's
 * lanes_dscp. The classifier already sends such a socket's packets to the
 * lane by their marking; resolved here too, the socket's lane is stored by
 * cookie and the lane's socket settings follow it (LEDBAT++ for
 * background, background.h). Included by resolve.h (lanes' form only).
 */
#ifndef LANES_SOCKOPS_DSCP_H
#define LANES_SOCKOPS_DSCP_H

#define SOL_IP_ 0
#define IP_TOS_ 1
#define SOL_IPV6_ 41
#define IPV6_TCLASS_ 67

/* lanes_ops_dscp: DSCP code point -> lane (0: none), as lanes_dscp. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} lanes_ops_dscp SEC(".maps");

/* dscp_lane is the lane of the socket's DSCP marking, LANE_UNSET if the
 * table gives none (or the marking cannot be read). */
static __always_inline __u32 dscp_lane(struct bpf_sock_ops *ops)
{
	int tos = 0, err;
	__u32 dscp, *v;

	if (ops->family == AF_INET6)
		err = bpf_getsockopt(ops, SOL_IPV6_, IPV6_TCLASS_, &tos, sizeof(tos));
	else
		err = bpf_getsockopt(ops, SOL_IP_, IP_TOS_, &tos, sizeof(tos));
	if (err)
		return LANE_UNSET;
	dscp = ((__u32)tos >> 2) & 63;
	v = bpf_map_lookup_elem(&lanes_ops_dscp, &dscp);
	return valid_lane(v) ? *v : LANE_UNSET;
}

#endif
