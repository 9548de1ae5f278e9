/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * resolve.h - a socket's lane, resolved once at connect or accept: its
 * cookie already known, else its 5-tuple with the local address
 * (flow_lookup), else its destination prefix (resolve_core.h, shared with
 * the Android form), else its cgroup v2 id or an ancestor's, else its uid,
 * else its own DSCP marking (dscp.h); stored cookie -> lane in lanes_cookie
 * for the classifier. Included by sockops.c.
 *
 * The socket's cgroup and uid are read from struct sock through CO-RE
 * (sk_cgrp_data.cgroup->kn->id, sk_uid): at PASSIVE_ESTABLISHED_CB "current"
 * is whatever softirq context runs, so bpf_get_current_cgroup_id would be
 * wrong. ops->sk itself may not be offset, so the program goes through
 * bpf_skc_to_tcp_sock to get a BTF pointer first. The socket's cgroup and
 * its ancestors are tried, deepest first (cgroup->ancestors[level..0] on
 * 6.0+, ->ancestor_ids[] before; CO-RE existence checks pick the layout,
 * and a kernel with neither matches the socket's own cgroup only), so a
 * rule for a parent cgroup covers the cgroups below it; the classifier's
 * per-packet lookup matches only the exact cgroup, so for TCP sockets the
 * ancestor match reaches the classifier through the cookie.
 */
#ifndef LANES_SOCKOPS_RESOLVE_H
#define LANES_SOCKOPS_RESOLVE_H

#include "resolve_core.h"
#include "dscp.h"

/* deepest ancestors tried for a cgroup match (the socket's own included) */
#define CGROUP_DEPTH 16

/* sock_cgroup is the socket's cgroup v2, on every kernel layout (CO-RE). */
static __always_inline struct cgroup *sock_cgroup(struct sock *sk)
{
	if (bpf_core_field_exists(sk->sk_cgrp_data.cgroup))
		return BPF_CORE_READ(sk, sk_cgrp_data.cgroup);
	if (bpf_core_field_exists(((struct sock___val *)sk)->sk_cgrp_data.val))
		return (struct cgroup *)BPF_CORE_READ((struct sock___val *)sk, sk_cgrp_data.val);
	return 0;
}

/* The two layouts' reads are functions of their own so that the compiler
 * cannot hoist a relocation that this kernel poisons (a field it lacks) out
 * of the existence check that guards it. */
static __noinline __u64 ancestor_id_ptrs(struct cgroup *cg, int lvl)
{
	struct cgroup *a = 0;

	bpf_core_read(&a, sizeof(a), &cg->ancestors[lvl]);
	return BPF_CORE_READ(a, kn, id);
}

static __noinline __u64 ancestor_id_ids(struct cgroup___ids *cg, int lvl)
{
	__u64 id = 0;

	bpf_core_read(&id, sizeof(id), &cg->ancestor_ids[lvl]);
	return id;
}

/* ancestor_id is the id of cg's ancestor at level lvl, 0 when this kernel
 * keeps neither layout. */
static __always_inline __u64 ancestor_id(struct cgroup *cg, int lvl)
{
	if (bpf_core_field_exists(cg->ancestors))
		return ancestor_id_ptrs(cg, lvl);
	if (bpf_core_field_exists(((struct cgroup___ids *)cg)->ancestor_ids))
		return ancestor_id_ids((struct cgroup___ids *)cg, lvl);
	return 0;
}
/* owner_lane is the lane of the socket's cgroup (deepest first: its own,
 * then its ancestors), else of its uid; LANE_UNSET if none. */
static __always_inline __u32 owner_lane(struct bpf_sock_ops *ops)
{
	/* ops->sk may not take pointer arithmetic; its BTF view may */
	struct bpf_sock *bsk = ops->sk;
	struct sock *sk = bsk ? (struct sock *)bpf_skc_to_tcp_sock(bsk) : 0;
	struct cgroup *cg;
	__u32 *v, uid;
	int level;

	if (!sk)
		return LANE_UNSET;
	cg = sock_cgroup(sk);
	level = cg ? BPF_CORE_READ(cg, level) : -1;
	uid = BPF_CORE_READ(sk, sk_uid.val);
	/* the socket's cgroup, then its ancestors: the deepest entry wins */
	for (int i = 0; i < CGROUP_DEPTH; i++) {
		__u64 id;

		if (level - i < 0)
			break;
		id = i == 0 ? BPF_CORE_READ(cg, kn, id) : ancestor_id(cg, level - i);
		if (!id)
			break;
		v = bpf_map_lookup_elem(&lanes_cgroup, &id);
		if (valid_lane(v)) {
			bump(OPS_BY_CGROUP);
			return *v;
		}
	}
	v = bpf_map_lookup_elem(&lanes_uid, &uid);
	if (valid_lane(v)) {
		bump(OPS_BY_UID);
		return *v;
	}
	return LANE_UNSET;
}

/* resolve returns the socket's lane (LANE_UNSET if nothing matched) and
 * stores it by cookie. */
static __always_inline __u32 resolve(struct bpf_sock_ops *ops, __u64 cookie)
{
	int stored = 0;
	__u32 lane = lane_by_flow(ops, cookie, &stored);

	if (stored)
		return lane;
	if (lane == LANE_UNSET)
		lane = owner_lane(ops);
	if (lane == LANE_UNSET)
		lane = dscp_lane(ops);
	return store_lane(cookie, lane);
}

#endif
