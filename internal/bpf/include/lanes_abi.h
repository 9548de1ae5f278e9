/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lanes_abi.h - the numbers and structs that cross between the lanes BPF
 * programs and the Go daemon: lane numbers, the classifier's match kinds,
 * the sock_ops counters, and the key and value structs of the shared maps.
 *
 * This file is the only definition. The Go side gets its constants and
 * structs from it through bpf2go -type (internal/bpf/abi, `go generate`),
 * and internal/bpf/abi's test checks that every hand-written Go name table
 * (lane.Lane, classifier kinds, sock_ops counter names) agrees with it.
 *
 * To extend: add a value before the *_COUNT/_KINDS terminator of its enum,
 * add its name to the Go table the test names, run `make generate`.
 * Values are indexes into per-CPU counter arrays, so never renumber.
 */
#ifndef LANES_ABI_H
#define LANES_ABI_H

#include <linux/types.h>

/* Lane numbers, lane.Lane in Go. A map value outside 1..3 counts as a miss. */
enum lane {
	LANE_UNSET = 0,
	LANE_REALTIME = 1,
	LANE_INTERACTIVE = 2,
	LANE_BACKGROUND = 3,
	LANE_MAX = 3,
	LANE_SLOTS = 4, /* array size indexed by lane */
};

/* The cwnd clamp (and ssthresh) of a removed cap: what sock_ops sets when
 * a cap goes, and what capcc and sock_ops read as "no cap" (the kernel's
 * TCP_INFINITE_SSTHRESH; ledbat.SsthreshInfinite in Go). */
#define CAP_NONE 0x7fffffff

/* HTB class minor of lane l is LANE_CLASS_MINOR + l (lane.ClassMinor);
 * the pure ACKs of capped downloads have the ACK class (lane.AckClassMinor);
 * the background lane's non-TCP egress, where its controller shapes it, the
 * shaper class (lane.BgShapeClassMinor); the pure ACKs of a background
 * download the yield holds, the held-ACK class (lane.HeldAckClassMinor). */
enum lane_class {
	LANE_CLASS_MINOR = 0x10,
	LANE_ACK_CLASS_MINOR = 0x14,
	LANE_BG_SHAPE_CLASS_MINOR = 0x15,
	LANE_HELD_ACK_CLASS_MINOR = 0x16,
};

/* How the classifier found a packet's lane: index into the stats matrix
 * (kind * LANE_SLOTS + lane). */
enum match_kind {
	MATCH_COOKIE = 0,  /* socket cookie stored by sock_ops (or the daemon) */
	MATCH_TUPLE = 1,   /* registered 5-tuple (lanes_tuple, flow_key) */
	MATCH_CGROUP = 2,  /* cgroup v2 id of the sending socket */
	MATCH_UID = 3,     /* uid owning the sending socket */
	MATCH_DSCP = 4,    /* DSCP of the IP header */
	MATCH_DEFAULT = 5, /* nothing matched: interactive */
	MATCH_DST = 6,     /* destination prefix [+ port] (lanes_dst) */
	MATCH_KINDS = 7,
};

/* sock_ops event counters: index into lanes_ops_stats. */
enum ops_counter {
	OPS_CONNECT = 0,        /* active opens seen */
	OPS_ACCEPT = 1,         /* passive opens seen */
	OPS_BY_COOKIE = 2,      /* lane already known by cookie */
	OPS_BY_TUPLE = 3,
	OPS_BY_CGROUP = 4,
	OPS_BY_UID = 5,
	OPS_UNRESOLVED = 6,     /* default lane, nothing stored */
	OPS_NOTSENT_LOWAT = 7,  /* TCP_NOTSENT_LOWAT set */
	OPS_CAP_SET = 8,        /* cwnd clamp changed */
	OPS_SETSOCKOPT_ERR = 9,
	OPS_CLOSED = 10,
	OPS_CC_SWITCH = 11,     /* capped cubic socket switched to CFG.cc_name */
	OPS_CC_SWITCH_ERR = 12, /* getsockopt/setsockopt(TCP_CONGESTION) failed */
	OPS_CC_OTHER = 13,      /* capped socket on another CC (bbr, reno...): left alone */
	OPS_BG_CC = 14,         /* background socket switched to CFG.bg_cc_name (LEDBAT++) */
	OPS_BY_DST = 15,        /* lane from a destination prefix rule */
	OPS_RWND_SET = 16,      /* background receive window (rLEDBAT) changed */
	OPS_RWND_ERR = 17,      /* bpf_setsockopt(TCP_WINDOW_CLAMP) refused */
	OPS_RL_LOSS = 18,       /* rLEDBAT saw a loss (out-of-order segment) */
	OPS_YIELD = 19,         /* background socket held down for the foreground */
	OPS_COOP_RWND = 20,     /* downlink cap (coop receive window clamp) changed */
	OPS_BG_CC_KEPT = 21,    /* app's TCP_CONGESTION on a background socket skipped */
	OPS_BG_LEFT = 22,       /* socket moved out of background: its own settings back */
	OPS_BG_CLAMP = 23,      /* background cwnd clamp set to LEDBAT++'s window (no struct_ops) */
	OPS_COUNTERS = 24,
};

/*
 * The full 5-tuple, as the sender sees it: remote (destination) address and
 * port, local (source) address and port, protocol. IPv4 addresses are
 * stored v4-mapped (::ffff:a.b.c.d). Ports in host byte order.
 * Wildcards: proto 0 matches any protocol; an all-zero saddr (::) matches
 * any local address (a connected socket never has :: as its local address).
 * Lookup precedence (classifier and sock_ops, flow_lookup below): the
 * protocol and the local address, then the protocol with any local address,
 * then any protocol with the local address, then neither: a named protocol
 * is the more specific, as the paper's 3-tuple registrations always name
 * one and policy rules name neither.
 */
struct flow_key {
	__u8 daddr[16];
	__u8 saddr[16];
	__u16 dport;
	__u16 sport;
	__u8 proto;
	__u8 pad[3];
};

/*
 * lanes_dst key (LPM trie): destination port then address, so a prefix
 * covers the port too. prefixlen counts from the port: 16 + 96 + IPv4
 * prefix length (addresses v4-mapped) or 16 + IPv6 prefix length. A rule
 * without a port stores dport 0; lookups try the packet's port, then 0.
 * Port bytes in network order (the trie compares bytes left to right).
 */
struct dst_key {
	__u32 prefixlen;
	__u8 dport[2];
	__u8 daddr[16];
	__u8 pad[2];
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

#endif
