/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause)
 * lanes_rt.h: header-only C client of the lanes realtime lane.
 *
 * Hands UDP datagrams with deadlines to the lanes daemon over its unix
 * SOCK_SEQPACKET socket and returns its immediate admit/reject decision.
 * The application hands the daemon its own UDP socket once (attach); the
 * daemon then sends its datagrams from that socket, so the receiver sees
 * the application's address and port and the replies come back to it.
 * Wire format: docs/realtime.md (version 1, big-endian).
 *
 *   int fd = socket(AF_INET, SOCK_DGRAM, 0);   // the application's own
 *   connect(fd, (struct sockaddr *)&server, sizeof(server));
 *   struct lanes_rt rt;
 *   struct lanes_rt_reply rep;
 *   if (lanes_rt_open(&rt, LANES_RT_SOCKET) < 0) ...;
 *   if (lanes_rt_attach(&rt, fd, &rep) <= 0) ...;   // once
 *   int r = lanes_rt_send(&rt, 7, NULL, lanes_rt_now() + 1000000, 0,
 *                         buf, len, &rep);          // instead of send(fd, ...)
 *   // r == 1 admitted, 0 refused (rep.reason), -1 error (errno)
 *   recv(fd, ...);                                  // replies, as before
 *   lanes_rt_close(&rt);
 *
 * Not thread-safe: use one struct lanes_rt per thread. Notices of admitted
 * datagrams dropped later (would have been late) are counted in rt.dropped.
 *
 * Builds clean under -std=c11 (or gnu11) -Wall -Wextra -Werror -O2 with gcc
 * and clang; pkg-config --cflags lanes-rt gives the include path. It needs
 * POSIX (clock_gettime, CLOCK_MONOTONIC, sockets): under a strict -std=c11
 * with no feature macro it defines _POSIX_C_SOURCE 200809L itself, which
 * works when it is included before any system header; otherwise define
 * _POSIX_C_SOURCE=200809L (or _DEFAULT_SOURCE, _GNU_SOURCE) on the command
 * line. Without POSIX it stops with an #error saying so.
 */
#ifndef LANES_RT_H
#define LANES_RT_H

