//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * sockops.c - lanes per-socket program: a cgroup-v2 sock_ops program,
 * attached at the cgroup v2 root through a bpf_link (several lanes daemons in
 * several network namespaces attach side by side), that resolves each TCP
 * socket's lane once and applies the lane's per-socket settings.
 *
 * It acts only on sockets of the network namespace whose cookie the loader
 * set in CFG.netns_cookie (bpf_get_netns_cookie; before 5.15, where sock_ops
 * lacks it, the namespace's inode CFG.netns_ino); the sockets of other
 * namespaces belong to other daemons.
 *
 *   - TCP_CONNECT_CB (active open, before the SYN) and
 *     PASSIVE_ESTABLISHED_CB: resolve the lane (socket cookie already known,
 *     else 5-tuple with the local address (flow_lookup), else destination
 *     prefix, else the socket's cgroup v2 id or an ancestor's, else its
 *     uid) and store cookie -> lane in lanes_cookie for the classifier.
 *     Nothing is stored when nothing matched, so a flow registered later
 *     still wins.
 *   - ACTIVE/PASSIVE_ESTABLISHED_CB: ask for STATE and RTT callbacks; for a
 *     background socket set TCP_NOTSENT_LOWAT = CFG.notsent_lowat so that
 *     its own unsent data stays small; apply the cwnd cap.
 *   - RTT_CB (each RTT sample): apply the cwnd cap if it changed (and switch
 *     a newly capped CUBIC socket's congestion control, below); give
 *     TCP_NOTSENT_LOWAT to a socket that became background after it was
 *     established (the daemon set its cookie's lane later: a 3-tuple
 *     registered after connect, as the LW-LBE API does).
 *   - HDR_OPT_LEN_CB (each segment sent, when asked for): a background
 *     socket's receive window (rLEDBAT, rledbat.h), else the cooperative
 *     downlink cap (rwndcap.h): TCP_WINDOW_CLAMP from lanes_sock_rwnd.
 *   - RTT_CB of a socket whose cookie names another lane after it was
 *     background (a process or cgroup moved back, `lanes move`):
 *     leave_background gives it its own congestion control and
 *     TCP_NOTSENT_LOWAT back; its next segment releases rLEDBAT's window.
 *   - STATE_CB to TCP_CLOSE: drop the cookie's entries.
 *
 * cwnd cap: lanes_sock_cap[cookie], else lanes_lane_cap[lane]; 0 = none.
 * Applied with bpf_setsockopt(TCP_BPF_SNDCWND_CLAMP), which sets
 * snd_cwnd_clamp and snd_ssthresh only; the congestion control then never
 * grows cwnd past the clamp. The value last applied is kept in socket-local
 * storage so the setsockopt runs only when the cap changes (it resets
 * ssthresh each time). Removing a cap sets the clamp to CAP_NONE, which also
 * resets ssthresh: the socket probes upward in slow start from there.
 *
 * The clamp alone does not lower a cwnd that is already larger: CUBIC
 * applies it only when the socket is cwnd-limited. So when a socket gets its
 * first cap and runs "cubic", it is switched (bpf_setsockopt TCP_CONGESTION,
 * once per socket) to CFG.cc_name, this datapath's BPF congestion control
 * (internal/bpf/capcc: CUBIC plus snd_cwnd = min(snd_cwnd, clamp) on every
 * ACK), whose init brings cwnd down at once; later cap changes reach cwnd on
 * the next ACK. BBR applies the clamp on every ACK itself and is left alone,
 * as are reno and the rest (counted in cc_other). CFG.cc_name is empty when
 * the kernel cannot run it: then nothing is switched. A capped socket also
 * gets TCP's internal pacing (pace(), below), so it sends its window over
 * the RTT rather than in one burst.
 * (docs/datapath.md, "cwnd caps".)
 *
 * Note: the socket's cgroup and uid are read from struct sock through CO-RE
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
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "lanes_kernel.h"
#include "lanes_maps.h"

char __license[] SEC("license") = "GPL";

/* deepest ancestors tried for a cgroup match (the socket's own included) */
#define CGROUP_DEPTH 16
/* a finite SO_MAX_PACING_RATE (bytes/s) that limits nothing: it only turns
 * on TCP's internal pacing */
#define PACING_ON 0x7fffffff
#define CC_NAME_LEN 16 /* TCP_CA_NAME_MAX */

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

volatile const struct sockops_config {
	__u64 netns_cookie;  /* only sockets of this network namespace */
	__u32 notsent_lowat; /* TCP_NOTSENT_LOWAT for background sockets, 0 = leave */
	__u32 netns_ino;     /* != 0: match the namespace by inode instead (no
			      * bpf_get_netns_cookie in sock_ops before 5.15) */
	char cc_name[CC_NAME_LEN]; /* lanes capcc congestion control, "" = none */
	char bg_cc_name[CC_NAME_LEN]; /* background lane's LEDBAT++, "" = none */
	__u32 rl_target_us; /* rLEDBAT queuing-delay target, 0 = off */
	__u32 yield; /* the foreground-aware yield: foreground traffic or a new connection holds background */
	__u32 bg_clamp_target_us; /* LEDBAT++ as a cwnd clamp (bgclamp.h) where bg_cc_name is "", 0 = off */
	__u32 rl_share; /* rLEDBAT beside a present foreground: RL_SHARE_ON | LEDBAT_F_SHARE_*, 0: held */
} CFG = {};

#define RL_SHARE_ON 16 /* CFG.rl_share: a background download shares beside an unharmed foreground */

/* cwnd cap per lane (index lane), segments, 0 = none */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LANE_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} lanes_lane_cap SEC(".maps");

/* cwnd cap per socket cookie, segments, 0 = none; beats the lane's. LRU:
 * a cap written for a socket that closed meanwhile (after its STATE_CB
 * delete) is never touched again and is the first evicted, so such leftovers
 * cannot fill the map and refuse the caps of live sockets. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u32);
} lanes_sock_cap SEC(".maps");

/* cookies of the sockets this program saw established (and so gets RTT and
 * state callbacks for): a socket that predates the program gets none, so a
 * cwnd cap for it would never be applied; the loader refuses such caps. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} lanes_sock_seen SEC(".maps");

struct sk_state {
	__u32 applied_cap; /* 0 = never capped */
	__u32 lane;
	__u32 cc_checked;  /* the congestion control was looked at (once) */
	__u32 lowat_set;   /* TCP_NOTSENT_LOWAT applied (background) */
	__u32 bg_cc;       /* switched to the background congestion control */
	__u32 paced;       /* TCP internal pacing turned on (capped socket) */
	char app_cc[CC_NAME_LEN]; /* congestion control the app asked for after
				   * the background one was applied ("" = none) */
	char orig_cc[CC_NAME_LEN]; /* what the socket ran before the background
				    * one (given back when it leaves background) */
	__u64 cookie;      /* the socket's cookie (set with bg_cc): the
			    * setsockopt program has no helper for it */
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sk_state);
} lanes_sk_state SEC(".maps");

