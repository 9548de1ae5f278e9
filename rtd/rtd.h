/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * rtd.h - lanes-rtd's state: one thread, one epoll loop. Everything is
 * touched by that thread only, so nothing is locked.
 *
 *   conn.c   clients' requests (SEND, ATTACH, STATS), replies, notices
 *   lane.c   admission (the shares, then the EDF test), paced EDF
 *            release, sends, counters, trace events
 *   queue.c  the EDF queue in O(log n) (the decisions of edf_core.h and
 *            internal/edf's Reference)
 *   pool.c   the payload pool and the users' table (shares)
 *   route.c  the destinations' classes
 *   pace.c   requests paced per connection and uid
 *   loop.c   the epoll loop, the control socket, the release timer
 *   main.c   the process's setup
 */
#ifndef LANES_RTD_H
#define LANES_RTD_H

#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "ctl.h"

/* The queue's capacity; max_queue above it refuses with queue-full here. */
#ifndef EDF_CAP /* smaller in the fuzz target, so that its limits are reached */
#define EDF_CAP 16384
#endif
#include "edf_core.h" /* the decisions (enum edf_reason), entries, edf_late */

/* The EDF queue (queue.c): sorted blocks of at most EDFB entries, in
 * deadline order, under a segment tree over the blocks' positions. A
 * block's min is min(D_k - C_k) with C_k summed within it. */
#ifndef EDFB /* smaller in a test, so that blocks split and go often */
#define EDFB 128
#endif
#define EDFB_MAX (EDF_CAP / (EDFB / 2) + 2) /* every block but the first holds EDFB/2 or more */
#define EDFB_SEG (EDFB_MAX <= 4 ? 4 : EDFB_MAX <= 16 ? 16 : EDFB_MAX <= 64 ? 64 : EDFB_MAX <= 256 ? 256 : \
		  EDFB_MAX <= 1024 ? 1024 : 4096)
_Static_assert(EDFB_MAX <= EDFB_SEG, "EDF_CAP too large for the segment tree");
struct edfq_block {
	uint32_t n;
	int64_t sum, min;
	int64_t d[EDFB], tx[EDFB];
	uint32_t id[EDFB];
};
struct edfq_seg {
	int64_t sum, min;
};
struct edfq {
	uint32_t n, nb;
	int64_t backlog; /* sum of T */
	uint32_t ord[EDFB_MAX]; /* the blocks in deadline order */
	uint32_t free[EDFB_MAX], nfree;
	struct edfq_seg seg[2 * EDFB_SEG]; /* leaf EDFB_SEG + i: the block at ord[i] */
	struct edfq_block b[EDFB_MAX];
};

/* The client protocol (docs/realtime.md): its one definition is the C
 * client's header, include/lanes_rt.h; these are short names for it. */
#include "lanes_rt.h"
#define WIRE_VERSION LANES_RT_VERSION
#define WIRE_REQ LANES_RT_REQ_SIZE
#define WIRE_REPLY LANES_RT_REPLY_SIZE
#define WIRE_MAX_PAYLOAD LANES_RT_MAX_PAYLOAD
#define WIRE_MAX_SOCKS LANES_RT_MAX_SOCKS
#define WIRE_SEND LANES_RT_SEND
#define WIRE_STATS LANES_RT_STATS
#define WIRE_ATTACH LANES_RT_ATTACH
#define WIRE_ADMIT LANES_RT_ADMIT
#define WIRE_REJECT LANES_RT_REJECT
#define WIRE_DROPPED LANES_RT_DROPPED
#define WIRE_ERROR LANES_RT_ERROR
#define WIRE_ATTACHED LANES_RT_ATTACHED
#define WIRE_FLAG_RELATIVE LANES_RT_FLAG_RELATIVE
#define R_NONE LANES_RT_REASON_NONE
#define R_DISPLACES LANES_RT_REASON_DISPLACES
#define R_OWN_DEADLINE LANES_RT_REASON_OWN_DEADLINE
#define R_MALFORMED LANES_RT_REASON_MALFORMED
#define R_QUEUE_FULL LANES_RT_REASON_QUEUE_FULL
#define R_BAD_DEST LANES_RT_REASON_BAD_DEST
#define R_TOO_BIG LANES_RT_REASON_TOO_BIG
#define R_LATE LANES_RT_REASON_LATE
#define R_SEND_ERROR LANES_RT_REASON_SEND_ERROR
#define R_SHUTDOWN LANES_RT_REASON_SHUTDOWN
#define R_DISABLED LANES_RT_REASON_DISABLED
#define R_BAD_SOCKET LANES_RT_REASON_BAD_SOCKET
#define R_TOO_MANY LANES_RT_REASON_TOO_MANY_SOCKETS
#define R_UNSUPPORTED LANES_RT_REASON_UNSUPPORTED
#define R_BAD_DEADLINE LANES_RT_REASON_BAD_DEADLINE
#define R_OVER_SHARE LANES_RT_REASON_OVER_SHARE
#define DEADLINE_HORIZON_NS LANES_RT_HORIZON_NS

