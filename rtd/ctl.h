/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * ctl.h - the control protocol between the lanes daemon and lanes-rtd, the
 * realtime lane's data path outside Go's runtime (docs/realtime.md, "The
 * data path process").
 *
 * The daemon starts lanes-rtd with these descriptors and nothing else:
 *   3  the control socket (one end of a SOCK_SEQPACKET socketpair)
 *   4  the lane's IPv4 UDP socket, priority TC_PRIO_INTERACTIVE
 *   5  the lane's IPv4 UDP socket, priority of the realtime class
 *   6  the same for IPv6 (closed where the host has no IPv6)
 *   7
 *   8  optional: a pipe the daemon reads trace events from (the lab)
 * One message per datagram, in the host's byte order (both ends run on the
 * same machine; internal/rtlane/rtdctl.go is the Go side, rtd_test.go checks
 * the layout against this header).
 *
 * The daemon accepts clients, checks their credentials and the connection
 * limits, answers ungranted ones itself, and hands each granted connection
 * to lanes-rtd (RTD_CONN with the descriptor). From then on lanes-rtd reads
 * its requests, admits, queues and sends, and writes its replies and
 * notices; what needs the daemon's knowledge goes through here:
 *   - the egress class of a destination (RTD_LOOKUP, answered by
 *     RTD_ROUTE; until then the default guess, family 0);
 *   - a STATS request (RTD_FORWARD): the daemon builds the JSON from
 *     RTD_COUNTERS and sends the whole reply back (RTD_REPLY); the
 *     connection is not read meanwhile, so replies stay in order;
 *   - a connection's end (RTD_CLOSED), for the daemon's limits.
 * lanes-rtd exits when the control socket closes, dropping what is queued
 * with a shutdown notice.
 */
#ifndef LANES_RTD_CTL_H
#define LANES_RTD_CTL_H

#include <stdint.h>

#define RTD_FD_CTL 3
#define RTD_FD_TX 4 /* 4 + 2*family + class: family 0 IPv4, 1 IPv6; class 1 the realtime class */
#define RTD_FD_TRACE 8

enum rtd_type {
	/* daemon -> lanes-rtd */
	RTD_CONFIG = 1,       /* struct rtd_config; first message, again on a rate change */
	RTD_CONN = 2,         /* struct rtd_conn + the connection in SCM_RIGHTS */
	RTD_ROUTE = 3,        /* struct rtd_route: a destination's class */
	RTD_COUNTERS_ASK = 4, /* struct rtd_hdr (conn: an id echoed in RTD_COUNTERS) */
	RTD_REPLY = 5,        /* struct rtd_hdr + one wire reply: written to conn, which is read again */
	RTD_TRACE_SYNC = 6,   /* struct rtd_hdr: write an RTD_EV_SYNC event with seq = conn */
	/* lanes-rtd -> daemon */
	RTD_READY = 0x81,    /* struct rtd_hdr: the first config is applied */
	RTD_LOOKUP = 0x82,   /* struct rtd_route (cls unused): please resolve */
	RTD_FORWARD = 0x83,  /* struct rtd_forward + the client's request */
	RTD_CLOSED = 0x84,   /* struct rtd_hdr: the connection has ended */
	RTD_COUNTERS = 0x85, /* struct rtd_counters + nflows struct rtd_flow */
	RTD_FORGET = 0x86,   /* struct rtd_route (cls unused): dropped from lanes-rtd's table */
};

/* Config flags. */
#define RTD_ENABLED 0x1   /* the lane is enabled (else every SEND: disabled) */
#define RTD_ATTACH_OK 0x2 /* the kernel takes a per-datagram SO_PRIORITY (6.14+) */

struct rtd_hdr {
	uint32_t type;
	uint32_t conn; /* the connection's id, or the id of an RTD_COUNTERS_ASK */
};

struct rtd_config {
	struct rtd_hdr h;
	uint64_t rate_bps;
	uint64_t netns_cookie; /* attached sockets must be of this namespace */
	uint32_t overhead;     /* bytes added to each payload on the wire */
	uint32_t backlog;      /* bytes of ours the kernel may hold */
	uint32_t reserve;      /* bytes not ours that cannot be preempted */
	uint32_t max_queue;
	uint32_t flags;
	uint32_t class_prio; /* SO_PRIORITY of the realtime class (0x10011) */
	uint32_t plain_prio; /* where the egress device has no lanes tree */
	uint32_t queue_bytes; /* the payload pool (max_queue_bytes), allocated once */
	uint32_t requests;    /* requests/s of a uid not root (a connection: half); 0 not paced */
	uint32_t pad;
};

struct rtd_conn {
	struct rtd_hdr h;
	uint32_t uid;
	uint32_t pad;
};

struct rtd_route {
	struct rtd_hdr h;
	uint8_t family; /* 4, 6, or 0: the guess for destinations not resolved yet */
	uint8_t cls;    /* 1: the egress device has the lanes tree (send in the realtime class) */
	uint8_t pad[6];
	uint8_t addr[16]; /* IPv4 in the first 4 bytes */
};

struct rtd_forward {
	struct rtd_hdr h;
	uint32_t uid;
	uint32_t len; /* bytes of the request that follow */
};

/* One flow's counters (or the totals: uid and flow ~0). rejects is by
 * wire reason (docs/realtime.md). */
#define RTD_REASONS 32
struct rtd_flow {
	uint32_t uid;
	uint32_t flow;
	uint64_t admitted;
	uint64_t rejected;
	uint64_t sent;
	uint64_t sent_bytes;
	uint64_t dropped_late;
	uint64_t send_errors;
	int64_t min_margin_ns;
	uint64_t rejects[RTD_REASONS];
};

/* RTD_COUNTERS: the lane's state, then flows in as many messages as it
 * takes (more != 0 on all but the last). */
#define RTD_FLOWS_PER_MSG 256
struct rtd_counters {
	struct rtd_hdr h;
	uint32_t nflows; /* in this message */
	uint32_t more;
	uint32_t depth;
	uint32_t conns;
	int64_t queued_ns;
	uint64_t rate_bps;
	int64_t app_socks;
	uint64_t lost_notices; /* DROPPED notices a full client socket did not take */
	uint64_t lost_events;  /* trace events a full pipe did not take */
	uint64_t allocs;       /* allocations since start (none on a request's path) */
	uint64_t pool_bytes;   /* the payload pool's size ... */
	uint64_t pool_free;    /* ... and what of it is free */
	uint64_t send_full;    /* sends that found a socket full (EAGAIN): dropped, send-error */
	struct rtd_flow totals;
};

/* Trace events (fd RTD_FD_TRACE): the lab's timestamps 2 and 3. */
enum rtd_event_kind { RTD_EV_SYNC = 0, RTD_EV_ADMIT, RTD_EV_REJECT, RTD_EV_RELEASE, RTD_EV_DROP };
struct rtd_event {
	uint8_t kind;
	uint8_t reason;
	uint16_t pad;
	uint32_t uid;
	uint32_t flow;
	uint32_t seq;
	int64_t time;
	int64_t deadline;
	int64_t tx;
};

#endif /* LANES_RTD_CTL_H */