/* lanes_app_cc[cookie]: the congestion control the app of a background
 * socket asked for (and did not get: it keeps LEDBAT++), written by
 * lanes_setsockopt, deleted at the socket's close (STATE_CB). The monitor
 * reads it by cookie through the daemon: socket storage cannot be looked up
 * from user space without the socket's descriptor. LRU: an entry whose
 * close was missed (a socket of an earlier run) is evicted first. */
struct app_cc_name {
	char name[CC_NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct app_cc_name);
} lanes_app_cc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OPS_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} lanes_ops_stats SEC(".maps");

static __always_inline void bump(__u32 idx)
{
	__u64 *c = bpf_map_lookup_elem(&lanes_ops_stats, &idx);

	if (c)
		(*c)++;
}

#include "rledbat.h"
#include "rwndcap.h"
#include "bgclamp.h"

/* The foreground-aware yield is per egress interface: a background socket
 * yields while the foreground is active on the interface its packets leave
 * by (sock_ifindex), not on another one: lanes_fg_active, stamped by the
 * classifier, and lanes_fg_open, written here at a foreground connection's
 * opening (lanes_maps.h's fg_yield), hold its sockets at the minimum
 * window (cwnd and receive window); key 0, stamped with any interface,
 * holds the sockets whose interface is not known. */

#define YIELD_CWND 2 /* segments, the cwnd (and receive window) of a yield */

/* sock_ifindex is the interface the socket's packets leave by: the device
 * of its cached route (sk_dst_cache, which the kernel sets at connect and
 * accept and renews when the route changes), else the device it is bound
 * to, else 0 (not known: a request socket, a route being renewed). */
static __always_inline __u32 sock_ifindex(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct sock *sk;
	__u32 idx = 0;

	if (!bsk)
		return 0;
	sk = (struct sock *)bpf_skc_to_tcp_sock(bsk);
	if (sk)
		idx = BPF_CORE_READ(sk, sk_dst_cache, dev, ifindex);
	if (!idx)
		idx = bsk->bound_dev_if;
	return idx;
}

/* yielding: the yield is on (CFG.yield) and the socket's interface (or,
 * not known, any) holds background at the minimum (lanes_maps.h's
 * fg_yield: a harmed foreground socket, a foreground connection's opening). */
static __always_inline int yielding(struct bpf_sock_ops *ops)
{
	__u32 idx;
	__u64 now;

	if (!CFG.yield)
		return 0;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	return fg_yield(idx, now);
}

#define FG_AT_CONNECT 0 /* fg_opened's at: the SYN is about to leave */
#define FG_AT_ACTIVE 1  /* our SYN was answered */
#define FG_AT_PASSIVE 2 /* a connection was accepted */

