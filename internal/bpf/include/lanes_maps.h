/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_maps.h - the BPF maps shared by the lanes classifier (cls_bpf on the
 * egress HTB) and the lanes sock_ops program, and the structs their keys and
 * values use. Both objects declare the same maps; the Go loader creates them
 * once (with the classifier) and hands them to the sock_ops object through
 * MapReplacements, so both programs see the same state.
 * Their numbers and structs are in lanes_abi.h.
 */
#ifndef LANES_MAPS_H
#define LANES_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include "lanes_form.h"
#include "lanes_abi.h"

/* socket cookie -> lane; filled by sock_ops at connect/accept. */
LANES_MAP(lanes_cookie,
	  BPF_MAP_TYPE_LRU_HASH,
	  65536,
	  __u64,
	  __u32
);

/* registered 5-tuple -> lane (API registrations and policy flow rules) */
LANES_MAP(lanes_tuple,
	  BPF_MAP_TYPE_HASH,
	  16384,
	  struct flow_key,
	  __u32
);

/*
 * lanes_tuple_shapes[0]: bit i is set while lanes_tuple may hold a key of
 * flow_lookup's shape i (0 proto+saddr, 1 proto, 2 saddr, 3 neither). The
 * daemon sets a bit before it adds the first key of that shape and clears
 * it after it removes the last, so a lookup skips the shapes no key has
 * (a packet that matches nothing pays one lookup per shape in use, not 4).
 */
LANES_MAP(lanes_tuple_shapes,
	  BPF_MAP_TYPE_ARRAY,
	  1,
	  __u32,
	  __u32
);

/* flow_lookup finds the lane of a full 5-tuple key in lanes_tuple, in the
 * precedence of lanes_abi.h: (proto, saddr), (proto, any local address),
 * (any proto, saddr), (any, any), skipping the shapes no key has. It
 * changes k's proto and saddr. */
static __always_inline __u32 *flow_lookup(struct flow_key *k)
{
	__u32 zero = 0, *shapes = bpf_map_lookup_elem(&lanes_tuple_shapes, &zero);
	__u32 mask = shapes ? *shapes : 0;
	__u8 saddr[16];
	__u8 proto = k->proto;
	__u32 *v;

	__builtin_memcpy(saddr, k->saddr, 16);
	for (int i = 0; i < 4; i++) {
		if (!(mask & (1u << i)))
			continue;
		k->proto = i < 2 ? proto : 0;
		if (i & 1)
			__builtin_memset(k->saddr, 0, 16);
		else
			__builtin_memcpy(k->saddr, saddr, 16);
		v = bpf_map_lookup_elem(&lanes_tuple, k);
		if (v && *v >= LANE_REALTIME && *v <= LANE_MAX)
			return v;
	}
	return 0;
}

/* destination prefix [+ port] -> lane; longest prefix wins */
LANES_MAP_FLAGS(lanes_dst,
	  BPF_MAP_TYPE_LPM_TRIE,
	  4096,
	  BPF_F_NO_PREALLOC,
	  struct dst_key,
	  __u32
);

/* dst_lookup finds the lane of a destination: its port first, then any port.
 * daddr is 16 bytes (IPv4 v4-mapped), dport in host order. */
static __always_inline __u32 *dst_lookup(const __u8 *daddr, __u16 dport)
{
	struct dst_key k = {.prefixlen = 16 + 128};
	__u32 *v;

	__builtin_memcpy(k.daddr, daddr, 16);
	k.dport[0] = dport >> 8;
	k.dport[1] = dport & 0xff;
	v = bpf_map_lookup_elem(&lanes_dst, &k);
	if (v && *v >= LANE_REALTIME && *v <= LANE_MAX)
		return v;
	if (!dport)
		return 0;
	k.dport[0] = 0;
	k.dport[1] = 0;
	v = bpf_map_lookup_elem(&lanes_dst, &k);
	if (v && *v >= LANE_REALTIME && *v <= LANE_MAX)
		return v;
	return 0;
}

/* cgroup v2 id -> lane (the lane cgroups of this instance and policy rules) */
LANES_MAP(lanes_cgroup,
	  BPF_MAP_TYPE_HASH,
	  4096,
	  __u64,
	  __u32
);

LANES_MAP(lanes_uid,
	  BPF_MAP_TYPE_HASH,
	  4096,
	  __u32,
	  __u32
);