/* Shares (docs/realtime.md, "Shares and pacing"): of the queue's slots,
 * its payload bytes, the destination table and the link's time, a
 * connection not root's holds at most 1/SHARE_CONN, a uid not root at most
 * 1/SHARE_UID, and all uids but root together leave 1/ROOT_RESERVE to
 * root. The link's time is shared over each request's deadline horizon: a
 * holder's datagrams, each counted as its transmit time times the
 * holder's divisor, must follow one another and the last end by its
 * deadline (lane.c, over_time). */
#define SHARE_CONN 8
#define SHARE_UID 4
#define ROOT_RESERVE 8

/* The payload pool: POOL_CHUNK-byte chunks, allocated once from the
 * policy's max_queue_bytes; a datagram's chunks are chained by index. */
#define POOL_CHUNK 256
#define POOL_END 0xffffffffu
#define POOL_DEFAULT (8u << 20)
#define POOL_IOV ((WIRE_MAX_PAYLOAD + POOL_CHUNK - 1) / POOL_CHUNK) /* chunks of the largest datagram */
struct pool {
	unsigned char *mem;
	uint32_t *next; /* a chunk's successor, or the free list's */
	uint32_t free;  /* first free chunk */
	uint32_t nfree, nchunks;
};

/* A uid's holdings, for its shares and pacing; kept while it has a
 * connection, a queued datagram, a counters entry or a destination. */
#ifndef USERS_MAX
#define USERS_MAX 8448 /* max_conns (4096) + counters entries (4097) + room */
#endif
struct user {
	uint32_t uid;
	uint32_t conns;
	uint32_t slots, chunks; /* queued */
	uint32_t flows;         /* counters entries */
	uint32_t dests;         /* destination table entries */
	int64_t tokens_at;      /* pacing: the time its bucket is empty at (pace.c) */
	int64_t link_at;        /* its share of the link's time is used until (lane.c) */
	struct user *next;      /* hash chain, or the free list */
};

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
	struct user *u;
	int fd;     /* -1 once ended */
	int paused; /* a STATS request is with the daemon */
	int throttled; /* out of tokens: not read until wake (pace.c) */
	int64_t tokens_at, wake;
	int64_t link_at; /* its share of the link's time is used until (lane.c) */
	unsigned char *out; /* a reply the socket could not take yet (EPOLLOUT) */
	size_t outlen;
	unsigned char outbuf[WIRE_REPLY]; /* out, for the lane's own replies */
	int refs;   /* 1 while open, + 1 per queued datagram */
	uint32_t slots, chunks, dests; /* held, for the shares */
	struct appsock *socks[WIRE_MAX_SOCKS];
	struct conn *next;
	struct conn *tnext; /* the throttled list */
};

/* One admitted datagram waiting in the queue (slot = its edf id). */
struct pending {
	struct conn *c;
	struct appsock *s; /* NULL: the lane's own socket */
	struct flowstat *f;
	struct dest dst;
	uint32_t flow, seq;
	uint32_t len;
	uint32_t chunk, nchunks; /* its payload in the pool */
};

struct flowstat {
	struct rtd_flow v;
	struct flowstat *next; /* hash chain */
};

/* The destinations' classes: a hash table over a fixed array, least
 * recently used first to go (route.c). */
#ifndef ROUTES_MAX
#define ROUTES_MAX 4096
#endif
#ifndef ROUTE_BUCKETS
#define ROUTE_BUCKETS 8192
#endif
#define ROUTE_IDLE_NS 30000000000ll /* unused this long: forgotten */
#define ROUTE_ASK_NS 1000000000ll   /* no answer this long: asked again */
struct route {
	struct rtd_route r;
	int64_t asked;         /* when looked up, no answer yet (0: answered) */
	int64_t used;          /* last looked at */
	struct conn *owner;    /* counted against it (and its uid) while it lives */
	struct route *hnext;   /* hash chain, or the free list */
	struct route *older, *newer; /* the LRU list */
};

#ifndef FLOWS_MAX
#define FLOWS_MAX 4096
#endif
#ifndef FLOW_BUCKETS
#define FLOW_BUCKETS 4096
#endif

