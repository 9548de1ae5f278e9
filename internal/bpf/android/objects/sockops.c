// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// sockops.c (Android form): lanes' per-socket programs for the mode
// without struct_ops, built as NetBpfLoad reads objects (android_form.h):
// sections "sockops/lanes_sockops" (SOCK_OPS, at a cgroup) and
// "cgroupsockcreate/lanes_sock_create" (CGROUP_SOCK, INET_SOCK_CREATE, at
// the same cgroup), maps as struct bpf_map_def, no BTF, no CO-RE, no
// global data.
//   - lanes_sock_create, at socket(2) of a TCP socket: the creating task's
//     cgroup v2 and uid (bpf_get_current_cgroup_id,
//     bpf_get_current_uid_gid), stored by the socket's cookie in
//     lanes_sock_owner. SOCK_OPS may call neither on 5.10 and 6.1, nor
//     bpf_get_current_uid_gid on 6.12 (net/core/filter.c
//     sock_ops_func_proto; 6.18 allows both); CGROUP_SOCK may call both
//     on every kernel from 5.10 (sock_filter_func_proto: a socket is
//     created in process context). Android's netd reads its sockets'
//     creators the same way (cgroupsock/inet_create).
//   - TCP_CONNECT_CB and PASSIVE_ESTABLISHED_CB: the socket's lane, by
//     internal/bpf/sockops/resolve_core.h, which lanes' own sock_ops
//     shares: cookie already known, else its 5-tuple (flow_lookup of
//     lanes_maps.h; the key from lanes_sockkey.h), else its destination
//     (dst_lookup), else, at
//     connect only, its creator's cgroup and uid from lanes_sock_owner
//     (an accepted socket is created by the kernel, not by a task, and
//     the socket's own cgroup needs CO-RE); stored by cookie in
//     lanes_cookie, the map the classifier reads (lanes_maps.h's maps are
//     shared: /sys/fs/bpf/<prefix>map__<name>);
//   - ACTIVE/PASSIVE_ESTABLISHED_CB: RTT and state callbacks; a background
//     socket gets TCP_NOTSENT_LOWAT = lanes_ops_cfg.notsent_lowat;
//   - RTT_CB of a background socket: LEDBAT++'s window as its cwnd clamp
//     (bgclamp_form.h: bgclamp_core.h's step), target
//     lanes_ops_cfg.bg_target_us (0: off); a socket that became background
//     after it was established gets its TCP_NOTSENT_LOWAT here;
//   - STATE_CB to TCP_CLOSE: the socket's entries go.
// lanes_ops_cfg[0] is what lanes' loader sets as constants (a daemon
// writes the pinned map); lanes_ops_stats counts as sockops.c's does
// (lanes_abi.h's enum ops_counter). Not here: cwnd caps, rLEDBAT, the
// yield, capcc's switch (lanes' own sock_ops; docs/android.md).
#include "android_form.h"
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "lanes_maps.h"
#include "bgclamp_form.h"

#define TCP_NOTSENT_LOWAT 25
#define SOCK_STREAM 1
#define IPPROTO_TCP 6

struct ops_config {
	__u32 notsent_lowat; /* TCP_NOTSENT_LOWAT of background sockets, 0 = leave */
	__u32 bg_target_us;  /* LEDBAT++'s queuing-delay target, 0 = no clamp */
};

ANDROID_MAP(lanes_ops_cfg, BPF_MAP_TYPE_ARRAY, __u32, struct ops_config, 1);
ANDROID_MAP(lanes_ops_stats, BPF_MAP_TYPE_PERCPU_ARRAY, __u32, __u64, OPS_COUNTERS);
/* the background sockets given TCP_NOTSENT_LOWAT (socket storage needs BTF) */
ANDROID_MAP(lanes_lowat_set, BPF_MAP_TYPE_LRU_HASH, __u64, __u8, 65536);

/* a TCP socket's creator, by cookie, until its connect (or eviction: a
 * listening or never connected socket's entry goes with the LRU) */
struct sock_owner {
	__u64 cgroup; /* cgroup v2 id of the creating task */
	__u32 uid;    /* its uid */
	__u32 pad;
};
ANDROID_MAP(lanes_sock_owner, BPF_MAP_TYPE_LRU_HASH, __u64, struct sock_owner, 65536);

/* RTT callbacks and the verifier's bounded loops: lanes needs 5.10. */
ANDROID_PROG(lanes_sockops, ANDROID_KVER(5, 10, 0));
/* bpf_get_socket_cookie in CGROUP_SOCK: 5.7; lanes needs 5.10. */
ANDROID_PROG(lanes_sock_create, ANDROID_KVER(5, 10, 0));

static __always_inline void bump(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&lanes_ops_stats, &idx);

	if (c)
		(*c)++;
}

#include "../../sockops/resolve_core.h"