/* fg_opened records a foreground connection's opening (the yield on): at
 * connect until the handshake ends (at most FG_OPEN_HOLD_NS), at the
 * handshake's end (active: shortening the hold its connect began; passive:
 * a hold of its own) for FG_OPEN_RTTS of its RTT. Not where the
 * foreground is already present (the classifier's stamp): background
 * already keeps only FG_SHARE_TARGET of queue there, which a new
 * connection's first round trips pay little for, and a foreground that
 * opens a connection every few hundred ms would hold it for good. */
static __always_inline void fg_opened(struct bpf_sock_ops *ops, __u32 lane, int at)
{
	__u64 now, hold = FG_OPEN_HOLD_NS, rtt, *end;
	__u32 idx;

	if (!CFG.yield || lane == LANE_BACKGROUND)
		return;
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	if (at == FG_AT_ACTIVE) { /* only a hold its connect began */
		end = bpf_map_lookup_elem(&lanes_fg_open, &idx);
		if (!end || now >= *end)
			return;
	} else if (fg_held(idx, now)) {
		return;
	}
	if (at != FG_AT_CONNECT) {
		rtt = (__u64)(ops->srtt_us >> 3) * 1000;
		if (FG_OPEN_RTTS * rtt < hold)
			hold = FG_OPEN_RTTS * rtt;
	}
	now += hold;
	bpf_map_update_elem(&lanes_fg_open, &idx, &now, BPF_ANY);
}

/* sharing: the yield is on and the socket's interface (or, not known, any)
 * has a foreground present (the classifier's stamp): a background upload
 * keeps FG_SHARE_TARGET of queue instead of its target (LEDBAT++, in its
 * congestion control); a background download is held at the minimum
 * (rLEDBAT's receive-side RTT is too coarse for that target: beside a
 * paced download the probe's p95 rose by 87 ms). */
static __always_inline int sharing(struct bpf_sock_ops *ops)
{
	if (!CFG.yield)
		return 0;
	return fg_held(sock_ifindex(ops), bpf_ktime_get_ns());
}

/* the foreground socket's RTT state that fg_rtt reads */
struct minmax_sample___fg {
	__u32 t;
	__u32 v;
};

struct tcp_sock___fg {
	struct {
		struct minmax_sample___fg s[3];
	} rtt_min;
	__u32 max_packets_out;
	__u8 is_cwnd_limited : 1;
} __attribute__((preserve_access_index));

/* fg_harm_of is idx's harm entry, created empty if it has none. */
static __always_inline struct fg_harm *fg_harm_of(__u32 idx)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx), fresh = {};

	if (h)
		return h;
	bpf_map_update_elem(&lanes_fg_harm, &idx, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&lanes_fg_harm, &idx);
}

/* fg_seen_mark records that a foreground TCP socket on idx gave an RTT
 * sample (fg_tcp_seen). */
static __always_inline void fg_seen_mark(__u32 idx, __u64 now)
{
	struct fg_harm *h = fg_harm_of(idx);

	if (h)
		h->seen = now;
}

/* fg_harm_mark records a harmed foreground sample on idx. */
static __always_inline void fg_harm_mark(__u32 idx, __u64 now, __u32 qd, __u32 limited)
{
	struct fg_harm *h = fg_harm_of(idx);

	if (!h)
		return;
	if (!h->at || now - h->at >= FG_HARM_HOLD_NS)
		h->since = now;
	h->at = now;
	h->samples++;
	h->qd_us = qd;
	h->limited = limited;
}

/* fg_rtt reads a foreground socket's RTT sample: it is harmed when its
 * smoothed RTT is above its minimum by more than FG_HARM_QD_US, or when it
 * is cwnd-limited in congestion avoidance (it would send more than the
 * path takes: a bulk transfer). Then background on its interface is held
 * (fg_yield) for FG_HARM_HOLD_NS. In slow start the window limits every
 * flow that has data; there only the delay counts. */
static __always_inline void fg_rtt(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock___fg *tp;
	__u32 srtt, min, qd = 0, limited = 0, idx;
	__u64 now;

	if (!CFG.yield || !bsk)
		return;
	tp = (struct tcp_sock___fg *)bpf_skc_to_tcp_sock(bsk);
	if (!tp)
		return;
	srtt = ops->srtt_us >> 3;
	min = tp->rtt_min.s[0].v;
	if (min && min != ~0U && srtt > min)
		qd = srtt - min;
	if (ops->snd_cwnd >= ops->snd_ssthresh)
		limited = BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
	idx = sock_ifindex(ops);
	now = bpf_ktime_get_ns();
	fg_seen_mark(idx, now);
	if (idx)
		fg_seen_mark(0, now);
	if (qd <= FG_HARM_QD_US && !limited)
		return;
	fg_harm_mark(idx, now, qd, limited);
	if (idx)
		fg_harm_mark(0, now, qd, limited);
}

