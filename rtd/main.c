/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * lanes-rtd - the realtime lane's data path as a process of its own,
 * started and configured by the lanes daemon (ctl.h): one thread, which the
 * daemon runs at SCHED_FIFO, blocks in epoll_wait on the clients' sockets,
 * the control socket and a timerfd for paced releases, so a client's
 * request wakes exactly the thread that admits it, sends it and replies,
 * with no language runtime between the kernel and the path
 * (docs/realtime.md, "The data path process").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "rtd.h"

static struct rtd rtd;
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

static int open_fd(int fd)
{
	return fcntl(fd, F_GETFD) >= 0 ? fd : -1;
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

static void setup(struct rtd *d)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int fam, cls;

	/* A trace pipe whose reader is gone fails the write, not the process. */
	signal(SIGPIPE, SIG_IGN);
	/*
	 * lanes-rtd ends when the control socket closes, after the daemon has
	 * stopped the lane, with a shutdown notice for what is queued. The
	 * daemon's stop signals are the daemon's: systemd sends SIGTERM to every
	 * process of the unit's cgroup (KillMode=control-group), a terminal sends
	 * SIGINT or SIGHUP to the whole process group. Taken, they would end the
	 * data path before the daemon stops it: every stop would log a failed
	 * component and schedule its restart, and the queue's notices be lost.
	 */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	d->ctl = RTD_FD_CTL;
	if (fcntl(d->ctl, F_GETFD) < 0)
		die("no control socket on descriptor 3 (lanes-rtd is started by the lanes daemon)");
	for (fam = 0; fam < 2; fam++)
		for (cls = 0; cls < 2; cls++)
			d->tx[fam][cls] = open_fd(RTD_FD_TX + 2 * fam + cls);
	if (d->tx[0][0] < 0 || d->tx[0][1] < 0) {
		errno = EBADF;
		die("no IPv4 sockets on descriptors 4 and 5");
	}
	d->trace = open_fd(RTD_FD_TRACE);
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	d->timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (d->ep < 0 || d->timer < 0)
		die("epoll/timerfd");
	ev.data.ptr = &ctl_tag;
	if (epoll_ctl(d->ep, EPOLL_CTL_ADD, d->ctl, &ev) < 0)
		die("epoll_ctl");
	ev.data.ptr = &timer_tag;
	if (epoll_ctl(d->ep, EPOLL_CTL_ADD, d->timer, &ev) < 0)
		die("epoll_ctl");
	lane_init(d);
	/* No page fault on the path: everything resident, now and later. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		fprintf(stderr, "lanes-rtd: mlockall: %s (continuing)\n", strerror(errno));
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

int main(void)
{
	struct rtd *d = &rtd;
	struct epoll_event evs[64];

	setup(d);
	for (;;) {
		int n = epoll_wait(d->ep, evs, 64, wait_ms(d, mono_now())), i;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("epoll_wait");
		for (i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &ctl_tag) {
				if (!ctl_readable(d)) {
					lane_flush(d);
					return 0;
				}
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
	}
}
