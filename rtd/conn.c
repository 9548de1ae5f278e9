/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * conn.c - granted clients' connections, handed over by the daemon: their
 * requests, answered in order, one reply each (docs/realtime.md, "Wire
 * format"); DROPPED notices at any time.
 *
 * A connection is read until it would block. A reply the client's socket
 * cannot take now is kept and the connection is not read again until it
 * has gone out (EPOLLOUT), so one slow client never holds the loop; a
 * notice it cannot take is counted as lost, as in the Go lane.
 *
 * ATTACH: the descriptor is taken only if it is a UDP socket, IPv4 or
 * IPv6, of the daemon's network namespace (SO_NETNS_COOKIE), at most 8 per
 * connection; any descriptor sent with another request is closed at once
 * (docs/realtime.md, "The application's socket", has why each check is
 * there).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rtd.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

static unsigned char inbuf[WIRE_REQ + WIRE_MAX_PAYLOAD + 1];

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static void encode(const struct reply *r, unsigned char *b)
{
	b[0] = WIRE_VERSION;
	b[1] = r->type;
	b[2] = r->reason;
	b[3] = r->sock;
	put32(b + 4, r->flow);
	put32(b + 8, r->seq);
	put32(b + 12, r->depth);
	put64(b + 16, (uint64_t)r->slack);
	put64(b + 24, r->time);
}

struct conn *conn_find(struct rtd *d, uint32_t id)
{
	struct conn *c;

	for (c = d->conns; c; c = c->next)
		if (c->id == id && c->fd >= 0)
			return c;
	return NULL;
}

static void closed(struct rtd *d, uint32_t id)
{
	struct rtd_hdr h = {.type = RTD_CLOSED, .conn = id};

	ctl_send(d, &h, sizeof(h));
}

void conn_add(struct rtd *d, int fd, uint32_t id, uint32_t uid)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct conn *c = calloc(1, sizeof(*c));
	int fl = fcntl(fd, F_GETFL);

	if (!c)
		die("calloc");
	c->id = id;
	c->uid = uid;
	c->fd = fd;
	c->refs = 1;
	c->u = user_get(d, uid);
	ev.data.ptr = c;
	if (!c->u || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		if (c->u)
			user_check(d, c->u);
		close(fd);
		free(c);
		closed(d, id);
		return;
	}
	c->u->conns++;
	c->next = d->conns;
	d->conns = c;
	d->nconns++;
}

void appsock_put(struct rtd *d, struct appsock *s)
{
	if (--s->refs > 0)
		return;
	close(s->fd);
	d->app_socks--;
	free(s);
}

