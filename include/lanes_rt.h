/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause)
 * lanes_rt.h: header-only C client of the lanes realtime lane.
 *
 * Hands UDP datagrams with deadlines to the lanes daemon over its unix
 * SOCK_SEQPACKET socket and returns its immediate admit/reject decision.
 * Wire format: docs/realtime.md (version 1, big-endian).
 *
 *   struct lanes_rt rt;
 *   if (lanes_rt_open(&rt, LANES_RT_SOCKET) < 0) ...;
 *   struct sockaddr_in dst = {...};
 *   struct lanes_rt_reply rep;
 *   int r = lanes_rt_send(&rt, 7, (struct sockaddr *)&dst,
 *                         lanes_rt_now() + 1000000, 0, buf, len, &rep);
 *   // r == 1 admitted, 0 refused (rep.reason), -1 error (errno)
 *   lanes_rt_close(&rt);
 *
 * Not thread-safe: use one struct lanes_rt per thread. Notices of admitted
 * datagrams dropped later (would have been late) are counted in rt.dropped.
 */
#ifndef LANES_RT_H
#define LANES_RT_H

#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LANES_RT_SOCKET "/run/lanes/rt.sock"
#define LANES_RT_VERSION 1
#define LANES_RT_REQ_SIZE 40
#define LANES_RT_REPLY_SIZE 32
#define LANES_RT_MAX_PAYLOAD 65507
/* The daemon never sends a reply longer than this (STATS bodies are trimmed). */
#define LANES_RT_MAX_REPLY (32 + 60 * 1024)

enum {
	LANES_RT_SEND = 0x01,
	LANES_RT_STATS = 0x02,
	LANES_RT_ADMIT = 0x81,
	LANES_RT_REJECT = 0x82,
	LANES_RT_DROPPED = 0x83,
	LANES_RT_ERROR = 0x84,
	LANES_RT_STATS_OK = 0x85,
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
};

struct lanes_rt {
	int fd;
	uint32_t seq;
	uint32_t dropped; /* DROPPED notices seen */
	unsigned char buf[LANES_RT_REQ_SIZE + LANES_RT_MAX_PAYLOAD];
};

struct lanes_rt_reply {
	uint8_t type, reason;
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
		"too-many-connections",
	};
	return r < sizeof(names) / sizeof(names[0]) ? names[r] : "unknown";
}

/* lanes_rt_open connects to the daemon; 0 or -1 with errno. */
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

static inline void lanes_rt__put32(unsigned char *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static inline void lanes_rt__put64(unsigned char *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static inline uint32_t lanes_rt__get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static inline uint64_t lanes_rt__get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

/* lanes_rt_send hands one datagram to the daemon. deadline is absolute
 * CLOCK_MONOTONIC ns, or µs after receipt when flags has
 * LANES_RT_FLAG_RELATIVE. dst is a struct sockaddr_in or sockaddr_in6.
 * Returns 1 admitted, 0 refused (see rep->reason), -1 error (errno;
 * EPROTO for an ERROR reply). rep may be NULL. */
static inline int lanes_rt_send(struct lanes_rt *rt, uint32_t flow, const struct sockaddr *dst,
				uint64_t deadline, uint8_t flags, const void *payload, size_t len,
				struct lanes_rt_reply *rep)
{
	unsigned char *h = rt->buf, in[LANES_RT_REPLY_SIZE + 64];
	struct lanes_rt_reply r;
	uint16_t port;
	ssize_t n;

	if (len > LANES_RT_MAX_PAYLOAD) {
		errno = EMSGSIZE;
		return -1;
	}
	memset(h, 0, LANES_RT_REQ_SIZE);
	h[0] = LANES_RT_VERSION;
	h[1] = LANES_RT_SEND;
	h[2] = flags;
	if (dst->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)dst;
		h[3] = 4;
		memcpy(h + 24, &s4->sin_addr, 4);
		port = ntohs(s4->sin_port);
	} else if (dst->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)dst;
		h[3] = 6;
		memcpy(h + 24, &s6->sin6_addr, 16);
		port = ntohs(s6->sin6_port);
	} else {
		errno = EAFNOSUPPORT;
		return -1;
	}
	rt->seq++;
	lanes_rt__put32(h + 4, flow);
	lanes_rt__put32(h + 8, rt->seq);
	h[12] = port >> 8;
	h[13] = port & 0xff;
	lanes_rt__put64(h + 16, deadline);
	memcpy(h + LANES_RT_REQ_SIZE, payload, len);
	if (send(rt->fd, h, LANES_RT_REQ_SIZE + len, 0) < 0)
		return -1;
	for (;;) {
		n = recv(rt->fd, in, sizeof(in), 0);
		if (n < 0)
			return -1;
		if (n < LANES_RT_REPLY_SIZE || in[0] != LANES_RT_VERSION) {
			errno = n == 0 ? ECONNRESET : EPROTO;
			return -1;
		}
		r.type = in[1];
		r.reason = in[2];
		r.flow = lanes_rt__get32(in + 4);
		r.seq = lanes_rt__get32(in + 8);
		r.depth = lanes_rt__get32(in + 12);
		r.slack_ns = (int64_t)lanes_rt__get64(in + 16);
		r.time_ns = lanes_rt__get64(in + 24);
		if (r.type == LANES_RT_DROPPED) {
			rt->dropped++;
			continue;
		}
		if (r.seq != rt->seq && !(r.type == LANES_RT_ERROR && r.seq == 0))
			continue;
		if (rep)
			*rep = r;
		if (r.type == LANES_RT_ERROR) {
			errno = EPROTO;
			return -1;
		}
		return r.type == LANES_RT_ADMIT;
	}
}

#endif /* LANES_RT_H */
