/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * lane.c - admission, paced EDF release and sends: the rules of
 * internal/rtlane (docs/realtime.md, "Semantics") on one thread.
 *
 *   T      = (payload + overhead) * 8 / rate, rounded up
 *   T_now  = max(now, busy_until) + reserve / rate
 *   admit  the shares (over_share, over_time), then edfq_admit
 *          (queue.c: the paper's test in O(log n), checked against
 *          internal/edf's Reference)
 *   release the head while our bytes in the kernel, it included, stay
 *          within backlog (or nothing of ours is in flight); a head that
 *          can no longer finish by its deadline is dropped and reported
 *
 * The admitting pass releases at once what pacing allows (the Go lane's
 * direct release, without a second thread to hand over to); what must
 * wait arms the release timer (main.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rtd.h"

static uint32_t get32(const unsigned char *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

static uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

void lane_init(struct rtd *d)
{
	uint64_t seed = 0;
	uint32_t i;

	edfq_init(&d->q);
	d->nfree = 0;
	for (i = EDF_CAP; i > 0; i--)
		d->free_slots[d->nfree++] = i - 1;
	d->totals.uid = d->totals.flow = ~0u;
	d->totals.min_margin_ns = INT64_MAX;
	users_init(d);
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint64_t)mono_now();
	routes_init(d, seed);
}

/* lane_config applies a configuration. The pool is allocated at the first
 * (lanes-rtd is locked in memory: mlockall), and again at a change of its
 * size only while nothing is queued (else the old size stays until the
 * next configuration). */
void lane_config(struct rtd *d, const struct rtd_config *cfg)
{
	uint32_t bytes = cfg->queue_bytes ? cfg->queue_bytes : POOL_DEFAULT;

	d->cfg = *cfg;
	d->cfg.queue_bytes = bytes;
	if (d->pool.mem && (d->pool.nchunks == bytes / POOL_CHUNK || d->q.n))
		return;
	pool_free(&d->pool);
	if (pool_init(&d->pool, bytes) < 0)
		die("payload pool");
}

/* slots is the queue's capacity: max_queue, at most EDF_CAP. */
static uint32_t slots(const struct rtd *d) { return d->cfg.max_queue < EDF_CAP ? d->cfg.max_queue : EDF_CAP; }

int64_t bytes_ns(const struct rtd *d, int64_t n)
{
	uint64_t r = d->cfg.rate_bps ? d->cfg.rate_bps : 1000000000ull;

	return (int64_t)(((unsigned __int128)n * 8 * 1000000000ull + r - 1) / r);
}

/* lane_flow returns the counters of (uid, flow), bounded as the Go lane's:
 * beyond 64 flows of a uid they share its flow ~0, beyond FLOWS_MAX in all
 * every new one shares (~0, ~0). Entries come from a fixed array: O(1). */
struct flowstat *lane_flow(struct rtd *d, uint32_t uid, uint32_t flow)
{
	struct flowstat *f;
	struct user *u;

	for (;;) {
		uint32_t b = (uid * 2654435761u ^ flow * 40503u) % FLOW_BUCKETS;

		for (f = d->flows[b]; f; f = f->next)
			if (f->v.uid == uid && f->v.flow == flow)
				return f;
		if (d->nflows >= FLOWS_MAX && !(uid == ~0u && flow == ~0u)) {
			uid = flow = ~0u;
			continue;
		}
		u = uid == ~0u ? NULL : user_get(d, uid);
		if (uid != ~0u && (!u || (flow != ~0u && u->flows >= 64))) {
			if (!u)
				uid = ~0u;
			flow = ~0u;
			continue;
		}
		f = &d->flowpool[d->nflows++];
		memset(f, 0, sizeof(*f));
		f->v.uid = uid;
		f->v.flow = flow;
		f->v.min_margin_ns = INT64_MAX;
		f->next = d->flows[b];
		d->flows[b] = f;
		if (u)
			u->flows++;
		return f;
	}
}

void lane_count(struct rtd *d, uint32_t uid, uint32_t flow, int admitted, uint8_t reason)
{
	struct flowstat *f = lane_flow(d, uid, flow);

	if (admitted) {
		f->v.admitted++;
		d->totals.admitted++;
		return;
	}
	f->v.rejected++;
	d->totals.rejected++;
	if (reason < RTD_REASONS)
		f->v.rejects[reason]++;
}

/* lane_event records a trace event; they reach the pipe in lane_trace_flush,
 * once the loop's work is done, so that the write is not on the path of
 * the datagram it describes. */
void lane_event(struct rtd *d, uint8_t kind, uint8_t reason, uint32_t uid, uint32_t flow, uint32_t seq,
		int64_t t, int64_t deadline, int64_t tx)
{
	struct rtd_event e = {.kind = kind, .reason = reason, .uid = uid, .flow = flow, .seq = seq,
			      .time = t, .deadline = deadline, .tx = tx};

	if (d->trace < 0)
		return;
	if (d->nevents == sizeof(d->events) / sizeof(d->events[0]))
		lane_trace_flush(d);
	d->events[d->nevents++] = e;
}

void lane_trace_flush(struct rtd *d)
{
	size_t len = d->nevents * sizeof(d->events[0]);
	ssize_t n;

	if (!d->nevents)
		return;
	n = write(d->trace, d->events, len);
	if (n < (ssize_t)len)
		d->lost_events += (len - (n > 0 ? (size_t)n : 0)) / sizeof(d->events[0]);
	d->nevents = 0;
}

/* parse_dest reads a request's destination; -1 for an unknown family. */
static int parse_dest(const unsigned char *h, struct dest *dst)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	memset(dst, 0, sizeof(*dst));
	dst->port = (uint16_t)(h[12] << 8 | h[13]);
	switch (h[3]) {
	case 0:
		return 0;
	case 4:
		dst->family = 4;
		memcpy(dst->addr, h + 24, 4);
		return 0;
	case 6:
		if (!memcmp(h + 24, mapped, 12)) { /* an IPv4-mapped address is IPv4 */
			dst->family = 4;
			memcpy(dst->addr, h + 36, 4);
			return 0;
		}
		dst->family = 6;
		memcpy(dst->addr, h + 24, 16);
		return 0;
	}
	return -1;
}

static int unspecified(const struct dest *a)
{
	static const uint8_t zero[16];

	return !memcmp(a->addr, zero, a->family == 4 ? 4 : 16);
}

/* refusal is why a SEND is refused before the admission test, or R_NONE. */
static uint8_t refusal(struct rtd *d, struct conn *c, uint16_t sock, size_t plen, const struct dest *dst)
{
	if (!(d->cfg.flags & RTD_ENABLED))
		return R_DISABLED;
	if (plen > WIRE_MAX_PAYLOAD)
		return R_TOO_BIG;
	if (sock > 0) {
		struct appsock *s = sock <= WIRE_MAX_SOCKS ? c->socks[sock - 1] : NULL;

		if (!s)
			return R_BAD_SOCKET;
		if (!dst->family)
			return s->peer.family ? R_NONE : R_BAD_DEST;
		if (dst->port == 0 || unspecified(dst) || (dst->family == 6 && s->family == AF_INET))
			return R_BAD_DEST;
		return R_NONE;
	}
	if (!dst->family || dst->port == 0 || unspecified(dst))
		return R_BAD_DEST;
	if (dst->family == 6 && d->tx[1][0] < 0)
		return R_BAD_DEST;
	return R_NONE;
}

/* deadline_of reads a request's deadline (absolute, or µs after now with
 * WIRE_FLAG_RELATIVE); -1 if it lies more than DEADLINE_HORIZON_NS from
 * now either way. Within the horizon no sum of deadlines and transmit
 * times in queue.c can wrap (tx is at most 65,549 bytes at 8 kbit/s,
 * 66 s, times EDF_CAP): a deadline near INT64_MIN, or a relative one
 * whose product wraps, would otherwise sort first and pass the test. */
static int deadline_of(const unsigned char *req, int64_t now, int64_t *out)
{
	uint64_t v = get64(req + 16);

	*out = (int64_t)v;
	if (req[2] & WIRE_FLAG_RELATIVE) {
		if (v > (uint64_t)DEADLINE_HORIZON_NS / 1000)
			return -1;
		*out = now + (int64_t)v * 1000;
		return 0;
	}
	return *out < now - DEADLINE_HORIZON_NS || *out > now + DEADLINE_HORIZON_NS ? -1 : 0;
}

static int64_t t_now(struct rtd *d, int64_t now)
{
	return (now > d->busy_until ? now : d->busy_until) + bytes_ns(d, d->cfg.reserve);
}

/* over_share is why c may not queue one more datagram of chunks pool
 * chunks, or R_NONE (the shares: rtd.h). */
static uint8_t over_share(const struct rtd *d, const struct conn *c, uint32_t chunks)
{
	uint32_t ns = slots(d), nc = d->pool.nchunks;

	if (d->q.n >= ns || !d->nfree || chunks > d->pool.nfree)
		return R_QUEUE_FULL;
	if (c->uid == 0)
		return R_NONE;
	if (c->slots + 1 > share(ns, SHARE_CONN) || c->chunks + chunks > share(nc, SHARE_CONN) ||
	    c->u->slots + 1 > share(ns, SHARE_UID) || c->u->chunks + chunks > share(nc, SHARE_UID))
		return R_OVER_SHARE;
	if (d->others_slots + 1 > ns - ns / ROOT_RESERVE || d->others_chunks + chunks > nc - nc / ROOT_RESERVE)
		return R_QUEUE_FULL;
	return R_NONE;
}

/* link_share says whether a holder whose share of the link's time is used
 * until *at may take tx more of it, as 1/div of the time to deadline:
 * its datagrams, each counted div times, follow one another from now and
 * the last ends by the deadline. take 1 records it. */
static int link_share(int64_t *at, int64_t now, int64_t deadline, int64_t tx, int64_t div, int take)
{
	int64_t start = *at > now ? *at : now;

	if (start + tx * div > deadline)
		return 0;
	if (take)
		*at = start + tx * div;
	return 1;
}

/* over_time is why c may not take tx of the link's time by deadline, or
 * R_NONE; take 1 records what it took (the shares: rtd.h). A deadline its
 * datagram cannot meet at all is left to the admission test. Root's
 * reserve: all uids but root together take at most ROOT_RESERVE - 1
 * eighths, each datagram counted ROOT_RESERVE / (ROOT_RESERVE - 1) times
 * (in sevenths of its time). */
static uint8_t over_time(struct rtd *d, struct conn *c, int64_t now, int64_t deadline, int64_t tx, int take)
{
	int64_t reserved = tx + (tx + ROOT_RESERVE - 2) / (ROOT_RESERVE - 1);

	if (c->uid == 0 || deadline - now < tx)
		return R_NONE;
	if (!link_share(&c->link_at, now, deadline, tx, SHARE_CONN, 0) ||
	    !link_share(&c->u->link_at, now, deadline, tx, SHARE_UID, 0))
		return R_OVER_SHARE;
	if (!link_share(&d->others_link_at, now, deadline, reserved, 1, 0))
		return R_QUEUE_FULL;
	if (take) {
		link_share(&c->link_at, now, deadline, tx, SHARE_CONN, 1);
		link_share(&c->u->link_at, now, deadline, tx, SHARE_UID, 1);
		link_share(&d->others_link_at, now, deadline, reserved, 1, 1);
	}
	return R_NONE;
}

/* hold counts a queued datagram against its connection and uid (n 1) or
 * stops counting it (n -1). */
static void hold(struct rtd *d, struct pending *p, int n)
{
	struct conn *c = p->c;

	c->slots += n;
	c->chunks += n * (int)p->nchunks;
	c->u->slots += n;
	c->u->chunks += n * (int)p->nchunks;
	if (c->uid != 0) {
		d->others_slots += n;
		d->others_chunks += n * (int)p->nchunks;
	}
}

/* queue takes an admitted request's datagram into its slot. */
static void queue(struct rtd *d, uint32_t slot, struct conn *c, uint16_t sock, const struct dest *dst,
		  uint32_t flow, uint32_t seq, const unsigned char *payload, size_t plen)
{
	struct pending *p = &d->pend[slot];

	p->c = c;
	c->refs++;
	p->s = sock ? c->socks[sock - 1] : NULL;
	if (p->s)
		p->s->refs++;
	p->f = lane_flow(d, c->uid, flow);
	p->dst = *dst;
	p->flow = flow;
	p->seq = seq;
	p->len = (uint32_t)plen;
	p->nchunks = pool_chunks(p->len);
	p->chunk = pool_put(&d->pool, payload, p->len); /* over_share checked the room */
	hold(d, p, 1);
}

void lane_admit(struct rtd *d, struct conn *c, const unsigned char *req, size_t len, struct reply *rep)
{
	int64_t now = mono_now(), deadline, tx, tnow;
	uint16_t sock = (uint16_t)(req[14] << 8 | req[15]);
	size_t plen = len - WIRE_REQ;
	struct dest dst;
	uint8_t reason;
	int r = -1;

	rep->type = WIRE_REJECT;
	rep->flow = get32(req + 4);
	rep->seq = get32(req + 8);
	rep->time = (uint64_t)now;
	if (parse_dest(req, &dst) < 0) {
		rep->type = WIRE_ERROR;
		rep->reason = R_MALFORMED;
		rep->flow = rep->seq = 0;
		return;
	}
	tx = bytes_ns(d, (int64_t)plen + d->cfg.overhead);
	reason = refusal(d, c, sock, plen, &dst);
	if (deadline_of(req, now, &deadline) < 0 && reason == R_NONE)
		reason = R_BAD_DEADLINE;
	if (reason == R_NONE)
		reason = over_share(d, c, pool_chunks((uint32_t)plen));
	if (reason == R_NONE)
		reason = over_time(d, c, now, deadline, tx, 0);
	tnow = t_now(d, now);
	if (reason == R_NONE) {
		uint32_t slot = d->free_slots[d->nfree - 1];

		r = edfq_admit(&d->q, tnow, deadline, tx, slot);
		if (r == EDF_ADMITTED) {
			over_time(d, c, now, deadline, tx, 1);
			d->nfree--;
			queue(d, slot, c, sock, &dst, rep->flow, rep->seq, req + WIRE_REQ, plen);
			rep->type = WIRE_ADMIT;
		} else {
			reason = r == EDF_DISPLACES ? R_DISPLACES : r == EDF_FULL ? R_QUEUE_FULL : R_OWN_DEADLINE;
		}
	}
	lane_count(d, c->uid, rep->flow, rep->type == WIRE_ADMIT, reason);
	rep->reason = reason;
	rep->depth = d->q.n;
	rep->slack = edfq_slack(&d->q, tnow);
	lane_event(d, rep->type == WIRE_ADMIT ? RTD_EV_ADMIT : RTD_EV_REJECT, reason, c->uid, rep->flow, rep->seq,
		   now, deadline, tx);
}

static socklen_t sockaddr_of(const struct dest *dst, int family, struct sockaddr_in6 *sa)
{
	memset(sa, 0, sizeof(*sa));
	if (family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)sa;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(dst->port);
		memcpy(&s4->sin_addr, dst->addr, 4);
		return sizeof(*s4);
	}
	sa->sin6_family = AF_INET6;
	sa->sin6_port = htons(dst->port);
	if (dst->family == 4) { /* an IPv4 destination on an IPv6 socket: mapped */
		sa->sin6_addr.s6_addr[10] = sa->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&sa->sin6_addr.s6_addr[12], dst->addr, 4);
	} else {
		memcpy(&sa->sin6_addr, dst->addr, 16);
	}
	return sizeof(*sa);
}