/* conn_put drops a reference; the last frees the connection. */
void conn_put(struct rtd *d, struct conn *c)
{
	struct conn **pp;

	if (--c->refs > 0)
		return;
	c->u->conns--;
	user_check(d, c->u);
	for (pp = &d->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->next = d->dead;
	d->dead = c;
}

/* conn_reap frees the connections no longer referenced. */
void conn_reap(struct rtd *d)
{
	while (d->dead) {
		struct conn *c = d->dead;

		d->dead = c->next;
		if (c->out != c->outbuf)
			free(c->out);
		free(c);
	}
}

/* unthrottle takes c off the throttled list. */
static void unthrottle(struct rtd *d, struct conn *c)
{
	struct conn **pp;

	if (!c->throttled)
		return;
	c->throttled = 0;
	for (pp = &d->throttled; *pp; pp = &(*pp)->tnext)
		if (*pp == c) {
			*pp = c->tnext;
			break;
		}
}

/* conn_end closes an ended connection; its queued datagrams still leave
 * (they hold references to it and its sockets). */
void conn_end(struct rtd *d, struct conn *c)
{
	int i;

	if (c->fd < 0)
		return;
	/* Out of the epoll set before the close: close() removes it only with
	 * the socket's last reference, and the daemon may still hold its copy
	 * (a handed-over connection that ended at once), which left the entry
	 * reporting HUP with this connection, freed, as its data. */
	epoll_ctl(d->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	d->nconns--;
	unthrottle(d, c);
	routes_disown(d, c);
	for (i = 0; i < WIRE_MAX_SOCKS; i++)
		if (c->socks[i]) {
			appsock_put(d, c->socks[i]);
			c->socks[i] = NULL;
		}
	closed(d, c->id);
	conn_put(d, c);
}

/* watch sets what the loop waits for on c: room for a kept reply
 * (EPOLLOUT), nothing while the daemon answers a forwarded request or c is
 * out of tokens (epoll is level-triggered: a connection not read must not
 * be watched for input, or the loop would spin at real-time priority), or
 * its requests (EPOLLIN). */
static void watch(struct rtd *d, struct conn *c)
{
	struct epoll_event ev = {.events = c->out ? EPOLLOUT : c->paused || c->throttled ? 0 : EPOLLIN, .data.ptr = c};

	if (c->fd >= 0 && epoll_ctl(d->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		conn_end(d, c);
}

/* write_reply writes one reply of len bytes, or keeps it for EPOLLOUT. */
static void write_reply(struct rtd *d, struct conn *c, const unsigned char *b, size_t len)
{
	ssize_t n;

	while ((n = send(c->fd, b, len, MSG_DONTWAIT | MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n >= 0)
		return;
	if (errno != EAGAIN) {
		conn_end(d, c);
		return;
	}
	/* The lane's own replies wait in the connection (no allocation on a
	 * request's path); the daemon's STATS replies, larger, are allocated. */
	c->out = len <= sizeof(c->outbuf) ? c->outbuf : malloc(len);
	if (!c->out)
		die("malloc");
	memcpy(c->out, b, len);
	c->outlen = len;
	watch(d, c);
}

void conn_reply(struct rtd *d, struct conn *c, const struct reply *r)
{
	unsigned char b[WIRE_REPLY];

	encode(r, b);
	write_reply(d, c, b, sizeof(b));
}

/* conn_notify sends a DROPPED notice, never waiting. */
void conn_notify(struct rtd *d, struct conn *c, const struct reply *r)
{
	unsigned char b[WIRE_REPLY];

	if (c->fd < 0)
		return;
	encode(r, b);
	if (send(c->fd, b, sizeof(b), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		d->lost_notices++;
}

/* conn_resume writes the daemon's reply to a forwarded request and reads
 * the connection again. */
void conn_resume(struct rtd *d, struct conn *c, const unsigned char *rep, size_t len)
{
	c->paused = 0;
	watch(d, c);
	if (c->fd < 0)
		return;
	write_reply(d, c, rep, len);
	if (c->fd >= 0 && !c->out)
		conn_readable(d, c);
}

/* conn_event handles what epoll reported for c. A hang-up or error while
 * the connection is not read (a reply kept, the daemon answering it, or
 * out of tokens: epoll reports them whatever is watched) ends it. */
void conn_event(struct rtd *d, struct conn *c, uint32_t events)
{
	if (c->fd < 0)
		return;
	if ((c->paused || c->out || c->throttled) && (events & (EPOLLHUP | EPOLLERR)))
		conn_end(d, c);
	else if (events & EPOLLOUT)
		conn_writable(d, c);
	else
		conn_readable(d, c);
}

/* conn_writable sends the kept reply, then reads again. */
void conn_writable(struct rtd *d, struct conn *c)
{
	unsigned char *b = c->out, copy[WIRE_REPLY];
	size_t len = c->outlen;

	if (c->fd < 0 || !b)
		return;
	c->out = NULL;
	watch(d, c);
	if (b == c->outbuf) { /* write_reply may keep it there again */
		memcpy(copy, b, len);
		b = copy;
	}
	if (c->fd >= 0)
		write_reply(d, c, b, len);
	if (b != copy)
		free(b);
	if (c->fd >= 0 && !c->out && !c->paused)
		conn_readable(d, c);
}

/* close_fds closes the received descriptors not taken (-1). */
static void close_fds(const int *fds, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* take_fds returns the descriptors of msg's SCM_RIGHTS: the first max in
 * fds, the rest closed at once. */
int take_fds(struct msghdr *msg, int *fds, int max)
{
	struct cmsghdr *h;
	int n = 0;

	for (h = CMSG_FIRSTHDR(msg); h; h = CMSG_NXTHDR(msg, h)) {
		size_t k, cnt;

		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < cnt; k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(h) + k * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

/* check_sock makes fd an attached socket if it is a UDP socket of IPv4 or
 * IPv6 in the daemon's network namespace. */
static struct appsock *check_sock(struct rtd *d, int fd)
{
	int typ = 0, fam = 0, proto = 0;
	uint64_t cookie = 0;
	socklen_t l1 = sizeof(int), l2 = sizeof(int), l3 = sizeof(int), l4 = sizeof(cookie);
	struct sockaddr_in6 peer;
	socklen_t pl = sizeof(peer);
	struct appsock *s;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &typ, &l1) || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &fam, &l2) ||
	    getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l3) ||
	    getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &l4))
		return NULL;
	if (typ != SOCK_DGRAM || (fam != AF_INET && fam != AF_INET6) || proto != IPPROTO_UDP ||
	    cookie != d->cfg.netns_cookie)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		die("calloc");
	s->fd = fd;
	s->family = fam;
	s->refs = 1;
	memset(&peer, 0, sizeof(peer));
	if (getpeername(fd, (struct sockaddr *)&peer, &pl) == 0) {
		if (peer.sin6_family == AF_INET) {
			struct sockaddr_in *p4 = (struct sockaddr_in *)&peer;

			s->peer.family = 4;
			memcpy(s->peer.addr, &p4->sin_addr, 4);
			s->peer.port = ntohs(p4->sin_port);
		} else if (peer.sin6_family == AF_INET6) {
			const uint8_t *a = peer.sin6_addr.s6_addr;
			static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

			s->peer.family = memcmp(a, mapped, 12) ? 6 : 4;
			memcpy(s->peer.addr, s->peer.family == 4 ? a + 12 : a, s->peer.family == 4 ? 4 : 16);
			s->peer.port = ntohs(peer.sin6_port);
		}
	}
	return s;
}

static void attach(struct rtd *d, struct conn *c, int *fds, int nfds, struct reply *rep)
{
	struct appsock *s;
	int slot = -1, i;

	for (i = WIRE_MAX_SOCKS - 1; i >= 0; i--)
		if (!c->socks[i])
			slot = i;
	rep->type = WIRE_REJECT;
	if (!(d->cfg.flags & RTD_ENABLED))
		rep->reason = R_DISABLED;
	else if (!(d->cfg.flags & RTD_ATTACH_OK))
		rep->reason = R_UNSUPPORTED;
	else if (nfds != 1)
		rep->reason = R_BAD_SOCKET;
	else if (slot < 0)
		rep->reason = R_TOO_MANY;
	else if ((s = check_sock(d, fds[0])) != NULL) {
		fds[0] = -1; /* the attached socket's now */
		c->socks[slot] = s;
		d->app_socks++;
		rep->type = WIRE_ATTACHED;
		rep->sock = (uint8_t)(slot + 1);
	} else
		rep->reason = R_BAD_SOCKET;
}

/* forward hands a STATS request to the daemon; the connection waits. */
static void forward(struct rtd *d, struct conn *c, const unsigned char *req, size_t len)
{
	unsigned char m[sizeof(struct rtd_forward) + WIRE_REQ];
	struct rtd_forward f = {.h = {.type = RTD_FORWARD, .conn = c->id}, .uid = c->uid, .len = WIRE_REQ};

	(void)len;
	memcpy(m, &f, sizeof(f));
	memcpy(m + sizeof(f), req, WIRE_REQ);
	c->paused = 1;
	watch(d, c);
	ctl_send(d, m, sizeof(m));
}

static uint32_t get32(const unsigned char *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

/* handle answers one request of n bytes (flags: recvmsg's). fds are the
 * descriptors it carried: an ATTACH that takes one sets it to -1, the
 * caller closes the rest. */
static void handle(struct rtd *d, struct conn *c, size_t n, int flags, int *fds, int nfds)
{
	const unsigned char *q = inbuf;
	struct reply rep = {0};
	int wellformed = n >= WIRE_REQ && q[0] == WIRE_VERSION && (q[3] == 0 || q[3] == 4 || q[3] == 6);

	if (wellformed) {
		rep.flow = get32(q + 4);
		rep.seq = get32(q + 8);
	}
	if ((flags & MSG_TRUNC) || n > WIRE_REQ + WIRE_MAX_PAYLOAD) {
		rep.type = WIRE_REJECT;
		rep.reason = R_TOO_BIG;
	} else if (!wellformed) {
		rep.type = WIRE_ERROR;
		rep.reason = R_MALFORMED;
	} else if (q[1] == WIRE_SEND) {
		lane_admit(d, c, q, n, &rep);
		lane_release(d); /* what pacing allows goes out before the reply */
	} else if (q[1] == WIRE_ATTACH) {
		attach(d, c, fds, nfds, &rep);
	} else if (q[1] == WIRE_STATS) {
		forward(d, c, q, n);
		return;
	} else {
		rep.type = WIRE_ERROR;
		rep.reason = R_MALFORMED;
	}
	if (!rep.time)
		rep.time = (uint64_t)mono_now();
	conn_reply(d, c, &rep);
}

/* throttle stops reading c until its wake time (pace.c). */
static void throttle(struct rtd *d, struct conn *c)
{
	c->throttled = 1;
	c->tnext = d->throttled;
	d->throttled = c;
	watch(d, c);
}

/* conn_wake reads again the throttled connections whose wake time has
 * come. */
void conn_wake(struct rtd *d, int64_t now)
{
	struct conn **pp = &d->throttled, *c;

	while ((c = *pp))
		if (c->wake <= now) {
			*pp = c->tnext;
			c->throttled = 0;
			watch(d, c);
			conn_readable(d, c);
			pp = &d->throttled; /* conn_readable may have throttled it again */
		} else {
			pp = &c->tnext;
		}
}

/* conn_readable reads requests until the socket would block, the
 * connection waits (a kept reply, a forwarded request) or ends. */
void conn_readable(struct rtd *d, struct conn *c)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(2 * sizeof(int))];
	} ctl;
	int fds[2], nfds;

	while (c->fd >= 0 && !c->paused && !c->out && !c->throttled) {
		struct iovec iov = {.iov_base = inbuf, .iov_len = sizeof(inbuf)};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space,
				     .msg_controllen = sizeof(ctl.space)};
		ssize_t n;

		if (!pace_ready(d, c, mono_now())) { /* another connection of its uid took the tokens */
			throttle(d, c);
			return;
		}
		n = recvmsg(c->fd, &msg, MSG_TRUNC | MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		/* Every received descriptor is closed on every path but an
		 * attach: taken first, before a read of 0 bytes (which may be
		 * an empty message with SCM_RIGHTS, not only the end) ends it. */
		nfds = n >= 0 ? take_fds(&msg, fds, 2) : 0;
		if (n <= 0) {
			close_fds(fds, nfds);
			conn_end(d, c);
			return;
		}
		handle(d, c, (size_t)n > sizeof(inbuf) ? sizeof(inbuf) : (size_t)n, msg.msg_flags, fds, nfds);
		close_fds(fds, nfds);
		if (c->fd >= 0 && !pace_charge(d, c, mono_now()))
			throttle(d, c);
	}
}