#include "fgrcv.h"

static __always_inline int valid_lane(const __u32 *v)
{
	return v && *v >= LANE_REALTIME && *v <= LANE_MAX;
}

/* resolve returns the socket's lane (LANE_UNSET if nothing matched) and
 * stores it by cookie. */
static __always_inline __u32 resolve(struct bpf_sock_ops *ops, __u64 cookie)
{
	struct flow_key key = {};
	struct bpf_sock *bsk;
	struct sock *sk;
	__u32 *v, lane;

	v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
	if (valid_lane(v)) {
		bump(OPS_BY_COOKIE);
		return *v;
	}

	if (ops->family == AF_INET) {
		__u32 a = ops->remote_ip4;

		__u32 l = ops->local_ip4;

		key.daddr[10] = 0xff;
		key.daddr[11] = 0xff;
		__builtin_memcpy(&key.daddr[12], &a, 4);
		key.saddr[10] = 0xff;
		key.saddr[11] = 0xff;
		__builtin_memcpy(&key.saddr[12], &l, 4);
	} else if (ops->family == AF_INET6) {
		/* one 4-byte context load each: the verifier refuses wider ones */
		__u32 a[4] = {*(volatile __u32 *)&ops->remote_ip6[0],
			      *(volatile __u32 *)&ops->remote_ip6[1],
			      *(volatile __u32 *)&ops->remote_ip6[2],
			      *(volatile __u32 *)&ops->remote_ip6[3]};
		__u32 l[4] = {*(volatile __u32 *)&ops->local_ip6[0],
			      *(volatile __u32 *)&ops->local_ip6[1],
			      *(volatile __u32 *)&ops->local_ip6[2],
			      *(volatile __u32 *)&ops->local_ip6[3]};

		__builtin_memcpy(key.daddr, a, 16);
		__builtin_memcpy(key.saddr, l, 16);
	} else {
		return LANE_UNSET;
	}
	/* remote_port: the be16 port in the high half on little endian */
	key.dport = bpf_ntohl(ops->remote_port) & 0xffff;
	key.sport = ops->local_port;
	key.proto = 6;
	v = flow_lookup(&key);
	if (v) {
		lane = *v;
		bump(OPS_BY_TUPLE);
		goto store;
	}
	v = dst_lookup(key.daddr, key.dport);
	if (v) {
		lane = *v;
		bump(OPS_BY_DST);
		goto store;
	}

	/* ops->sk may not take pointer arithmetic; its BTF view may */
	bsk = ops->sk;
	sk = bsk ? (struct sock *)bpf_skc_to_tcp_sock(bsk) : 0;
	if (sk) {
		struct cgroup *cg = sock_cgroup(sk);
		int level = cg ? BPF_CORE_READ(cg, level) : -1;
		__u32 uid = BPF_CORE_READ(sk, sk_uid.val);

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
				lane = *v;
				bump(OPS_BY_CGROUP);
				goto store;
			}
		}
		v = bpf_map_lookup_elem(&lanes_uid, &uid);
		if (valid_lane(v)) {
			lane = *v;
			bump(OPS_BY_UID);
			goto store;
		}
	}
	bump(OPS_UNRESOLVED);
	return LANE_UNSET;
store:
	bpf_map_update_elem(&lanes_cookie, &cookie, &lane, BPF_ANY);
	return lane;
}

/* switch_cc moves a capped CUBIC socket to the lanes congestion control
 * (CUBIC plus an enforced clamp), once per socket. Its init pulls cwnd down
 * to the clamp just set; later cap changes reach cwnd on the next ACK. */
static __always_inline void switch_cc(struct bpf_sock_ops *ops, struct sk_state *st)
{
	char cur[CC_NAME_LEN] = {}, want[CC_NAME_LEN] = {};

	if (st->cc_checked || !CFG.cc_name[0])
		return;
	st->cc_checked = 1;
	if (bpf_getsockopt(ops, SOL_TCP, TCP_CONGESTION, cur, sizeof(cur))) {
		bump(OPS_CC_SWITCH_ERR);
		return;
	}
	if (cur[0] != 'c' || cur[1] != 'u' || cur[2] != 'b' || cur[3] != 'i' ||
	    cur[4] != 'c' || cur[5] != 0) {
		bump(OPS_CC_OTHER);
		return;
	}
	/* volatile reads: a plain copy of a const global gets folded to its
	 * all-zero initializer */
	for (int i = 0; i < CC_NAME_LEN; i++)
		want[i] = CFG.cc_name[i];
	if (bpf_setsockopt(ops, SOL_TCP, TCP_CONGESTION, want, sizeof(want)) == 0)
		bump(OPS_CC_SWITCH);
	else
		bump(OPS_CC_SWITCH_ERR);
}

