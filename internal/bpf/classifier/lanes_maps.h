/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_maps.h - the BPF maps shared by the lanes classifier (cls_bpf on the
 * egress HTB) and the lanes sock_ops program, and the structs their keys and
 * values use. Both objects declare the same maps; the Go loader creates them
 * once (with the classifier) and hands them to the sock_ops object through
 * MapReplacements, so both programs see the same state.
 *
 * Lane numbers are lane.Lane in Go: 0 unset, 1 realtime, 2 interactive,
 * 3 background. A map value outside 1..3 counts as a miss.
 */
#ifndef LANES_MAPS_H
#define LANES_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define LANE_UNSET 0
#define LANE_REALTIME 1
#define LANE_INTERACTIVE 2
#define LANE_BACKGROUND 3
#define LANE_MAX 3

/* How the classifier found a packet's lane: index into the stats matrix. */
enum match_kind {
	MATCH_COOKIE = 0,  /* socket cookie stored by sock_ops (or the daemon) */
	MATCH_TUPLE = 1,   /* registered 3-tuple (dst ip, dst port, src port) */
	MATCH_CGROUP = 2,  /* cgroup v2 id of the sending socket */
	MATCH_UID = 3,     /* uid owning the sending socket */
	MATCH_DSCP = 4,    /* DSCP of the IP header */
	MATCH_DEFAULT = 5, /* nothing matched: interactive */
	MATCH_KINDS = 6,
};

/*
 * The paper's 3-tuple, as the sender sees it: remote (destination) address,
 * remote port, local (source) port. IPv4 addresses are stored v4-mapped
 * (::ffff:a.b.c.d). Ports in host byte order. proto 0 means any protocol.
 */
struct flow_key {
	__u8 daddr[16];
	__u16 dport;
	__u16 sport;
	__u8 proto;
	__u8 pad[3];
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

/* socket cookie -> lane; filled by sock_ops at connect/accept. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u32);
} lanes_cookie SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct flow_key);
	__type(value, __u32);
} lanes_tuple SEC(".maps");

/* cgroup v2 id -> lane (the lane cgroups of this instance and policy rules) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} lanes_cgroup SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} lanes_uid SEC(".maps");

#endif