/* owner_lane is the lane of the socket's creator (its cgroup, else its
 * uid), LANE_UNSET if none. */
static __always_inline __u32 owner_lane(__u64 cookie)
{
	struct sock_owner *o = bpf_map_lookup_elem(&lanes_sock_owner, &cookie);
	__u32 *v, lane = LANE_UNSET;

	if (!o)
		return LANE_UNSET;
	v = bpf_map_lookup_elem(&lanes_cgroup, &o->cgroup);
	if (valid_lane(v)) {
		lane = *v;
		bump(OPS_BY_CGROUP);
	} else {
		v = bpf_map_lookup_elem(&lanes_uid, &o->uid);
		if (valid_lane(v)) {
			lane = *v;
			bump(OPS_BY_UID);
		}
	}
	return lane;
}

/* resolve returns the socket's lane (LANE_UNSET if nothing matched) and
 * stores it by cookie; owner: the socket's creator may be asked (connect). */
static __always_inline __u32 resolve(struct bpf_sock_ops *ops, __u64 cookie, int owner)
{
	int stored = 0;
	__u32 lane = lane_by_flow(ops, cookie, &stored);

	if (stored)
		return lane;
	if (lane == LANE_UNSET && owner)
		lane = owner_lane(cookie);
	return store_lane(cookie, lane);
}

/* set_lowat gives a background socket TCP_NOTSENT_LOWAT, once. */
static __always_inline void set_lowat(struct bpf_sock_ops *ops, __u64 cookie, struct ops_config *cfg)
{
	__u8 one = 1;
	int val;

	if (!cfg || !cfg->notsent_lowat || bpf_map_lookup_elem(&lanes_lowat_set, &cookie))
		return;
	val = cfg->notsent_lowat;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_NOTSENT_LOWAT, &val, sizeof(val)) == 0) {
		bpf_map_update_elem(&lanes_lowat_set, &cookie, &one, BPF_ANY);
		bump(OPS_NOTSENT_LOWAT);
	} else {
		bump(OPS_SETSOCKOPT_ERR);
	}
}

SEC("sockops/lanes_sockops")
int lanes_sockops(struct bpf_sock_ops *ops)
{
	__u32 zero = 0, lane;
	struct ops_config *cfg = bpf_map_lookup_elem(&lanes_ops_cfg, &zero);
	struct bgc_state *st;
	__u64 cookie;

	switch (ops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		bump(OPS_CONNECT);
		cookie = bpf_get_socket_cookie(ops);
		resolve(ops, cookie, 1);
		bpf_map_delete_elem(&lanes_sock_owner, &cookie); /* asked once */
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		cookie = bpf_get_socket_cookie(ops);
		if (ops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
			bump(OPS_ACCEPT);
			lane = resolve(ops, cookie, 0);
		} else {
			lane = lane_of(cookie);
		}
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_RTT_CB_FLAG |
					       BPF_SOCK_OPS_STATE_CB_FLAG);
		if (lane == LANE_BACKGROUND)
			set_lowat(ops, cookie, cfg);
		break;
	case BPF_SOCK_OPS_RTT_CB:
		cookie = bpf_get_socket_cookie(ops);
		if (lane_of(cookie) != LANE_BACKGROUND)
			break;
		set_lowat(ops, cookie, cfg); /* background after it was established */
		if (!cfg || !cfg->bg_target_us)
			break;
		st = bpf_map_lookup_elem(&bgc_state, &cookie);
		bgc_clamp(ops, cookie, cfg->bg_target_us);
		if (!st) /* its first clamp */
			bump(OPS_BG_CLAMP);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (ops->args[1] == BPF_TCP_CLOSE) {
			cookie = bpf_get_socket_cookie(ops);
			bpf_map_delete_elem(&lanes_cookie, &cookie);
			bpf_map_delete_elem(&lanes_lowat_set, &cookie);
			bpf_map_delete_elem(&bgc_state, &cookie);
			bump(OPS_CLOSED);
		}
		break;
	}
	return 1;
}

/* lanes_sock_create records a TCP socket's creator for its connect; it
 * allows every socket. */
SEC("cgroupsockcreate/lanes_sock_create")
int lanes_sock_create(struct bpf_sock *sk)
{
	struct sock_owner o = {};
	__u64 cookie;

	if (sk->type != SOCK_STREAM || sk->protocol != IPPROTO_TCP)
		return 1;
	cookie = bpf_get_socket_cookie(sk);
	o.cgroup = bpf_get_current_cgroup_id();
	o.uid = (__u32)bpf_get_current_uid_gid();
	bpf_map_update_elem(&lanes_sock_owner, &cookie, &o, BPF_ANY);
	return 1;
}

ANDROID_LOADER_VERSIONS;
char LICENSE[] SEC("license") = "Dual BSD/GPL";
