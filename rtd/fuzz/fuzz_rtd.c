/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * fuzz_rtd.c - a libFuzzer target for lanes-rtd's message handling: the
 * real code of rtd/ (all of it but main.c), driven through its own loop
 * (loop_once) by clients' messages, with and without descriptors, and the
 * daemon's control messages, as one input describes them. Built with
 * clang -fsanitize=fuzzer,address,undefined (internal/rtlane's
 * TestFuzzRtd; make fuzz). After each input every connection is ended
 * and the queue flushed; a descriptor left open then is a leak and the
 * target aborts.
 *
 * An input is a configuration (16 bytes) and then operations, one byte
 * each and their arguments:
 *   op % 8 == 0  connect a client (uid root or nobody), handed over by
 *                RTD_CONN with the connection
 *   1            a client sends a message: its length (2 bytes, and 64 KiB
 *                more if its kind's top bit is set), a kind (which
 *                descriptor goes with it in SCM_RIGHTS: none, UDP, TCP,
 *                unix, eventfd, pipe), its bytes; zero-length ones too
 *   2            a control message of a type the daemon sends: RTD_ROUTE,
 *                RTD_COUNTERS_ASK, RTD_REPLY, RTD_TRACE_SYNC, a short
 *                RTD_CONN (maybe with a descriptor), RTD_CONFIG
 *   3            a client hangs up
 *   4            a client reads what it was sent
 *   5            time passes (the release timer, paced connections)
 *   6, 7         a well-formed SEND of the input's bytes
 * The process runs in a network namespace of its own with loopback down:
 * what lanes-rtd sends goes nowhere.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rtd.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

#define CLIENTS 4

static struct rtd rtd;
static int daemon_end = -1; /* the harness's end of the control socket */
static int clients[CLIENTS];
static uint32_t next_id;

struct input {
	const uint8_t *p;
	size_t n;
};

static uint8_t byte(struct input *in)
{
	uint8_t b = 0;

	if (in->n) {
		b = *in->p++;
		in->n--;
	}
	return b;
}

static int open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!dir)
		abort();
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n - 1; /* the directory's own */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (unshare(CLONE_NEWNET) < 0) {
		perror("fuzz_rtd: unshare(CLONE_NEWNET) (run as root)");
		exit(1);
	}
	return 0;
}

