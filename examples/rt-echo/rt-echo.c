/* rt-echo.c: an application that keeps its own UDP socket and sends
 * through the lanes realtime lane (include/lanes_rt.h only).
 *
 *   rt-echo ADDR PORT COUNT DEADLINE_US
 *
 * Connects a UDP socket (IPv4 or IPv6) to an echo server at ADDR PORT,
 * hands it to the daemon once (lanes_rt_attach), then sends COUNT
 * requests, one every millisecond, each with a deadline DEADLINE_US from
 * its send call; the daemon admits or refuses each at once and sends the
 * admitted ones from this socket, so the echoes come back to it. Between
 * sends it reads the echoes; after the last it waits up to a second for
 * the rest (a datagram the daemon dropped late never gets one). Prints one line:
 *
 *   sent N admitted A refused R replies Y
 *
 * then one line per reason of the refusals, `refused REASON COUNT`,
 * and, on stderr, its socket's local port. The daemon's socket is
 * LANES_RT_SOCKET, or the environment's LANES_RT_SOCKET. */
#include <lanes_rt.h> /* first: it asks for POSIX under a strict -std=c11 */

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_COUNT 1000000

struct echo_state {
	int fd;
	unsigned char *admitted; /* per sequence number: 1 admitted, 2 replied */
	unsigned long count, nadmitted, replies;
};

/* connect_udp opens a UDP socket connected to addr:port; -1 on error. */
static int connect_udp(const char *addr, const char *port)
{
	struct addrinfo hints, *res, *ai;
	int fd = -1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_DGRAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(addr, port, &hints, &res) != 0)
		return -1;
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	return fd;
}

/* put_seq and get_seq write and read a request's number, big-endian, in
 * the first 4 bytes of its payload (the application's own format). */
static void put_seq(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t get_seq(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* read_echoes reads echoes until the monotonic time until (ns), or with
 * all, until every admitted request has its echo. */
static void read_echoes(struct echo_state *st, uint64_t until, int all)
{
	unsigned char buf[64];
	struct pollfd p = {.fd = st->fd, .events = POLLIN};

	for (;;) {
		uint64_t now = lanes_rt_now();
		if (all && st->replies == st->nadmitted)
			return;
		int ms = now >= until ? 0 : (int)((until - now + 999999) / 1000000);
		if (poll(&p, 1, ms) <= 0)
			return;
		ssize_t n = recv(st->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n >= 4) {
			uint32_t seq = get_seq(buf);
			if (seq < st->count && st->admitted[seq] == 1) {
				st->admitted[seq] = 2;
				st->replies++;
			}
		}
		if (now >= until)
			return;
	}
}

/* number reads a decimal number, all of s; -1 if it is not one. */
static int number(const char *s, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return *s < '0' || *s > '9' || *end || errno ? -1 : 0;
}

static int usage(const char *prog)
{
	fprintf(stderr, "usage: %s ADDR PORT COUNT DEADLINE_US\n", prog);
	return 2;
}

int main(int argc, char **argv)
{
	struct lanes_rt rt;
	struct lanes_rt_reply rep;
	struct echo_state st = {0};
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	unsigned long i, refused = 0, deadline_us, reasons[256] = {0};
	unsigned char msg[64];
	const char *path = getenv("LANES_RT_SOCKET");
	uint64_t next;

	if (argc != 5)
		return usage(argv[0]);
	/* A 0 deadline is sent as any other (the daemon refuses it
	 * own-deadline-unmeetable), as the other clients' examples do. */
	if (number(argv[3], &st.count) < 0 || number(argv[4], &deadline_us) < 0 || st.count == 0 ||
	    st.count > MAX_COUNT || deadline_us > LANES_RT_HORIZON_NS / 1000)
		return usage(argv[0]);
	st.fd = connect_udp(argv[1], argv[2]);
	if (st.fd < 0) {
		fprintf(stderr, "rt-echo: cannot connect a UDP socket to %s port %s\n", argv[1], argv[2]);
		return 1;
	}
	if (getsockname(st.fd, (struct sockaddr *)&local, &llen) == 0)
		fprintf(stderr, "rt-echo: local port %u\n",
			ntohs(local.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&local)->sin6_port
							  : ((struct sockaddr_in *)&local)->sin_port));
	if (!path)
		path = LANES_RT_SOCKET;
	if (lanes_rt_open(&rt, path) < 0) {
		fprintf(stderr, "rt-echo: %s: %s\n", path, lanes_rt_open_error(path, errno));
		return 1;
	}
	switch (lanes_rt_attach(&rt, st.fd, &rep)) {
	case -1:
		perror("rt-echo: lanes_rt_attach");
		return 1;
	case 0:
		fprintf(stderr, "rt-echo: attach refused: %s\n", lanes_rt_reason_help(rep.reason)
									? lanes_rt_reason_help(rep.reason)
									: lanes_rt_reason_str(rep.reason));
		return 1;
	}
	st.admitted = calloc(st.count, 1);
	if (!st.admitted)
		return 1;
	memset(msg, 0, sizeof(msg));
	next = lanes_rt_now();
	for (i = 0; i < st.count; i++) {
		put_seq(msg, (uint32_t)i);
		int r = lanes_rt_send(&rt, 1, NULL, lanes_rt_now() + deadline_us * 1000, 0, msg, sizeof(msg), &rep);
		if (r < 0) {
			perror("rt-echo: lanes_rt_send");
			return 1;
		}
		if (r) {
			st.admitted[i] = 1;
			st.nadmitted++;
		} else {
			refused++;
			reasons[rep.reason]++;
		}
		next += 1000000;
		read_echoes(&st, next, 0);
	}
	read_echoes(&st, lanes_rt_now() + 1000000000ull, 1);
	printf("sent %lu admitted %lu refused %lu replies %lu\n", st.count, st.nadmitted, refused, st.replies);
	for (i = 0; i < 256; i++)
		if (reasons[i])
			printf("refused %s %lu\n", lanes_rt_reason_str((uint8_t)i), reasons[i]);
	lanes_rt_close(&rt);
	close(st.fd);
	free(st.admitted);
	return 0;
}