#if defined(__STRICT_ANSI__) && !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && \
	!defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && !defined(_BSD_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#if !defined(CLOCK_MONOTONIC)
#error "lanes_rt.h needs POSIX: include it before any system header, or compile with -D_POSIX_C_SOURCE=200809L (or -D_DEFAULT_SOURCE)"
#endif

#define LANES_RT_SOCKET "/run/lanes/rt.sock"
#define LANES_RT_VERSION 1
#define LANES_RT_REQ_SIZE 40
#define LANES_RT_REPLY_SIZE 32
#define LANES_RT_MAX_PAYLOAD 65507
/* The daemon never sends a reply longer than this (STATS bodies are trimmed). */
#define LANES_RT_MAX_REPLY (32 + 60 * 1024)
/* Sockets one connection may attach (numbers 1..8; 0 is the daemon's own). */
#define LANES_RT_MAX_SOCKS 8

enum {
	LANES_RT_SEND = 0x01,
	LANES_RT_STATS = 0x02,
	LANES_RT_ATTACH = 0x03,
	LANES_RT_ADMIT = 0x81,
	LANES_RT_REJECT = 0x82,
	LANES_RT_DROPPED = 0x83,
	LANES_RT_ERROR = 0x84,
	LANES_RT_STATS_OK = 0x85,
	LANES_RT_ATTACHED = 0x86,
};

#define LANES_RT_FLAG_RELATIVE 0x01 /* deadline in µs after receipt */

enum {
	LANES_RT_REASON_NONE = 0,
	LANES_RT_REASON_DISPLACES = 1,
	LANES_RT_REASON_OWN_DEADLINE = 2,
	LANES_RT_REASON_NOT_GRANTED = 3,
	LANES_RT_REASON_MALFORMED = 4,
	LANES_RT_REASON_QUEUE_FULL = 5,
	LANES_RT_REASON_BAD_DEST = 6,
	LANES_RT_REASON_TOO_BIG = 7,
	LANES_RT_REASON_LATE = 8,
	LANES_RT_REASON_SEND_ERROR = 9,
	LANES_RT_REASON_SHUTDOWN = 10,
	LANES_RT_REASON_DISABLED = 11,
	LANES_RT_REASON_BUSY = 12, /* too many connections: the daemon closes this one */
	LANES_RT_REASON_BAD_SOCKET = 13, /* not a UDP socket of the daemon's namespace, or no such number */
	LANES_RT_REASON_TOO_MANY_SOCKETS = 14,
	LANES_RT_REASON_UNSUPPORTED = 15, /* the kernel lacks per-datagram priorities (6.14+) */
	LANES_RT_REASON_BAD_DEADLINE = 16, /* more than LANES_RT_HORIZON_NS from receipt */
	LANES_RT_REASON_OVER_SHARE = 17, /* this connection or user holds its share of the queue or the link's time */
};

/* A deadline more than this from the request's receipt, either way, is refused. */
#define LANES_RT_HORIZON_NS 60000000000ll

/* What a client says when it cannot use the lane, each naming what fixes
 * it: the one table of these messages. The Go package rt, the Python and
 * Rust clients and `lanes rt` say the same (examples/reasons_test.go). */
#define LANES_RT_MSG_OFF \
	"the realtime lane is off: set realtime.enabled: true in /etc/lanes/policy.yaml, then reload the daemon (systemctl reload lanes)"
#define LANES_RT_MSG_NO_DAEMON "the daemon is not running: start it (systemctl start lanes)"
#define LANES_RT_MSG_NOT_GRANTED \
	"not granted: add the uid, or a group of it, to realtime.grants in /etc/lanes/policy.yaml, then reload the daemon"
/* The daemon's API socket, beside the realtime socket: when the realtime
 * socket is missing, an answer there means the lane is off. */
#define LANES_RT_API_SOCKET_NAME "lanes.sock"

struct lanes_rt {
	int fd;
	uint16_t sock; /* where lanes_rt_send sends from: 0 the daemon's socket, else the attached one */
	uint32_t seq;
	uint32_t dropped; /* DROPPED notices seen */
	unsigned char buf[LANES_RT_REQ_SIZE + LANES_RT_MAX_PAYLOAD];
};

struct lanes_rt_reply {
	uint8_t type, reason, sock;
	uint32_t flow, seq, depth;
	int64_t slack_ns;
	uint64_t time_ns;
};

/* lanes_rt_now: CLOCK_MONOTONIC in ns, the clock of absolute deadlines. */
static inline uint64_t lanes_rt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline const char *lanes_rt_reason_str(uint8_t r)
{
	static const char *const names[] = {
		"none", "would-make-others-late", "own-deadline-unmeetable",
		"not-granted", "malformed", "queue-full", "bad-destination",
		"too-big", "late-at-release", "send-error", "shutdown", "disabled",
		"too-many-connections", "bad-socket", "too-many-sockets", "unsupported",
		"deadline-out-of-range", "over-share",
	};
	return r < sizeof(names) / sizeof(names[0]) ? names[r] : "unknown";
}

/* lanes_rt_reason_help says what fixes a refusal of reason r, or NULL
 * when nothing in the policy does (the daemon's refusal is the answer). */
static inline const char *lanes_rt_reason_help(uint8_t r)
{
	if (r == LANES_RT_REASON_NOT_GRANTED)
		return LANES_RT_MSG_NOT_GRANTED;
	if (r == LANES_RT_REASON_DISABLED)
		return LANES_RT_MSG_OFF;
	return NULL;
}

/* lanes_rt_open_error says why lanes_rt_open(path) failed with errno err:
 * LANES_RT_MSG_OFF when no realtime socket is at path but the daemon's API
 * socket beside it answers, LANES_RT_MSG_NO_DAEMON when neither does,
 * else strerror(err). */
static inline const char *lanes_rt_open_error(const char *path, int err)
{
	struct sockaddr_un sa;
	const char *slash = strrchr(path, '/');
	size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
	int fd, up;

	if (err != ENOENT && err != ECONNREFUSED)
		return strerror(err);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (dir + sizeof(LANES_RT_API_SOCKET_NAME) > sizeof(sa.sun_path))
		return strerror(err);
	memcpy(sa.sun_path, path, dir);
	memcpy(sa.sun_path + dir, LANES_RT_API_SOCKET_NAME, sizeof(LANES_RT_API_SOCKET_NAME));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return strerror(err);
	up = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return up ? LANES_RT_MSG_OFF : LANES_RT_MSG_NO_DAEMON;
}

/* lanes_rt_open connects to the daemon; 0 or -1 with errno
 * (lanes_rt_open_error says why, and what fixes it). */
static inline int lanes_rt_open(struct lanes_rt *rt, const char *path)
{
	struct sockaddr_un sa;
	memset(rt, 0, offsetof(struct lanes_rt, buf));
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	rt->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (rt->fd < 0)
		return -1;
	if (connect(rt->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(rt->fd);
		rt->fd = -1;
		errno = e;
		return -1;
	}
	return 0;
}

static inline void lanes_rt_close(struct lanes_rt *rt)
{
	if (rt->fd >= 0)
		close(rt->fd);
	rt->fd = -1;
}

/* Big-endian fields, byte by byte (no <endian.h>: not ISO C, not POSIX). */
static inline void lanes_rt__put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}
static inline void lanes_rt__put64(unsigned char *p, uint64_t v)
{
	lanes_rt__put32(p, (uint32_t)(v >> 32));
	lanes_rt__put32(p + 4, (uint32_t)v);
}
static inline uint32_t lanes_rt__get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t lanes_rt__get64(const unsigned char *p)
{
	return (uint64_t)lanes_rt__get32(p) << 32 | lanes_rt__get32(p + 4);
}

/* lanes_rt__bytes returns p as bytes the compiler cannot trace to the
 * object behind it. A struct sockaddr * is read by its family as
 * sockaddr_in or sockaddr_in6; when the caller's object is a sockaddr_in
 * whose family gcc cannot see, gcc -O2 -Wall warns (-Warray-bounds) about
 * the sockaddr_in6 branch it cannot rule out. */
static inline const unsigned char *lanes_rt__bytes(const struct sockaddr *p)
{
	const unsigned char *b = (const unsigned char *)p;
#if defined(__GNUC__)
	__asm__("" : "+r"(b));
#endif
	return b;
}

/* lanes_rt__exchange writes the request of len bytes in rt->buf (with the
 * descriptor fd in SCM_RIGHTS when fd >= 0) and reads until its reply,
 * counting DROPPED notices on the way. 0, or -1 with errno. */
static inline int lanes_rt__exchange(struct lanes_rt *rt, size_t len, int fd, struct lanes_rt_reply *r)
{
	unsigned char in[LANES_RT_REPLY_SIZE + 64];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = rt->buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (fd >= 0) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.space;
		msg.msg_controllen = sizeof(ctl.space);
		ctl.h.cmsg_level = SOL_SOCKET;
		ctl.h.cmsg_type = SCM_RIGHTS;
		ctl.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&ctl.h), &fd, sizeof(int));
	}
	if (sendmsg(rt->fd, &msg, MSG_NOSIGNAL) < 0)
		return -1;
	for (;;) {
		n = recv(rt->fd, in, sizeof(in), 0);
		if (n < 0)
			return -1;
		if (n < LANES_RT_REPLY_SIZE || in[0] != LANES_RT_VERSION) {
			errno = n == 0 ? ECONNRESET : EPROTO;
			return -1;
		}
		r->type = in[1];
		r->reason = in[2];
		r->sock = in[3];
		r->flow = lanes_rt__get32(in + 4);
		r->seq = lanes_rt__get32(in + 8);
		r->depth = lanes_rt__get32(in + 12);
		r->slack_ns = (int64_t)lanes_rt__get64(in + 16);
		r->time_ns = lanes_rt__get64(in + 24);
		if (r->type == LANES_RT_DROPPED) {
			rt->dropped++;
			continue;
		}
		if (r->seq != lanes_rt__get32(rt->buf + 8) && !(r->type == LANES_RT_ERROR && r->seq == 0))
			continue;
		if (r->type == LANES_RT_ERROR) {
			errno = EPROTO;
			return -1;
		}
		return 0;
	}
}

