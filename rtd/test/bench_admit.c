/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * bench_admit.c - the cost of lanes-rtd's admission at queue depths 100,
 * 1,000 and 16,384: lane_admit (the shares, the EDF test and insertion,
 * the reply's slack) of root's SEND with a deadline uniform over the
 * queued ones, then lane_drop of the head, so that the queue stays at its
 * depth. Linked with lanes-rtd's sources (all but main.c) as make builds
 * them; `make bench-rtd` runs it. The thread's CPU time is measured, so
 * that time-sharing with the machine's other work is not counted; rounds
 * alternate the depths, so that what remains of its load (caches shared
 * with it) falls on each alike; the fastest round of each is reported,
 * and the ratio of the deepest to the shallowest.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#include "rtd.h"

#define ROUNDS 15
#define SPAN_NS 10000000000ll /* deadlines: 20 s to 30 s ahead */

static struct rtd rtd;
static unsigned char req[WIRE_REQ + 100];
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void setup(void)
{
	struct rtd_config cfg = {.rate_bps = 1000000000, .backlog = 6056, .overhead = 42, .max_queue = EDF_CAP,
				 .flags = RTD_ENABLED, .queue_bytes = POOL_DEFAULT};
	int sp[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		die("socketpair");
	rtd.ctl = sp[0];
	rtd.tx[0][0] = rtd.tx[0][1] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	rtd.tx[1][0] = rtd.tx[1][1] = -1;
	rtd.trace = -1;
	rtd.ep = epoll_create1(EPOLL_CLOEXEC);
	rtd.timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	lane_init(&rtd);
	lane_config(&rtd, &cfg);
	req[0] = WIRE_VERSION;
	req[1] = WIRE_SEND;
	req[3] = 4;
	req[13] = 9;
	req[24] = 127;
	req[27] = 1;
}

static int admit(struct conn *c, int64_t deadline)
{
	struct reply rep;
	int i;

	for (i = 0; i < 8; i++)
		req[16 + i] = (unsigned char)((uint64_t)deadline >> (56 - 8 * i));
	lane_admit(&rtd, c, req, sizeof(req), &rep);
	if (rep.type != WIRE_ADMIT)
		fprintf(stderr, "refused: %s at depth %u\n", lanes_rt_reason_str(rep.reason), rtd.q.n);
	return rep.type == WIRE_ADMIT;
}

/* cpu_now is the thread's CPU time in ns: time-sharing with the
 * machine's other work is not counted. */
static int64_t cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* run keeps the queue at depth for n requests; it returns CPU ns per
 * request. */
static double run(struct conn *c, uint32_t depth, uint32_t n)
{
	int64_t base = mono_now() + 20000000000ll, t0;
	uint32_t i;

	lane_flush(&rtd);
	for (i = 0; i + 1 < depth; i++) /* in deadline order: the quickest to fill */
		if (!admit(c, base + (int64_t)i * (SPAN_NS / depth)))
			die("prefill refused");
	t0 = cpu_now();
	for (i = 0; i < n; i++) {
		if (!admit(c, base + (int64_t)(next_rand() % SPAN_NS)))
			die("refused");
		lane_drop(&rtd, R_NONE);
	}
	return (double)(cpu_now() - t0) / n;
}

int main(void)
{
	static const uint32_t depths[] = {100, 1000, 16384};
	double best[3] = {0, 0, 0};
	struct conn c = {.uid = 0, .fd = -1, .refs = 1};
	int r, k;

	setup();
	c.u = user_get(&rtd, 0);
	c.u->conns++;
	for (r = 0; r < ROUNDS; r++)
		for (k = 0; k < 3; k++) {
			double ns = run(&c, depths[k], 50000);

			if (!best[k] || ns < best[k])
				best[k] = ns;
		}
	for (k = 0; k < 3; k++)
		printf("lanes-rtd admission at depth %5u: %7.1f ns (CPU) per request (fastest of %d rounds)\n", depths[k],
		       best[k], ROUNDS);
	printf("depth 16384 / depth 100: %.2f\n", best[2] / best[0]);
	lane_flush(&rtd);
	return 0;
}
