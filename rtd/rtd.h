/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * rtd.h - lanes-rtd's state: one thread, one epoll loop. Everything is
 * touched by that thread only, so nothing is locked.
 *
 *   conn.c   clients' requests (SEND, ATTACH, STATS), replies, notices
 *   lane.c   admission (edf_core.h, the arithmetic of internal/edf),
 *            paced EDF release, sends, counters, trace events
 *   main.c   the control socket, the epoll loop, the release timer
 */
#ifndef LANES_RTD_H
#define LANES_RTD_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ctl.h"

/* The queue's capacity; max_queue above it refuses with queue-full here. */
#define EDF_CAP 16384
#include "edf_core.h"

/* The client protocol (docs/realtime.md; include/lanes_rt.h). */
#define WIRE_VERSION 1
#define WIRE_REQ 40
#define WIRE_REPLY 32
#define WIRE_MAX_PAYLOAD 65507
#define WIRE_MAX_SOCKS 8
enum {
	WIRE_SEND = 0x01, WIRE_STATS = 0x02, WIRE_ATTACH = 0x03,
	WIRE_ADMIT = 0x81, WIRE_REJECT = 0x82, WIRE_DROPPED = 0x83, WIRE_ERROR = 0x84,
	WIRE_ATTACHED = 0x86,
};
#define WIRE_FLAG_RELATIVE 0x01
enum {
	R_NONE = 0, R_DISPLACES = 1, R_OWN_DEADLINE = 2, R_MALFORMED = 4, R_QUEUE_FULL = 5,
	R_BAD_DEST = 6, R_TOO_BIG = 7, R_LATE = 8, R_SEND_ERROR = 9, R_SHUTDOWN = 10,
	R_DISABLED = 11, R_BAD_SOCKET = 13, R_TOO_MANY = 14, R_UNSUPPORTED = 15, R_BAD_DEADLINE = 16,
	R_OVER_SHARE = 17,
};
#define DEADLINE_HORIZON_NS 60000000000ll

/* A destination: family 4 or 6 (0: none, the attached socket's peer). */
struct dest {
	uint8_t family;
	uint8_t addr[16];
	uint16_t port;
};

struct reply {
	uint8_t type, reason, sock;
	uint32_t flow, seq, depth;
	int64_t slack;
	uint64_t time;
};

/* An attached socket of a client (appsock): kept until its connection
 * has ended and none of its datagrams is queued. */
struct appsock {
	int fd;
	int family; /* AF_INET or AF_INET6 */
	struct dest peer;
	int refs;
};

struct conn {
	uint32_t id, uid;
	int fd;     /* -1 once ended */
	int paused; /* a STATS request is with the daemon */
	unsigned char *out; /* a reply the socket could not take yet (EPOLLOUT) */
	size_t outlen;
	int refs;   /* 1 while open, + 1 per queued datagram */
	struct appsock *socks[WIRE_MAX_SOCKS];
	struct conn *next;
};

/* One admitted datagram waiting in the queue (slot = its edf id). */
struct pending {
	struct conn *c;
	struct appsock *s; /* NULL: the lane's own socket */
	struct flowstat *f;
	struct dest dst;
	uint32_t flow, seq;
	uint32_t len;
	unsigned char *payload;
};

struct flowstat {
	struct rtd_flow v;
	struct flowstat *next; /* hash chain */
};

struct rtd {
	struct rtd_config cfg;
	int ep, ctl, timer, trace;
	int tx[2][2]; /* [IPv4|IPv6][plain|class] */
	int ready;
	/* the queue */
	struct edf_queue q;
	struct pending pend[EDF_CAP];
	uint32_t free_slots[EDF_CAP], nfree;
	int64_t busy_until;
	int64_t timer_at; /* armed release time, 0: none */
	/* clients */
	struct conn *conns;
	struct conn *dead; /* freed after the epoll batch that may still name them */
	uint32_t nconns;
	int64_t app_socks;
	uint64_t lost_notices, lost_events;
	struct rtd_event events[64]; /* trace events not yet written (lane_trace_flush) */
	size_t nevents;
	/* counters: per (uid, flow), bounded like the Go lane's */
	struct flowstat *flows[4096];
	uint32_t nflows;
	struct rtd_flow totals;
	/* destinations' classes, from the daemon */
	struct route *routes;
	uint32_t nroutes;
	int guess;
};

struct route {
	struct rtd_route r;
	int asked; /* looked up, no answer yet */
	struct route *next;
};

int64_t mono_now(void);
void die(const char *what);

/* lane.c */
void lane_init(struct rtd *d);
int64_t bytes_ns(const struct rtd *d, int64_t n);
void lane_admit(struct rtd *d, struct conn *c, const unsigned char *req, size_t len, struct reply *rep);
void lane_release(struct rtd *d);
void lane_flush(struct rtd *d);
void lane_count(struct rtd *d, uint32_t uid, uint32_t flow, int admitted, uint8_t reason);
void lane_route(struct rtd *d, const struct rtd_route *r);
void lane_event(struct rtd *d, uint8_t kind, uint8_t reason, uint32_t uid, uint32_t flow, uint32_t seq,
		int64_t t, int64_t deadline, int64_t tx);
void lane_counters(struct rtd *d, uint32_t id);
void lane_trace_flush(struct rtd *d);
struct flowstat *lane_flow(struct rtd *d, uint32_t uid, uint32_t flow);

/* conn.c */
void conn_add(struct rtd *d, int fd, uint32_t id, uint32_t uid);
void conn_readable(struct rtd *d, struct conn *c);
void conn_reply(struct rtd *d, struct conn *c, const struct reply *r);
void conn_writable(struct rtd *d, struct conn *c);
void conn_event(struct rtd *d, struct conn *c, uint32_t events);
void conn_notify(struct rtd *d, struct conn *c, const struct reply *r);
void conn_put(struct rtd *d, struct conn *c);
void appsock_put(struct rtd *d, struct appsock *s);
struct conn *conn_find(struct rtd *d, uint32_t id);
void conn_resume(struct rtd *d, struct conn *c, const unsigned char *rep, size_t len);
void conn_end(struct rtd *d, struct conn *c);
void conn_reap(struct rtd *d);
int take_fds(struct msghdr *msg, int *fds, int max);

/* main.c */
void ctl_send(struct rtd *d, const void *msg, size_t len);
void timer_arm(struct rtd *d, int64_t at);

#endif /* LANES_RTD_H */