/* lanes_rt__header fills rt->buf's request header. */
static inline void lanes_rt__header(struct lanes_rt *rt, uint8_t type, uint8_t flags, uint16_t sock,
				    uint32_t flow, uint64_t deadline)
{
	unsigned char *h = rt->buf;

	memset(h, 0, LANES_RT_REQ_SIZE);
	h[0] = LANES_RT_VERSION;
	h[1] = type;
	h[2] = flags;
	if (type != LANES_RT_ATTACH) /* an attach goes with seq 0: datagrams are numbered 1, 2, ... */
		rt->seq++;
	lanes_rt__put32(h + 4, flow);
	lanes_rt__put32(h + 8, type == LANES_RT_ATTACH ? 0 : rt->seq);
	h[14] = sock >> 8;
	h[15] = sock & 0xff;
	lanes_rt__put64(h + 16, deadline);
}

/* lanes_rt_attach hands the daemon the application's UDP socket fd
 * (IPv4 or IPv6, connected or not, of the daemon's network namespace) and
 * makes it the socket lanes_rt_send sends from. The daemon keeps its own
 * copy until this connection is closed; fd stays the application's (its
 * replies arrive there; its own send() calls keep their class). Returns
 * the socket's number (1..LANES_RT_MAX_SOCKS), 0 refused (rep->reason),
 * -1 error (errno). rep may be NULL; else *rep is set on every path
 * (zeroed when no reply came). */