struct rtd {
	struct rtd_config cfg;
	int ep, ctl, timer, trace;
	int tx[2][2]; /* [IPv4|IPv6][plain|class] */
	int ready;
	/* the queue */
	struct edfq q;
	struct pending pend[EDF_CAP];
	uint32_t free_slots[EDF_CAP], nfree;
	struct pool pool;
	uint32_t others_slots, others_chunks; /* held by uids but root */
	int64_t others_link_at;               /* their share of the link's time, used until */
	int64_t busy_until;
	int64_t timer_at; /* armed release time, 0: none */
	/* clients */
	struct conn *conns;
	struct conn *dead; /* freed after the epoll batch that may still name them */
	struct conn *throttled;
	uint32_t nconns;
	int64_t app_socks;
	uint64_t lost_notices, lost_events, send_full;
	struct rtd_event events[64]; /* trace events not yet written (lane_trace_flush) */
	size_t nevents;
	struct user users[USERS_MAX], *ubucket[4096], *ufree;
	/* counters: per (uid, flow), bounded like the Go lane's */
	struct flowstat *flows[FLOW_BUCKETS];
	struct flowstat flowpool[FLOWS_MAX + 1];
	uint32_t nflows;
	struct rtd_flow totals;
	/* destinations' classes, from the daemon */
	struct route routes[ROUTES_MAX], *rbucket[ROUTE_BUCKETS], *rfree;
	struct route *newest, *oldest;
	uint32_t nroutes;
	uint64_t rseed;
	int guess;
};

/* Allocations are counted (RTD_COUNTERS allocs): none may happen on the
 * path of a request after start, and a test checks it. */
extern uint64_t rtd_allocs;
static inline void *rtd_malloc(size_t n)
{
	rtd_allocs++;
	return (malloc)(n);
}
static inline void *rtd_calloc(size_t n, size_t m)
{
	rtd_allocs++;
	return (calloc)(n, m);
}
#define malloc(n) rtd_malloc(n)
#define calloc(n, m) rtd_calloc(n, m)

/* share is n/k, at least 1. */
static inline uint32_t share(uint32_t n, uint32_t k) { return n / k ? n / k : 1; }

int64_t mono_now(void);
void die(const char *what);

/* lane.c */
void lane_init(struct rtd *d);
void lane_config(struct rtd *d, const struct rtd_config *cfg);
int64_t bytes_ns(const struct rtd *d, int64_t n);
void lane_admit(struct rtd *d, struct conn *c, const unsigned char *req, size_t len, struct reply *rep);
void lane_release(struct rtd *d);
void lane_flush(struct rtd *d);
int lane_drop(struct rtd *d, uint8_t reason);
void lane_count(struct rtd *d, uint32_t uid, uint32_t flow, int admitted, uint8_t reason);
void lane_event(struct rtd *d, uint8_t kind, uint8_t reason, uint32_t uid, uint32_t flow, uint32_t seq,
		int64_t t, int64_t deadline, int64_t tx);
void lane_counters(struct rtd *d, uint32_t id);
void lane_trace_flush(struct rtd *d);
struct flowstat *lane_flow(struct rtd *d, uint32_t uid, uint32_t flow);

/* queue.c: the EDF queue */
void edfq_init(struct edfq *q);
int edfq_admit(struct edfq *q, int64_t now, int64_t d, int64_t tx, uint32_t id);
int edfq_peek(const struct edfq *q, struct edf_ent *out);
int edfq_pop(struct edfq *q, int64_t now, struct edf_ent *out);
int64_t edfq_slack(const struct edfq *q, int64_t tnow);

/* pool.c: the payload pool and the users' table */
int pool_init(struct pool *p, uint32_t bytes);
void pool_free(struct pool *p);
uint32_t pool_chunks(uint32_t len);
uint32_t pool_put(struct pool *p, const unsigned char *b, uint32_t len);
void pool_release(struct pool *p, uint32_t chunk);
int pool_iov(const struct pool *p, uint32_t chunk, uint32_t len, struct iovec *iov, int max);
void users_init(struct rtd *d);
struct user *user_get(struct rtd *d, uint32_t uid);
void user_check(struct rtd *d, struct user *u);

/* route.c: the destinations' classes */
void routes_init(struct rtd *d, uint64_t seed);
int route_class(struct rtd *d, struct conn *c, const struct dest *dst, int64_t now);
void route_answer(struct rtd *d, const struct rtd_route *r);
void routes_disown(struct rtd *d, struct conn *c);
void routes_prune(struct rtd *d, int64_t now);

/* pace.c: requests paced per connection and per uid */
int pace_ready(struct rtd *d, struct conn *c, int64_t now);
int pace_charge(struct rtd *d, struct conn *c, int64_t now);
int64_t pace_wake(struct rtd *d, int64_t now);

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
void conn_wake(struct rtd *d, int64_t now);
int take_fds(struct msghdr *msg, int *fds, int max);

/* loop.c */
void ctl_send(struct rtd *d, const void *msg, size_t len);
void timer_arm(struct rtd *d, int64_t at);
void loop_watch(struct rtd *d);
int loop_once(struct rtd *d, int timeout_ms);

#endif /* LANES_RTD_H */