/* switch_bg_cc moves a background socket to CFG.bg_cc_name (LEDBAT++), once
 * per socket, whatever it ran: a background flow must yield at any
 * bottleneck, not only at lanes' own queue. LEDBAT++ enforces the cwnd
 * clamp itself, so a cap never switches it on to capcc (cc_checked). */
static __always_inline void switch_bg_cc(struct bpf_sock_ops *ops, __u64 cookie)
{
	char want[CC_NAME_LEN] = {};
	struct bpf_sock *sk = ops->sk;
	struct sk_state *st;

	if (!sk || !CFG.bg_cc_name[0])
		return;
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st || st->bg_cc)
		return;
	st->bg_cc = 1;
	st->cc_checked = 1;
	st->cookie = cookie;
	if (bpf_getsockopt(ops, SOL_TCP, TCP_CONGESTION, st->orig_cc, sizeof(st->orig_cc)))
		st->orig_cc[0] = 0;
	for (int i = 0; i < CC_NAME_LEN; i++)
		want[i] = CFG.bg_cc_name[i];
	if (bpf_setsockopt(ops, SOL_TCP, TCP_CONGESTION, want, sizeof(want)) == 0)
		bump(OPS_BG_CC);
	else
		bump(OPS_CC_SWITCH_ERR);
}

/* leave_background gives a socket that left the background lane (a process
 * or cgroup moved back, a rule removed) what it had before: the congestion
 * control its app asked for meanwhile, else the one it ran before LEDBAT++;
 * TCP_NOTSENT_LOWAT 0 (the sysctl's default); the capcc check again. The
 * receive window rLEDBAT clamped is released by rledbat_leave at the next
 * segment the socket sends. */
static __always_inline void leave_background(struct bpf_sock_ops *ops, __u64 cookie)
{
	char want[CC_NAME_LEN] = {};
	struct bpf_sock *sk = ops->sk;
	struct sk_state *st;
	int zero = 0;

	if (!sk)
		return;
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0, 0);
	if (!st || !(st->bg_cc || st->lowat_set))
		return;
	if (st->bg_cc) {
		if (st->app_cc[0])
			__builtin_memcpy(want, st->app_cc, CC_NAME_LEN);
		else
			__builtin_memcpy(want, st->orig_cc, CC_NAME_LEN);
		want[CC_NAME_LEN - 1] = 0;
		/* bg_cc cleared first: lanes_setsockopt lets the name through */
		st->bg_cc = 0;
		if (want[0] && bpf_setsockopt(ops, SOL_TCP, TCP_CONGESTION, want, sizeof(want)))
			bump(OPS_CC_SWITCH_ERR);
		st->app_cc[0] = 0;
		bpf_map_delete_elem(&lanes_app_cc, &cookie);
	}
	if (st->lowat_set) {
		st->lowat_set = 0;
		if (bpf_setsockopt(ops, SOL_TCP, TCP_NOTSENT_LOWAT, &zero, sizeof(zero)))
			bump(OPS_SETSOCKOPT_ERR);
	}
	st->cc_checked = 0;
	bump(OPS_BG_LEFT);
}

/* release_stale_clamp: a socket an earlier lanes run of this namespace
 * handled (killed: its RTT callbacks still reach this program, which has no
 * state for the socket) keeps the cwnd clamp that run last set, a cap or
 * the yield's 2 segments, for as long as it lives. Clear it: this run
 * applies its own caps and yield from here. A clamp at or above CAP_NONE
 * (a removed cap, or the kernel's ~0) is no clamp. */
static __always_inline void release_stale_clamp(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk = ops->sk;
	struct tcp_sock *tp;
	int val = CAP_NONE;

	if (!bsk)
		return;
	/* a clamp this run set has its socket storage (an evicted
	 * lanes_sock_seen entry must not lose it) */
	if (bpf_sk_storage_get(&lanes_sk_state, bsk, 0, 0))
		return;
	tp = (struct tcp_sock *)bpf_skc_to_tcp_sock(bsk);
	if (!tp || tp->snd_cwnd_clamp >= CAP_NONE)
		return;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &val, sizeof(val)) == 0)
		bump(OPS_CAP_SET);
	else
		bump(OPS_SETSOCKOPT_ERR);
}

/* pace turns on TCP's internal pacing for a capped socket, once: any finite
 * SO_MAX_PACING_RATE marks the socket as needing pacing, and without the fq
 * qdisc TCP then paces itself (an hrtimer per socket) at its pacing rate,
 * 1.2 x cwnd / srtt in congestion avoidance (tcp_pacing_ca_ratio). A
 * cwnd-limited socket otherwise sends its whole window in a burst as the
 * ACKs of the previous one arrive, so at a long RTT the shares of the
 * medium are uneven over any window shorter than the RTT. Pacing stays on
 * when the cap is removed (it limits nothing but the burst).
 * Note: a maximum rate of cap x MSS / min RTT instead (the cap's own rate)
 * measured worse in the lab (Jain per 200 ms 0.935 vs 0.983, RTT 1.10x vs
 * 1.06x at N = 4): the kernel's ratio follows the RTT as it is. */