/* send_nowait sends msg, never waiting: a full socket (EAGAIN) is counted
 * (send_full) and fails the send like any other error. */
static int send_nowait(struct rtd *d, int fd, struct msghdr *msg)
{
	while (sendmsg(fd, msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		if (errno == EAGAIN)
			d->send_full++;
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

/* send_app sends on the client's socket with the priority as a control
 * message, never waiting; a corked socket is not sent on. */
static int send_app(struct rtd *d, struct pending *p, int cls)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(uint32_t))];
	} ctl;
	struct sockaddr_in6 sa;
	struct iovec iov[POOL_IOV];
	struct msghdr msg = {.msg_iov = iov, .msg_control = ctl.space, .msg_controllen = sizeof(ctl.space)};
	uint32_t prio = cls ? d->cfg.class_prio : d->cfg.plain_prio;
	int cork = 0;
	socklen_t cl = sizeof(cork);

	if (getsockopt(p->s->fd, IPPROTO_UDP, UDP_CORK, &cork, &cl) == 0 && cork)
		return -1;
	if (p->dst.family) {
		msg.msg_namelen = sockaddr_of(&p->dst, p->s->family, &sa);
		msg.msg_name = &sa;
	}
	msg.msg_iovlen = (size_t)pool_iov(&d->pool, p->chunk, p->len, iov, POOL_IOV);
	memset(&ctl, 0, sizeof(ctl));
	ctl.h.cmsg_level = SOL_SOCKET;
	ctl.h.cmsg_type = SO_PRIORITY;
	ctl.h.cmsg_len = CMSG_LEN(sizeof(prio));
	memcpy(CMSG_DATA(&ctl.h), &prio, sizeof(prio));
	return send_nowait(d, p->s->fd, &msg);
}

