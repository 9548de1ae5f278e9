/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * loop.c - lanes-rtd's loop and its control socket: one pass of the loop
 * (loop_once: wait, then every ready descriptor, then what is due), the
 * daemon's messages (ctl.h) and the clock. main.c sets the process up
 * and runs the loop; the fuzz target (rtd/fuzz/) runs the same passes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "rtd.h"

uint64_t rtd_allocs;
static char ctl_tag, timer_tag; /* epoll data of the two non-client descriptors */
static unsigned char ctlbuf[sizeof(struct rtd_hdr) + WIRE_REPLY + 61440];

int64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void die(const char *what)
{
	fprintf(stderr, "lanes-rtd: %s: %s\n", what, strerror(errno));
	exit(1);
}

void ctl_send(struct rtd *d, const void *msg, size_t len)
{
	while (send(d->ctl, msg, len, MSG_NOSIGNAL) < 0)
		if (errno != EINTR)
			die("control socket");
}

/* timer_arm sets the release timer to the monotonic time at (0: off). */
void timer_arm(struct rtd *d, int64_t at)
{
	struct itimerspec its = {0};

	if (at > 0) {
		its.it_value.tv_sec = at / 1000000000;
		its.it_value.tv_nsec = at % 1000000000;
	}
	if (timerfd_settime(d->timer, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		die("timerfd_settime");
	d->timer_at = at;
}

/* ctl_message acts on one message from the daemon. */
static void ctl_message(struct rtd *d, const unsigned char *b, size_t n, int fd)
{
	struct rtd_hdr h;
	struct conn *c;

	if (n < sizeof(h)) {
		errno = EPROTO;
		die("short control message");
	}
	memcpy(&h, b, sizeof(h));
	if (h.type != RTD_CONN && fd >= 0)
		close(fd);
	switch (h.type) {
	case RTD_CONFIG:
		if (n < sizeof(d->cfg))
			break;
		{
			struct rtd_config cfg;

			memcpy(&cfg, b, sizeof(cfg));
			lane_config(d, &cfg);
		}
		if (!d->ready) {
			struct rtd_hdr r = {.type = RTD_READY};

			d->ready = 1;
			ctl_send(d, &r, sizeof(r));
		}
		return;
	case RTD_CONN:
		if (n >= sizeof(struct rtd_conn) && fd >= 0) {
			struct rtd_conn m;

			memcpy(&m, b, sizeof(m));
			conn_add(d, fd, m.h.conn, m.uid);
			if ((c = conn_find(d, m.h.conn)))
				conn_readable(d, c); /* requests sent before the hand-over */
		} else if (fd >= 0) {
			close(fd); /* short: no connection to make of it */
		}
		return;
	case RTD_ROUTE:
		if (n >= sizeof(struct rtd_route)) {
			struct rtd_route r;

			memcpy(&r, b, sizeof(r));
			route_answer(d, &r);
		}
		return;
	case RTD_COUNTERS_ASK:
		lane_counters(d, h.conn);
		return;
	case RTD_TRACE_SYNC:
		lane_event(d, RTD_EV_SYNC, 0, 0, 0, h.conn, mono_now(), 0, 0);
		lane_trace_flush(d);
		return;
	case RTD_REPLY:
		if ((c = conn_find(d, h.conn)))
			conn_resume(d, c, b + sizeof(h), n - sizeof(h));
		return;
	}
	errno = EPROTO;
	die("unknown control message");
}

/* ctl_readable takes every waiting control message; false when the daemon
 * has closed the control socket. */
static int ctl_readable(struct rtd *d)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} cm;

	for (;;) {
		struct iovec iov = {.iov_base = ctlbuf, .iov_len = sizeof(ctlbuf)};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.space,
				     .msg_controllen = sizeof(cm.space)};
		ssize_t n = recvmsg(d->ctl, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int fd = -1;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		if (n >= 0 && take_fds(&msg, &fd, 1) && n == 0)
			close(fd);
		if (n <= 0)
			return 0;
		ctl_message(d, ctlbuf, (size_t)n, fd);
	}
}

/* wait_ms is how long the loop may sleep: until the first throttled
 * connection may be read again (rounded up to the ms), a few seconds
 * while destinations may age out, else until an event. */
static int wait_ms(struct rtd *d, int64_t now)
{
	int64_t w = pace_wake(d, now);

	if (w)
		return w <= now ? 0 : (int)((w - now + 999999) / 1000000);
	return d->nroutes ? 5000 : -1;
}

/* loop_watch adds the control socket and the release timer to the epoll
 * set. */
void loop_watch(struct rtd *d)
{
	struct epoll_event ev = {.events = EPOLLIN};

	ev.data.ptr = &ctl_tag;
	if (epoll_ctl(d->ep, EPOLL_CTL_ADD, d->ctl, &ev) < 0)
		die("epoll_ctl");
	ev.data.ptr = &timer_tag;
	if (epoll_ctl(d->ep, EPOLL_CTL_ADD, d->timer, &ev) < 0)
		die("epoll_ctl");
}

/* loop_once waits for events (timeout_ms as epoll_wait's, -2: until the
 * next thing due) and handles them; 0 once the daemon has closed the
 * control socket. */
int loop_once(struct rtd *d, int timeout_ms)
{
	struct epoll_event evs[64];
	int n, i;

	n = epoll_wait(d->ep, evs, 64, timeout_ms == -2 ? wait_ms(d, mono_now()) : timeout_ms);
	if (n < 0 && errno == EINTR)
		return 1;
	if (n < 0)
		die("epoll_wait");
	for (i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;

		if (p == &ctl_tag) {
			if (!ctl_readable(d))
				return 0;
		} else if (p == &timer_tag) {
			uint64_t x;

			if (read(d->timer, &x, sizeof(x)) < 0 && errno != EAGAIN)
				die("timerfd read");
			d->timer_at = 0;
		} else {
			conn_event(d, p, evs[i].events);
		}
	}
	conn_wake(d, mono_now());
	routes_prune(d, mono_now());
	lane_release(d);
	lane_trace_flush(d);
	conn_reap(d);
	return 1;
}