static __always_inline void pace(struct bpf_sock_ops *ops, struct sk_state *st)
{
	int val = PACING_ON;

	if (st->paced)
		return;
	st->paced = 1;
	if (bpf_setsockopt(ops, SOL_SOCKET, SO_MAX_PACING_RATE, &val, sizeof(val)))
		bump(OPS_SETSOCKOPT_ERR);
}

static __always_inline void apply_cap(struct bpf_sock_ops *ops, __u64 cookie, __u32 lane)
{
	struct bpf_sock *sk = ops->sk;
	struct sk_state *st;
	__u32 want = 0, *c;
	int val, yield = 0, bgc = 0;

	if (!sk)
		return;
	c = bpf_map_lookup_elem(&lanes_sock_cap, &cookie);
	if (c && *c) {
		want = *c;
	} else {
		__u32 idx = lane ? lane : LANE_INTERACTIVE;

		c = bpf_map_lookup_elem(&lanes_lane_cap, &idx);
		if (c)
			want = *c;
	}
	/* the foreground-aware yield: background held at the minimum cwnd */
	if (lane == LANE_BACKGROUND && yielding(ops) && (!want || want > YIELD_CWND)) {
		want = YIELD_CWND;
		yield = 1;
	}
	/* without a BPF congestion control: LEDBAT++'s window as the clamp */
	if (lane == LANE_BACKGROUND)
		bgc = bgc_limit(ops, &want);
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0,
				want ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!st || st->applied_cap == want)
		return;
	val = want ? (int)want : CAP_NONE;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &val, sizeof(val)) == 0) {
		st->applied_cap = want;
		bump(yield ? OPS_YIELD : bgc ? OPS_BG_CLAMP : OPS_CAP_SET);
		/* LEDBAT++'s clamp leaves the system's congestion control
		 * and pacing alone (bgclamp.h) */
		if (want && !bgc) {
			switch_cc(ops, st);
			pace(ops, st);
		}
	} else {
		bump(OPS_SETSOCKOPT_ERR);
	}
}

/* set_lowat gives a background socket TCP_NOTSENT_LOWAT = CFG.notsent_lowat,
 * once (remembered in its socket storage). */
static __always_inline void set_lowat(struct bpf_sock_ops *ops)
{
	struct bpf_sock *sk = ops->sk;
	struct sk_state *st;
	int val;

	if (!sk || !CFG.notsent_lowat)
		return;
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st || st->lowat_set)
		return;
	val = CFG.notsent_lowat;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_NOTSENT_LOWAT, &val, sizeof(val)) == 0) {
		st->lowat_set = 1;
		bump(OPS_NOTSENT_LOWAT);
	} else {
		bump(OPS_SETSOCKOPT_ERR);
	}
}

/* in_netns: ops's socket belongs to this datapath's network namespace. With
 * CFG.netns_ino set the helper call is dead code the verifier never checks
 * (CFG is read-only, its value known), so the program loads where sock_ops
 * has no bpf_get_netns_cookie. The inode path reads the BTF socket directly
 * (no bpf_probe_read_kernel) and sees full sockets only: on those kernels
 * the SYN-ACK's header-option callbacks (a request socket) are skipped. */
static __always_inline int in_netns(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk;
	struct sock *sk;
	struct net *net;

	if (!CFG.netns_ino)
		return bpf_get_netns_cookie(ops) == CFG.netns_cookie;
	bsk = ops->sk;
	sk = bsk ? (struct sock *)bpf_skc_to_tcp_sock(bsk) : 0;
	if (!sk)
		return 0;
	net = sk->__sk_common.skc_net.net;
	return net && net->ns.inum == CFG.netns_ino;
}