/* receive window cap per socket cookie, bytes, 0 = none: the cooperative
 * controller's downlink caps (datapath SetSocketRwndCap). sock_ops applies
 * them (rwndcap.h, rledbat.h); the classifier sends the pure ACKs of a
 * capped socket to the ACK class while it is on (lanes_ack_on). */
LANES_MAP(lanes_sock_rwnd,
	  BPF_MAP_TYPE_HASH,
	  16384,
	  __u64,
	  __u32
);

#include "lanes_fg.h"

/* lanes_rl_floor[ifindex]: bpf_ktime_get_ns() since a background download
 * by that interface (rledbat.h) has had its window at the floor
 * (LEDBAT_MIN_CWND) with its queue above its target (0: not there). Two
 * packets a round trip are most of a slow link, and a receiver cannot pace
 * its sender: beside a foreground that receives (classifier.c's
 * fg_receives) its pure ACKs go to the held-ACK class as a held
 * download's do (held_ack), paced at 1/16 of the download estimate.
 * Written by sock_ops at each segment the download sends (the last
 * download to send speaks for the interface), read by the classifier as
 * that segment leaves. */
LANES_MAP(lanes_rl_floor,
	  BPF_MAP_TYPE_HASH,
	  1024,
	  __u32,
	  __u64
);

/* lanes_fg_open[ifindex]: bpf_ktime_get_ns() when the hold of the last
 * foreground (not background) TCP connection opened by that interface ends
 * (0: interface not known, holds background by every interface). sock_ops
 * writes it at connect (FG_OPEN_HOLD_NS ahead: until the handshake ends)
 * and at the handshake's end, active or passive (FG_OPEN_RTTS of the
 * handshake's RTT or its first flight's time at the upload capacity
 * ahead, the longer, at most FG_OPEN_HOLD_NS). A new foreground
 * connection makes background on its interface yield at once, before the
 * classifier's window has counted FG_MIN_PACKETS of it: a short transfer's
 * first round trips are the ones a standing queue costs most. Only for its
 * first round trips: a connection opened every 300 ms (a browser, a LAN
 * host connecting to the device) must not hold background for good. */
LANES_MAP(lanes_fg_open,
	  BPF_MAP_TYPE_HASH,
	  1024,
	  __u32,
	  __u64
);

#define FG_OPEN_HOLD_NS 500000000ULL
#define FG_OPEN_RTTS 2

/* fg_opening: a foreground connection's opening holds interface idx now. */
static __always_inline int fg_opening(__u32 idx, __u64 now)
{
	__u64 *t = bpf_map_lookup_elem(&lanes_fg_open, &idx);

	return t && *t && now < *t;
}

/* lanes_fg_harm[ifindex]: when a foreground TCP socket by that interface
 * last read harm, in either direction (at) and when each direction's hold
 * ends (dir_until: the
 * upload's, FG_DIR_UP, and the download's, FG_DIR_DOWN) (0: interface not
 * known; key 0 is also written with every interface). sock_ops writes it
 * at a foreground socket's sample (yield.h, fgrcv.h) when a direction's
 * queue (lanes_owd.h: from TCP timestamps; without them the RTT above its
 * minimum, both directions) stands more than FG_HARM_QD_US (a queue beyond
 * what a background flow beside the foreground keeps), or, the upload, when
 * it is cwnd-limited (it would send more than the path takes). */
struct fg_harm {
	__u64 at;      /* the last harmed sample, bpf_ktime_get_ns */
	__u64 since;   /* the current harm episode's first */
	__u64 samples; /* harmed samples */
	__u32 qd_us;   /* the last harmed sample's queuing delay */
	__u32 limited; /* FG_HARM_KIND_*: what the last harmed sample read */
	__u64 seen;    /* the last foreground TCP RTT sample, harmed or not */
	__u64 dir_until[2]; /* each direction's hold ends (FG_DIR_*): the last harmed
			     * sample's FG_HARM_HOLD_NS or 2 of its socket's RTTs later */
	/* each direction's queue (FG_DIR_*) as foreground sockets with TCP
	 * timestamps read it, harmed or not: the largest reading of the
	 * FG_DIRQ_SLOT_NS slot of the last one (at) and of the slot before
	 * (a socket that began behind a standing queue reads less of it);
	 * the QUIC/UDP class's probes' RTT less the other direction's (bgudp) */
	__u32 dir_qd_us[2];
	__u32 dir_qd_prev_us[2];
	__u64 dir_qd_at[2]; /* the last reading (0: never) */
};

