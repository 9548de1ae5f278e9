/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * state.h - what every part of the sock_ops program shares: the loader's
 * configuration (CFG), the cwnd cap maps, the per-socket state in socket
 * storage (struct sk_state), the app's congestion control names kept for
 * the monitor, and the counters (bump). Included by sockops.c first.
 */
#ifndef LANES_SOCKOPS_STATE_H
#define LANES_SOCKOPS_STATE_H

#define CC_NAME_LEN 16 /* TCP_CA_NAME_MAX */

volatile const struct sockops_config {
	__u64 netns_cookie;  /* only sockets of this network namespace */
	__u32 notsent_lowat; /* TCP_NOTSENT_LOWAT for background sockets, 0 = leave */
	__u32 netns_ino;     /* != 0: match the namespace by inode instead (no
			      * bpf_get_netns_cookie in sock_ops before 5.15) */
	char cc_name[CC_NAME_LEN]; /* lanes capcc congestion control, "" = none */
	char bg_cc_name[CC_NAME_LEN]; /* background lane's LEDBAT++, "" = none */
	__u32 rl_target_us; /* rLEDBAT queuing-delay target, 0 = off */
	__u32 yield; /* YIELD_*: the foreground-aware yield: foreground traffic or a new connection holds background */
	__u32 bg_clamp_target_us; /* LEDBAT++ as a cwnd clamp (bgclamp.h) where bg_cc_name is "", 0 = off */
	__u32 rl_share; /* rLEDBAT beside a present foreground: RL_SHARE_ON | LEDBAT_F_SHARE_*, 0: held */
	__u32 bg_clamp_share; /* bgclamp.h's LEDBAT++ beside a present foreground: LEDBAT_F_SHARE_* */
} CFG = {};

#define YIELD_ON 1          /* CFG.yield: the yield is on */
#define YIELD_UNTOLD_HELD 2 /* CFG.yield: an untold foreground holds background (a lab switch) */
#define YIELD_JOINED 4      /* CFG.yield: directions joined, the rule directions apart replaced
			     * (a lab switch): no timestamps read, any harm holds both */
#define YIELD_RATE_BY_ACKS 8 /* CFG.yield: the link's capacity by its sockets' ACKs' arrival alone
			     * (a lab switch: the rule timing their sending too replaced) */
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
	__u32 hold_paced;  /* the yield's hold paced at its share of the link (cwndcap.h) */
	char app_cc[CC_NAME_LEN]; /* congestion control the app asked for after
				   * the background one was applied ("" = none) */
	char orig_cc[CC_NAME_LEN]; /* what the socket ran before the background
				    * one (given back when it leaves background) */
	__u64 cookie;      /* the socket's cookie (set with bg_cc): the
			    * setsockopt program has no helper for it */
	__u64 own_until[2]; /* its own delay holds it until then, per direction
			     * (FG_DIR_*: yield.h's bg_own_delay) */
	__u64 rate_at;      /* the delivery-rate window's start (cwndcap.h) */
	__u64 rate_acked;   /* bytes_acked at that start */
	__u64 rate_sent;    /* when the newest segment acked then was sent (us) */
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

/* sock_state is the socket storage of ops's socket (created with
 * BPF_SK_STORAGE_GET_F_CREATE in flags), NULL without one. */
static __always_inline struct sk_state *sock_state(struct bpf_sock_ops *ops, __u64 flags)
{
	struct bpf_sock *sk = ops->sk;

	if (!sk)
		return 0;
	return bpf_sk_storage_get(&lanes_sk_state, sk, 0, flags);
}

#endif