SEC("sockops")
int lanes_sockops(struct bpf_sock_ops *ops)
{
	__u64 cookie;
	__u32 lane, *v;

	if (!in_netns(ops))
		return 1;

	switch (ops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		bump(OPS_CONNECT);
		fg_opened(ops, resolve(ops, bpf_get_socket_cookie(ops)), FG_AT_CONNECT);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		cookie = bpf_get_socket_cookie(ops);
		if (ops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
			bump(OPS_ACCEPT);
			lane = resolve(ops, cookie);
		} else {
			v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
			lane = valid_lane(v) ? *v : LANE_UNSET;
		}
		fg_opened(ops, lane, ops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB ? FG_AT_PASSIVE : FG_AT_ACTIVE);
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags |
					       BPF_SOCK_OPS_STATE_CB_FLAG |
					       BPF_SOCK_OPS_RTT_CB_FLAG |
					       ((lane == LANE_BACKGROUND && CFG.rl_target_us) || rwnd_on() ||
							(lane != LANE_BACKGROUND && fg_rcv_on()) ?
						BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG : 0));
		{
			__u8 one = 1;

			bpf_map_update_elem(&lanes_sock_seen, &cookie, &one, BPF_ANY);
		}
		if (lane == LANE_BACKGROUND) {
			set_lowat(ops);
			switch_bg_cc(ops, cookie);
		}
		apply_cap(ops, cookie, lane);
		break;
	case BPF_SOCK_OPS_RTT_CB:
		cookie = bpf_get_socket_cookie(ops);
		/* callbacks asked for by an earlier lanes run reach this program
		 * too: release the clamp that run left on the socket */
		if (!bpf_map_lookup_elem(&lanes_sock_seen, &cookie)) {
			__u8 one = 1;

			bpf_map_update_elem(&lanes_sock_seen, &cookie, &one, BPF_ANY);
			release_stale_clamp(ops);
		}
		v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
		lane = valid_lane(v) ? *v : LANE_UNSET;
		/* a socket moved to background after it was established (a 3-tuple
		 * registered after connect, as the LW-LBE API does) */
		if (lane == LANE_BACKGROUND) {
			set_lowat(ops);
			switch_bg_cc(ops, cookie);
			bgc_rtt(ops, sharing(ops)); /* LEDBAT++ without struct_ops */
			if (CFG.rl_target_us && !(ops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG))
				bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags |
							       BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		} else {
			if (lane != LANE_UNSET)
				leave_background(ops, cookie); /* moved out: its own settings */
			fg_rtt(ops); /* a foreground socket: is it harmed? */
			fg_rcv_want(ops); /* and its receive side (fgrcv.h) */
		}
		rwnd_want_cb(ops); /* downlink caps turned on after establishment */
		apply_cap(ops, cookie, lane);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		cookie = bpf_get_socket_cookie(ops);
		v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
		if (valid_lane(v) && *v == LANE_BACKGROUND && CFG.rl_target_us) {
			/* min(rLEDBAT, downlink cap); beside a present, unharmed
			 * foreground it keeps FG_SHARE_TARGET (CFG.rl_share; 0:
			 * held at the minimum there) */
			int share = sharing(ops);

			rledbat_packet(ops, cookie, yielding(ops) || (share && !CFG.rl_share),
				       share ? CFG.rl_share : 0);
		} else {
			if (valid_lane(v))
				rledbat_leave(ops); /* moved out of background */
			fg_rcv(ops); /* a foreground download: is it harmed? */
			coop_rwnd(ops, cookie);
		}
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (ops->args[1] == BPF_TCP_CLOSE) {
			cookie = bpf_get_socket_cookie(ops);
			bpf_map_delete_elem(&lanes_cookie, &cookie);
			bpf_map_delete_elem(&lanes_sock_cap, &cookie);
			bpf_map_delete_elem(&lanes_sock_seen, &cookie);
			bpf_map_delete_elem(&lanes_sock_rwnd, &cookie);
			bpf_map_delete_elem(&lanes_app_cc, &cookie);
			bump(OPS_CLOSED);
		}
		break;
	}
	return 1;
}

/* lanes_setsockopt (cgroup/setsockopt, at the cgroup v2 root beside
 * sock_ops): an app's setsockopt(TCP_CONGESTION) on a socket already
 * switched to the background congestion control is skipped (optlen = -1:
 * the call succeeds, the kernel's handler does not run), so the socket keeps
 * LEDBAT++; the name asked for is kept in app_cc and, by the socket's
 * cookie, in lanes_app_cc for the monitor. The new name cannot be
 * written in its place: optlen may only shrink, and the background name is
 * longer than most. Only sockets with this program's socket storage are
 * touched, so other namespaces' and not yet connected sockets pass as is. */
SEC("cgroup/setsockopt")
int lanes_setsockopt(struct bpf_sockopt *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	char *val = ctx->optval, *end = ctx->optval_end;
	struct app_cc_name asked = {};
	struct sk_state *st;
	int n;

	if (ctx->level != SOL_TCP || ctx->optname != TCP_CONGESTION || !sk)
		return 1;
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0, 0);
	if (!st || !st->bg_cc)
		return 1;
	n = ctx->optlen;
	/* The copy stops at the name's end: a loop whose every byte chose
	 * between the name and a zero and went on left 2^15 paths to the
	 * verifier (894,587 instructions on 6.18, over the 1,000,000 limit
	 * on 5.10, which then refused the whole sock_ops object). */
	for (int i = 0; i < CC_NAME_LEN - 1; i++) {
		if (i >= n || val + i + 1 > end)
			break;
		asked.name[i] = val[i];
	}
	__builtin_memcpy(st->app_cc, asked.name, CC_NAME_LEN);
	/* a socket already closed (reset) wrote its close: no entry after it */
	if (st->cookie && sk->state != BPF_TCP_CLOSE)
		bpf_map_update_elem(&lanes_app_cc, &st->cookie, &asked, BPF_ANY);
	ctx->optlen = -1;
	bump(OPS_BG_CC_KEPT);
	return 1;
}