#define FG_DIRQ_SLOT_NS 100000000ULL

#define FG_DIR_UP 0   /* a queue the device's packets wait in: holds uploads */
#define FG_DIR_DOWN 1 /* a queue toward the device: holds downloads */
#define FG_DIR_BOTH 2 /* fg_harm_mark: a sample that cannot tell (no timestamps) */

LANES_MAP(lanes_fg_harm,
	  BPF_MAP_TYPE_HASH,
	  1024,
	  __u32,
	  struct fg_harm
);

#define FG_HARM_QD_US 10000
#define FG_HARM_HOLD_NS 100000000ULL

/* fg_harm.limited: what the last harmed sample read */
#define FG_HARM_KIND_DELAY 0   /* a foreground socket's RTT FG_HARM_QD_US above its minimum */
#define FG_HARM_KIND_LIMITED 1 /* a foreground socket cwnd-limited */
#define FG_HARM_KIND_OWN 2     /* the QUIC/UDP class's own queuing delay, the foreground untold */

static __always_inline int fg_harmed(__u32 idx, __u64 now)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx);

	return h && h->at && now - h->at < FG_HARM_HOLD_NS;
}

/* fg_harmed_dir: direction dir (FG_DIR_UP, FG_DIR_DOWN) of interface idx
 * is harmed at now. */
static __always_inline int fg_harmed_dir(__u32 idx, __u32 dir, __u64 now)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx);
	__u64 until;

	if (!h)
		return 0;
	until = dir == FG_DIR_DOWN ? h->dir_until[FG_DIR_DOWN] : h->dir_until[FG_DIR_UP];
	return now < until;
}

/* fg_tcp_seen: a foreground TCP socket by interface idx gave an RTT sample
 * within FG_HOLD_NS, so its harm can be told. */
static __always_inline int fg_tcp_seen(__u32 idx, __u64 now)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx);

	return h && h->seen && now - h->seen < FG_HOLD_NS;
}

/* fg_untold: a foreground is present on interface idx (fg_held) and no
 * foreground TCP socket's RTT sample tells its harm (a call, a probe:
 * UDP). Beside it background keeps FG_SHARE_TARGET by its own queuing
 * delay, which is the shared bottleneck's: a background socket whose own
 * delay stands FG_HARM_QD_US above its base holds itself (sock_ops,
 * yield.h's bg_own_delay), the QUIC/UDP class itself (bgudp). */
static __always_inline int fg_untold(__u32 idx, __u64 now)
{
	return fg_held(idx, now) && !fg_tcp_seen(idx, now);
}

/* fg_yield says whether background by interface idx (0: not known) is held
 * at the minimum at now: a foreground socket there reads harm (or one
 * somewhere, idx not known; or the QUIC/UDP class's own delay beside an
 * untold foreground), or a foreground connection's opening there (or
 * somewhere not known) holds it (fg_opening). A present foreground that
 * is not harmed does not hold it: the background keeps FG_SHARE_TARGET of
 * queue beside it. untold_holds (a lab switch, the rule this one
 * replaces) also holds it beside any untold foreground (fg_untold). */
static __always_inline int fg_yield(__u32 idx, __u64 now, int untold_holds)
{
	return fg_harmed(idx, now) || fg_opening(idx, now) || (idx && fg_opening(0, now)) ||
	       (untold_holds && fg_untold(idx, now));
}

/* fg_yield_dir is fg_yield for a background TCP socket whose data goes in
 * direction dir (FG_DIR_UP: an upload; FG_DIR_DOWN: a download): only
 * that direction's harm holds it (an upload is not held for the
 * download's queue, nor the reverse); any_dir (a lab switch, the rule this
 * one replaces) holds it for either direction's. */
static __always_inline int fg_yield_dir(__u32 idx, __u32 dir, __u64 now, int untold_holds, int any_dir)
{
	if (any_dir)
		return fg_yield(idx, now, untold_holds);
	return fg_harmed_dir(idx, dir, now) || fg_opening(idx, now) || (idx && fg_opening(0, now)) ||
	       (untold_holds && fg_untold(idx, now));
}

#endif