/* send_one sends p: from the client's attached socket, or from the lane's
 * own of p's family and class; never waiting (the lane's sockets are
 * shared with the daemon, so MSG_DONTWAIT rather than O_NONBLOCK). */
static int send_one(struct rtd *d, struct pending *p, int64_t now)
{
	struct sockaddr_in6 sa;
	const struct dest *to = p->dst.family || !p->s ? &p->dst : &p->s->peer;
	int cls = route_class(d, p->c, to, now), fam = p->dst.family == 6;
	struct iovec iov[POOL_IOV];
	struct msghdr msg = {.msg_name = &sa, .msg_iov = iov};

	if (p->s)
		return send_app(d, p, cls);
	msg.msg_namelen = sockaddr_of(&p->dst, fam ? AF_INET6 : AF_INET, &sa);
	msg.msg_iovlen = (size_t)pool_iov(&d->pool, p->chunk, p->len, iov, POOL_IOV);
	return send_nowait(d, d->tx[fam][cls], &msg);
}

/* finish reports a datagram not sent, then frees its slot. */
static void finish(struct rtd *d, uint32_t slot, const struct edf_ent *e, int64_t now, uint8_t reason)
{
	struct pending *p = &d->pend[slot];

	if (reason != R_NONE) {
		struct reply r = {.type = WIRE_DROPPED, .reason = reason, .flow = p->flow, .seq = p->seq,
				  .time = (uint64_t)now};

		lane_event(d, RTD_EV_DROP, reason, p->c->uid, p->flow, p->seq, now, e->d, e->tx);
		conn_notify(d, p->c, &r);
	}
	hold(d, p, -1);
	pool_release(&d->pool, p->chunk);
	p->chunk = POOL_END;
	user_check(d, p->c->u);
	if (p->s)
		appsock_put(d, p->s);
	conn_put(d, p->c);
	d->free_slots[d->nfree++] = slot;
}