static inline int lanes_rt_attach(struct lanes_rt *rt, int fd, struct lanes_rt_reply *rep)
{
	struct lanes_rt_reply r;

	memset(&r, 0, sizeof(r));
	if (rep)
		*rep = r; /* set on every path: zeroed when no reply came */
	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	lanes_rt__header(rt, LANES_RT_ATTACH, 0, 0, 0, 0);
	if (lanes_rt__exchange(rt, LANES_RT_REQ_SIZE, fd, &r) < 0) {
		if (rep && r.type == LANES_RT_ERROR)
			*rep = r; /* its reason */
		return -1;
	}
	if (rep)
		*rep = r;
	if (r.type != LANES_RT_ATTACHED)
		return 0;
	rt->sock = r.sock;
	return r.sock;
}

/* lanes_rt_send_on hands one datagram to the daemon, to leave from socket
 * sock (0: the daemon's own; else a number lanes_rt_attach returned).
 * deadline is absolute CLOCK_MONOTONIC ns, or µs after receipt when flags
 * has LANES_RT_FLAG_RELATIVE. dst is a struct sockaddr_in or
 * sockaddr_in6, or NULL for the peer of an attached connected socket.
 * Returns 1 admitted, 0 refused (see rep->reason), -1 error (errno;
 * EPROTO for an ERROR reply, its reason in rep->reason). rep may be NULL;
 * else *rep is set on every path (zeroed when no reply came). */
static inline int lanes_rt_send_on(struct lanes_rt *rt, uint16_t sock, uint32_t flow, const struct sockaddr *dst,
				   uint64_t deadline, uint8_t flags, const void *payload, size_t len,
				   struct lanes_rt_reply *rep)
{
	unsigned char *h = rt->buf;
	struct lanes_rt_reply r;

	memset(&r, 0, sizeof(r));
	if (rep)
		*rep = r; /* set on every path: zeroed when no reply came */
	if (len > LANES_RT_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return -1;
	}
	lanes_rt__header(rt, LANES_RT_SEND, flags, sock, flow, deadline);
	if (dst == NULL) {
		/* family 0: the attached socket's peer */
	} else if (dst->sa_family == AF_INET) {
		const unsigned char *b = lanes_rt__bytes(dst);
		h[3] = 4;
		memcpy(h + 24, b + offsetof(struct sockaddr_in, sin_addr), 4);
		memcpy(h + 12, b + offsetof(struct sockaddr_in, sin_port), 2); /* network order */
	} else if (dst->sa_family == AF_INET6) {
		const unsigned char *b = lanes_rt__bytes(dst);
		h[3] = 6;
		memcpy(h + 24, b + offsetof(struct sockaddr_in6, sin6_addr), 16);
		memcpy(h + 12, b + offsetof(struct sockaddr_in6, sin6_port), 2);
	} else {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if (len > 0)
		memcpy(h + LANES_RT_REQ_SIZE, payload, len);
	if (lanes_rt__exchange(rt, LANES_RT_REQ_SIZE + len, -1, &r) < 0) {
		if (rep && r.type == LANES_RT_ERROR)
			*rep = r; /* its reason */
		return -1;
	}
	if (rep)
		*rep = r;
	return r.type == LANES_RT_ADMIT;
}

/* lanes_rt_send is lanes_rt_send_on from the attached socket (the last
 * lanes_rt_attach made), or from the daemon's own before any. */
static inline int lanes_rt_send(struct lanes_rt *rt, uint32_t flow, const struct sockaddr *dst,
				uint64_t deadline, uint8_t flags, const void *payload, size_t len,
				struct lanes_rt_reply *rep)
{
	return lanes_rt_send_on(rt, rt->sock, flow, dst, deadline, flags, payload, len, rep);
}

#endif /* LANES_RT_H */