/* ---- live moves: the iterator ----------------------------------------
 *
 * lanes_live_cc (iter/tcp, run by the daemon right after it moved open
 * sockets to another lane by cookie, lanes_live_pending): applies the new
 * lane's congestion control and TCP_NOTSENT_LOWAT to each pending socket
 * at once, with the socket locked by the iterator (bpf_setsockopt from
 * iter/tcp: Linux 5.14+), instead of at its next RTT callback; an idle
 * socket so switches too. Loaded apart from the sock_ops program (Load
 * leaves it out), so a kernel without it loses only this.
 */

/* lanes_live_pending: cookie -> the lane it was just moved to; the
 * iterator takes each entry it applied out. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} lanes_live_pending SEC(".maps");

/* live_enter_bg: LEDBAT++ and TCP_NOTSENT_LOWAT, as switch_bg_cc and
 * set_lowat do at a callback. */
static __always_inline void live_enter_bg(struct sock *sk, struct sk_state *st, __u64 cookie)
{
	char want[CC_NAME_LEN] = {};
	int val;

	if (CFG.notsent_lowat && !st->lowat_set) {
		val = CFG.notsent_lowat;
		if (bpf_setsockopt(sk, SOL_TCP, TCP_NOTSENT_LOWAT, &val, sizeof(val)) == 0) {
			st->lowat_set = 1;
			bump(OPS_NOTSENT_LOWAT);
		} else {
			bump(OPS_SETSOCKOPT_ERR);
		}
	}
	if (!CFG.bg_cc_name[0] || st->bg_cc)
		return;
	if (bpf_getsockopt(sk, SOL_TCP, TCP_CONGESTION, st->orig_cc, sizeof(st->orig_cc)))
		st->orig_cc[0] = 0;
	for (int i = 0; i < CC_NAME_LEN; i++)
		want[i] = CFG.bg_cc_name[i];
	if (bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, want, sizeof(want)) == 0) {
		st->bg_cc = 1;
		st->cc_checked = 1;
		st->cookie = cookie;
		bump(OPS_BG_CC);
	} else {
		bump(OPS_CC_SWITCH_ERR);
	}
}

/* live_leave_bg: what leave_background does at a callback. */
static __always_inline void live_leave_bg(struct sock *sk, struct sk_state *st, __u64 cookie)
{
	char want[CC_NAME_LEN] = {};
	int zero = 0;

	if (!(st->bg_cc || st->lowat_set))
		return;
	if (st->bg_cc) {
		if (st->app_cc[0])
			__builtin_memcpy(want, st->app_cc, CC_NAME_LEN);
		else
			__builtin_memcpy(want, st->orig_cc, CC_NAME_LEN);
		want[CC_NAME_LEN - 1] = 0;
		st->bg_cc = 0;
		if (want[0] && bpf_setsockopt(sk, SOL_TCP, TCP_CONGESTION, want, sizeof(want)))
			bump(OPS_CC_SWITCH_ERR);
		st->app_cc[0] = 0;
		bpf_map_delete_elem(&lanes_app_cc, &cookie);
	}
	if (st->lowat_set) {
		st->lowat_set = 0;
		if (bpf_setsockopt(sk, SOL_TCP, TCP_NOTSENT_LOWAT, &zero, sizeof(zero)))
			bump(OPS_SETSOCKOPT_ERR);
	}
	st->cc_checked = 0;
	bump(OPS_BG_LEFT);
}

SEC("iter/tcp")
int lanes_live_cc(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc;
	struct sk_state *st;
	struct sock *sk;
	__u64 cookie;
	__u32 *v, lane;

	/* a kernel without the TCP iterator never runs this (it does not
	 * load there); the check keeps the relocation guarded */
	if (!bpf_core_field_exists(ctx->sk_common))
		return 0;
	skc = ctx->sk_common;
	if (!skc)
		return 0;
	sk = (struct sock *)bpf_skc_to_tcp_sock(skc);
	if (!sk)
		return 0;
	cookie = bpf_get_socket_cookie(sk);
	v = bpf_map_lookup_elem(&lanes_live_pending, &cookie);
	if (!v)
		return 0;
	lane = *v;
	bpf_map_delete_elem(&lanes_live_pending, &cookie);
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0,
				lane == LANE_BACKGROUND ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!st)
		return 0;
	if (lane == LANE_BACKGROUND)
		live_enter_bg(sk, st, cookie);
	else
		live_leave_bg(sk, st, cookie);
	return 0;
}