/* release_head sends the head if pacing allows at now; otherwise it returns
 * when to try again (0: it took the head). */
static int64_t release_head(struct rtd *d, int64_t now)
{
	struct edf_ent head, e;
	int64_t ahead, tnow, margin;
	struct pending *p;
	uint32_t slot;

	edfq_peek(&d->q, &head); /* the caller's queue is not empty */
	ahead = d->busy_until - now + head.tx - bytes_ns(d, d->cfg.backlog);
	if (ahead > 0 && d->busy_until > now)
		return now + ahead;
	tnow = t_now(d, now);
	if (edfq_pop(&d->q, tnow, &e) == 1) {
		slot = (uint32_t)e.id;
		d->pend[slot].f->v.dropped_late++;
		d->totals.dropped_late++;
		finish(d, slot, &e, now, R_LATE);
		return 0;
	}
	slot = (uint32_t)e.id;
	p = &d->pend[slot];
	d->busy_until = (now > d->busy_until ? now : d->busy_until) + e.tx;
	margin = e.d - (tnow + e.tx);
	if (margin < p->f->v.min_margin_ns)
		p->f->v.min_margin_ns = margin;
	if (margin < d->totals.min_margin_ns)
		d->totals.min_margin_ns = margin;
	lane_event(d, RTD_EV_RELEASE, 0, p->c->uid, p->flow, p->seq, now, e.d, e.tx);
	if (send_one(d, p, now) < 0) {
		p->f->v.send_errors++;
		d->totals.send_errors++;
		d->busy_until -= e.tx;
		finish(d, slot, &e, now, R_SEND_ERROR);
		return 0;
	}
	p->f->v.sent++;
	p->f->v.sent_bytes += p->len;
	d->totals.sent++;
	d->totals.sent_bytes += p->len;
	finish(d, slot, &e, now, R_NONE);
	return 0;
}

