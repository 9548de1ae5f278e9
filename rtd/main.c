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

static int open_fd(int fd)
{
	return fcntl(fd, F_GETFD) >= 0 ? fd : -1;
}

static void setup(struct rtd *d)
{
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
	lane_init(d);
	loop_watch(d);
	/* No page fault on the path: everything resident, now and later. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		fprintf(stderr, "lanes-rtd: mlockall: %s (continuing)\n", strerror(errno));
}

int main(void)
{
	struct rtd *d = &rtd;

	setup(d);
	while (loop_once(d, -2))
		;
	lane_flush(d);
	return 0;
}