static void drain(int fd)
{
	static unsigned char buf[1 << 17];

	while (fd >= 0 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

static void send_fd(int to, const void *b, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = (void *)b, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.space;
		msg.msg_controllen = sizeof(ctl.space);
		ctl.h.cmsg_level = SOL_SOCKET;
		ctl.h.cmsg_type = SCM_RIGHTS;
		ctl.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&ctl.h), &fd, sizeof(int));
	}
	sendmsg(to, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* some_fd opens a descriptor of a kind the input picks (-1: none). */
static int some_fd(uint8_t k)
{
	int p[2];

	switch (k % 7) {
	case 1:
		return socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	case 2:
		return socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	case 3:
		return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	case 4:
		return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	case 5:
		return eventfd(0, EFD_CLOEXEC);
	case 6:
		if (pipe2(p, O_CLOEXEC) < 0)
			return -1;
		close(p[1]);
		return p[0];
	}
	return -1;
}

/* pass sends b with a descriptor of kind k, which the sender then closes
 * (the receiver has its own copy, or none). */
static void pass(int to, const void *b, size_t len, uint8_t k)
{
	int fd = some_fd(k);

	if (len == 0 && fd < 0) /* an empty message without a descriptor reads as the end */
		len = 1;
	send_fd(to, b, len, fd);
	if (fd >= 0)
		close(fd);
}

static void start(struct rtd *d, struct input *in)
{
	int sp[2], fam, cls;
	struct rtd_config cfg = {.h = {.type = RTD_CONFIG}};
	uint8_t b[16];
	size_t i;

	struct pool keep = d->pool; /* allocated once: all of it free again after stop() */

	for (i = 0; i < sizeof(b); i++)
		b[i] = byte(in);
	memset(d, 0, sizeof(*d));
	d->pool = keep;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		abort();
	d->ctl = sp[0];
	daemon_end = sp[1];
	i = 8 << 20;
	setsockopt(d->ctl, SOL_SOCKET, SO_SNDBUFFORCE, &i, sizeof(int));
	for (fam = 0; fam < 2; fam++)
		for (cls = 0; cls < 2; cls++)
			d->tx[fam][cls] = socket(fam ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	d->trace = -1;
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	d->timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	lane_init(d);
	loop_watch(d);
	cfg.rate_bps = 8000ull + (uint64_t)b[0] * 40000000ull;
	cfg.backlog = 1514u * (1 + b[1] % 8);
	cfg.reserve = b[2] * 16u;
	cfg.overhead = b[3];
	cfg.max_queue = 1 + (b[4] | b[5] << 8) % 20000;
	cfg.flags = b[6] & 3;
	cfg.queue_bytes = 1u << 20;
	cfg.requests = b[8] % 4 ? 0 : 100u * b[9];
	socklen_t cl = sizeof(cfg.netns_cookie);

	getsockopt(d->tx[0][0], SOL_SOCKET, SO_NETNS_COOKIE, &cfg.netns_cookie, &cl); /* attached sockets can pass */
	cfg.class_prio = 0x10011;
	cfg.plain_prio = 6;
	send_fd(daemon_end, &cfg, sizeof(cfg), -1);
	for (i = 0; i < CLIENTS; i++)
		clients[i] = -1;
}

static void do_connect(struct rtd *d, struct input *in)
{
	struct rtd_conn m = {.h = {.type = RTD_CONN, .conn = ++next_id}, .uid = byte(in) & 1 ? 65534 : 0};
	int sp[2], k = byte(in) % CLIENTS;

	(void)d;
	if (clients[k] >= 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return;
	clients[k] = sp[0];
	send_fd(daemon_end, &m, sizeof(m), sp[1]);
	close(sp[1]);
}

static void do_message(struct input *in, int wellformed)
{
	static unsigned char buf[WIRE_REQ + WIRE_MAX_PAYLOAD + 64];
	int k = byte(in) % CLIENTS;
	size_t hi = byte(in), len = hi << 8 | byte(in), i;
	uint8_t kind = byte(in);

	if (kind & 0x80) /* past 64 KiB: too big for a request */
		len += 0x10000;
	if (len > sizeof(buf))
		len = sizeof(buf);
	for (i = 0; i < len; i++)
		buf[i] = byte(in);
	if (wellformed) {
		if (len < WIRE_REQ)
			len = WIRE_REQ;
		buf[0] = WIRE_VERSION;
		buf[1] = WIRE_SEND;
		buf[3] = (uint8_t[]){0, 4, 6, 4}[buf[3] & 3];
		kind = 0;
	}
	if (clients[k] >= 0)
		pass(clients[k], buf, len, kind);
}

static void do_control(struct input *in)
{
	static const uint32_t types[] = {RTD_ROUTE, RTD_COUNTERS_ASK, RTD_REPLY, RTD_TRACE_SYNC, RTD_CONN, RTD_CONFIG};
	unsigned char buf[sizeof(struct rtd_hdr) + WIRE_REPLY + 256];
	struct rtd_hdr h = {.type = types[byte(in) % 6], .conn = byte(in) % (next_id + 2)};
	size_t len = sizeof(h) + byte(in) % (sizeof(buf) - sizeof(h)), i;
	uint8_t kind = byte(in);

	if (h.type == RTD_CONFIG && len < sizeof(struct rtd_config))
		len = sizeof(struct rtd_config); /* a short one ends lanes-rtd, by design */
	if (h.type == RTD_CONN && len >= sizeof(struct rtd_conn))
		len = sizeof(h); /* short: must not keep its descriptor */
	memset(buf, 0, sizeof(buf));
	for (i = sizeof(h); i < len; i++)
		buf[i] = byte(in);
	memcpy(buf, &h, sizeof(h));
	if (h.type == RTD_CONFIG) {
		struct rtd_config *c = (struct rtd_config *)buf;

		c->rate_bps = c->rate_bps % 10000000000ull + 8000;
		c->max_queue %= 20001;
		c->queue_bytes = (1u + c->queue_bytes % 2) << 20;
	}
	pass(daemon_end, buf, len, h.type == RTD_CONN || (kind & 8) ? kind : 0);
}

static void stop(struct rtd *d)
{
	struct conn *c;
	int i;

	for (i = 0; i < CLIENTS; i++)
		if (clients[i] >= 0) {
			close(clients[i]);
			clients[i] = -1;
		}
	for (;;) { /* conn_end may move a connection off the list */
		for (c = d->conns; c && c->fd < 0; c = c->next)
			;
		if (!c)
			break;
		conn_end(d, c);
	}
	drain(daemon_end);
	lane_flush(d);
	conn_reap(d);
	if (d->pool.nfree != d->pool.nchunks)
		abort(); /* a datagram's chunks not returned */
	close(d->ep);
	close(d->timer);
	close(d->ctl);
	close(daemon_end);
	daemon_end = -1;
	for (i = 0; i < 4; i++)
		if (d->tx[i / 2][i % 2] >= 0)
			close(d->tx[i / 2][i % 2]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size};
	struct rtd *d = &rtd;
	int before = open_fds(), after, i;

	start(d, &in);
	while (in.n) {
		uint8_t op = byte(&in);

		switch (op % 8) {
		case 0:
			do_connect(d, &in);
			break;
		case 1:
			do_message(&in, 0);
			break;
		case 2:
			do_control(&in);
			break;
		case 3:
			i = byte(&in) % CLIENTS;
			if (clients[i] >= 0) {
				close(clients[i]);
				clients[i] = -1;
			}
			break;
		case 4:
			drain(clients[byte(&in) % CLIENTS]);
			break;
		case 5:
			usleep(byte(&in) % 32);
			break;
		default:
			do_message(&in, 1);
		}
		if (!loop_once(d, 0))
			abort(); /* only the daemon closes the control socket */
		drain(daemon_end);
	}
	stop(d);
	after = open_fds();
	if (after != before) {
		fprintf(stderr, "fuzz_rtd: %d descriptors open after the input, %d before: leaked\n", after, before);
		abort();
	}
	return 0;
}