/* lane_release sends what pacing allows now and arms the timer for the
 * rest. */
void lane_release(struct rtd *d)
{
	int64_t until = 0;

	while (d->q.n) {
		until = release_head(d, mono_now());
		if (until)
			break;
	}
	if (until != d->timer_at)
		timer_arm(d, until);
}

/* lane_drop drops the head unsent, with a notice of reason (R_NONE:
 * none); it returns 0 when the queue was empty. */
int lane_drop(struct rtd *d, uint8_t reason)
{
	struct edf_ent e;

	/* Not late: the reason is the caller's, in the notice alone. */
	if (edfq_pop(&d->q, 0, &e) < 0)
		return 0;
	finish(d, (uint32_t)e.id, &e, mono_now(), reason);
	return 1;
}

/* lane_flush drops what is queued (the end), with a shutdown notice. */
void lane_flush(struct rtd *d)
{
	while (lane_drop(d, R_SHUTDOWN))
		;
}

/* lane_counters answers RTD_COUNTERS_ASK: the state, then every flow. */
void lane_counters(struct rtd *d, uint32_t id)
{
	static union {
		struct rtd_counters m;
		unsigned char b[sizeof(struct rtd_counters) + RTD_FLOWS_PER_MSG * sizeof(struct rtd_flow)];
	} buf;
	struct rtd_counters *m = &buf.m;
	struct rtd_flow *out = (struct rtd_flow *)(m + 1);
	uint32_t left = d->nflows, i;

	memset(&buf, 0, sizeof(buf));
	m->h.type = RTD_COUNTERS;
	m->h.conn = id;
	m->depth = d->q.n;
	m->conns = d->nconns;
	m->queued_ns = d->q.backlog;
	m->rate_bps = d->cfg.rate_bps;
	m->app_socks = d->app_socks;
	m->lost_notices = d->lost_notices;
	m->lost_events = d->lost_events;
	m->allocs = rtd_allocs;
	m->pool_bytes = (uint64_t)d->pool.nchunks * POOL_CHUNK;
	m->pool_free = (uint64_t)d->pool.nfree * POOL_CHUNK;
	m->send_full = d->send_full;
	m->totals = d->totals;
	for (i = 0; i < d->nflows; i++) {
		out[m->nflows++] = d->flowpool[i].v;
		left--;
		if (m->nflows == RTD_FLOWS_PER_MSG && left) {
			m->more = 1;
			ctl_send(d, m, sizeof(*m) + m->nflows * sizeof(*out));
			m->nflows = 0;
		}
	}
	m->more = 0;
	ctl_send(d, m, sizeof(*m) + m->nflows * sizeof(*out));
}
