/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * core_test.c - unit tests of lanes-rtd's core, linked with its sources
 * (all but main.c) and built with the fuzz target's small tables
 * (rtdbuild.FuzzDefines: EDF_CAP 512, ROUTES_MAX 64, FLOWS_MAX 128):
 * admission and the deadline horizon, the shares (slots, bytes and the
 * link's time), the pool, the destination table, pacing, the counters'
 * bounds, shutdown, and no allocation on a request's path. internal/rtlane's TestRtdCore builds
 * and runs it (under ASan and UBSan with clang). Datagrams the release
 * sends go to 127.0.0.1:9.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "rtd.h"

static struct rtd rtd;
static int daemon_end = -1, fails;

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: ", __func__, __LINE__);      \
			fprintf(stderr, __VA_ARGS__);                             \
			fputc('\n', stderr);                                      \
			fails++;                                                  \
		}                                                                 \
	} while (0)

/* drain reads the control messages lanes-rtd sent; it returns how many
 * were of type (0: any). */
static int drain(uint32_t type)
{
	static unsigned char buf[1 << 17];
	ssize_t n;
	int k = 0;

	while ((n = recv(daemon_end, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		uint32_t t;

		memcpy(&t, buf, sizeof(t));
		k += !type || t == type;
	}
	return k;
}

static void setup(uint32_t max_queue, uint32_t queue_bytes, uint32_t requests)
{
	struct rtd *d = &rtd;
	struct rtd_config cfg = {.rate_bps = 1000000000, .backlog = 6056, .overhead = 42, .max_queue = max_queue,
				 .flags = RTD_ENABLED, .queue_bytes = queue_bytes, .requests = requests};
	int sp[2], big = 8 << 20;

	if (d->ctl > 0) {
		close(d->ctl);
		close(daemon_end);
		close(d->tx[0][0]);
		close(d->tx[0][1]);
		close(d->ep);
		close(d->timer);
	}
	pool_free(&d->pool);
	while (d->conns) { /* the tests' clients */
		struct conn *c = d->conns;

		d->conns = c->next;
		free(c);
	}
	memset(d, 0, sizeof(*d));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		die("socketpair");
	d->ctl = sp[0];
	daemon_end = sp[1];
	setsockopt(d->ctl, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	d->tx[0][0] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	d->tx[0][1] = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	d->tx[1][0] = d->tx[1][1] = -1;
	d->trace = -1;
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	d->timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	lane_init(d);
	lane_config(d, &cfg);
}

/* client is a connection of uid, as conn_add makes one, without a socket. */
static struct conn *client(uint32_t uid)
{
	struct conn *c = calloc(1, sizeof(*c));

	c->uid = uid;
	c->u = user_get(&rtd, uid);
	c->u->conns++;
	c->fd = -1;
	c->refs = 1;
	c->next = rtd.conns;
	rtd.conns = c;
	return c;
}

/* send_req admits one SEND of plen bytes to 127.0.0.1:9 and returns the
 * reply's reason (R_NONE: admitted). */
static uint8_t send_req(struct conn *c, uint8_t flags, uint64_t deadline, size_t plen)
{
	static unsigned char req[WIRE_REQ + WIRE_MAX_PAYLOAD];
	struct reply rep = {0};
	int i;

	memset(req, 0, WIRE_REQ);
	req[0] = WIRE_VERSION;
	req[1] = WIRE_SEND;
	req[2] = flags;
	req[3] = 4;
	req[13] = 9;
	req[24] = 127;
	req[27] = 1;
	for (i = 0; i < 8; i++)
		req[16 + i] = (unsigned char)(deadline >> (56 - 8 * i));
	lane_admit(&rtd, c, req, WIRE_REQ + plen, &rep);
	return rep.type == WIRE_ADMIT ? R_NONE : rep.reason;
}

static void test_horizon(void)
{
	struct conn *c;
	int64_t now;

	setup(400, 1 << 20, 0);
	c = client(0);
	now = mono_now();
	CHECK(send_req(c, 0, 1ull << 63, 1) == R_BAD_DEADLINE, "INT64_MIN admitted");
	CHECK(send_req(c, 0, ~0ull, 1) == R_BAD_DEADLINE, "-1 admitted");
	CHECK(send_req(c, WIRE_FLAG_RELATIVE, 1ull << 54, 1) == R_BAD_DEADLINE, "a wrapping relative deadline");
	CHECK(send_req(c, WIRE_FLAG_RELATIVE, ~0ull, 1) == R_BAD_DEADLINE, "relative -1");
	CHECK(send_req(c, 0, (uint64_t)(now + DEADLINE_HORIZON_NS + 1000000000), 1) == R_BAD_DEADLINE, "beyond");
	CHECK(send_req(c, 0, (uint64_t)(now - 1000000), 1) == R_OWN_DEADLINE, "a past deadline");
	CHECK(send_req(c, WIRE_FLAG_RELATIVE, DEADLINE_HORIZON_NS / 1000, 1) == R_NONE, "at the horizon");
	CHECK(send_req(c, WIRE_FLAG_RELATIVE, 10000, 1) == R_NONE, "10 ms");
	CHECK(rtd.q.n == 2, "queue %u", rtd.q.n);
}

static void test_shares(void)
{
	struct conn *a, *b, *c, *o[4], *root;
	uint32_t i, n;
	int k;

	setup(400, 1 << 20, 0); /* slots: a connection 50, a uid 100, all uids but root 350 */
	a = client(1000);
	b = client(1000);
	c = client(1000);
	for (n = 0; send_req(a, WIRE_FLAG_RELATIVE, 30000000, 1) == R_NONE; n++)
		;
	CHECK(n == 50, "a connection got %u slots, want 50", n);
	CHECK(send_req(a, WIRE_FLAG_RELATIVE, 30000000, 1) == R_OVER_SHARE, "not over-share");
	for (n = 0; send_req(b, WIRE_FLAG_RELATIVE, 30000000, 1) == R_NONE; n++)
		;
	CHECK(n == 50, "a second connection got %u", n);
	CHECK(send_req(c, WIRE_FLAG_RELATIVE, 30000000, 1) == R_OVER_SHARE, "the uid's third connection admitted");
	for (k = 0; k < 4; k++) {
		o[k] = client(2000 + (uint32_t)k);
		for (i = 0; i < 50; i++)
			send_req(o[k], WIRE_FLAG_RELATIVE, 30000000, 1);
	}
	CHECK(rtd.others_slots == 300, "others hold %u", rtd.others_slots);
	CHECK(send_req(client(2000), WIRE_FLAG_RELATIVE, 30000000, 1) == R_NONE, "uid 2000's second connection");
	root = client(0);
	for (n = 0; send_req(root, WIRE_FLAG_RELATIVE, 30000000, 1) == R_NONE; n++)
		;
	CHECK(rtd.q.n == 400 && n == 400 - 301, "root got %u, queue %u", n, rtd.q.n);
	/* Bytes: a connection holds 1/8 of 4,096 chunks, 2 datagrams of 65,000 bytes. */
	setup(400, 1 << 20, 0);
	a = client(1000);
	for (n = 0; send_req(a, WIRE_FLAG_RELATIVE, 30000000, 65000) == R_NONE; n++)
		;
	CHECK(n == 2, "a connection queued %u of 65,000 bytes", n);
	CHECK(a->chunks == 2 * pool_chunks(65000), "held %u chunks", a->chunks);
	lane_flush(&rtd);
	CHECK(a->chunks == 0 && a->u->chunks == 0 && rtd.pool.nfree == rtd.pool.nchunks, "not all returned");
}

/* test_link_time: a connection not root's takes at most 1/8 of the
 * link's time up to its deadline (65,000-byte datagrams at 1 Gbit/s,
 * 520 µs each, counted 4.16 ms: at most 16 by 66.56 ms, a span no stall
 * of the test's makes its own deadline unmeetable); root takes the rest. */
static void test_link_time(void)
{
	struct conn *a, *root;
	int64_t d;
	uint32_t n, k;

	setup(400, 16 << 20, 0);
	a = client(1000);
	root = client(0);
	d = mono_now() + 66560000;
	for (n = 0; n < 30 && send_req(a, 0, (uint64_t)d, 64958) == R_NONE; n++)
		;
	CHECK(n >= 1 && n <= 16, "a connection took %u datagrams of 520 µs by 66.56 ms, its share 16", n);
	CHECK(send_req(a, 0, (uint64_t)d, 64958) == R_OVER_SHARE, "not over-share past its time");
	CHECK(send_req(a, 0, (uint64_t)d + 10000000, 64958) == R_NONE, "a later deadline refused");
	for (n = 0; n < 30 && send_req(root, 0, (uint64_t)d, 64958) == R_NONE; n++)
		;
	CHECK(n >= 30 - 18, "root took %u beside it", n);
	/* All uids but root: 7/8. Ten uids, a connection each (16 datagrams
	 * of 80 µs each by 10.24 ms), take at most 7/8 of it: 112 (the link
	 * itself about 118), however long the sends take. */
	setup(400, 4 << 20, 0);
	d = mono_now() + 10240000;
	for (k = 0, n = 0; k < 10; k++) {
		a = client(3000 + k);
		while (send_req(a, 0, (uint64_t)d, 9958) == R_NONE)
			n++;
	}
	CHECK(n >= 1 && n <= 112, "uids but root took %u datagrams of 80 µs by 10.24 ms, their share 112", n);
}

static void test_pool(void)
{
	static const uint32_t lens[] = {0, 1, 255, 256, 257, 4096, 65507};
	static unsigned char in[65507];
	struct pool p;
	uint32_t first[7], i, j;

	CHECK(pool_init(&p, 1 << 20) == 0, "pool_init");
	for (i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 7 + 1);
	for (i = 0; i < 7; i++) {
		struct iovec iov[POOL_IOV];
		size_t got = 0;
		int n;

		first[i] = pool_put(&p, in, lens[i]);
		n = pool_iov(&p, first[i], lens[i], iov, POOL_IOV);
		for (j = 0; j < (uint32_t)n; j++) {
			CHECK(!memcmp(iov[j].iov_base, in + got, iov[j].iov_len), "len %u: chunk %u differs", lens[i], j);
			got += iov[j].iov_len;
		}
		CHECK(got == lens[i], "len %u: the iovec holds %zu", lens[i], got);
	}
	for (i = 0; i < 7; i++)
		pool_release(&p, first[i]);
	CHECK(p.nfree == p.nchunks, "free %u of %u", p.nfree, p.nchunks);
	while (pool_put(&p, in, 65507) != POOL_END)
		;
	CHECK(p.nfree < pool_chunks(65507), "the pool took more than it had: %u free", p.nfree);
	pool_free(&p);
}

static void test_routes(void)
{
	struct dest dst = {.family = 4, .port = 9};
	struct conn *root, *c;
	int64_t now = mono_now();
	uint32_t i;
	int asked;

	setup(400, 1 << 20, 0);
	root = client(0);
	root->fd = 100; /* counted as a live connection; never used as a descriptor */
	drain(0);
	for (i = 0; i < 200; i++) {
		memcpy(dst.addr, &i, 4);
		route_class(&rtd, root, &dst, now);
	}
	CHECK(rtd.nroutes == ROUTES_MAX, "%u entries", rtd.nroutes);
	CHECK(drain(RTD_LOOKUP) == 200, "not asked once per new destination");
	for (i = 200 - ROUTES_MAX; i < 200; i++) { /* the newest are kept: hits, no question */
		memcpy(dst.addr, &i, 4);
		route_class(&rtd, root, &dst, now);
	}
	CHECK(drain(RTD_LOOKUP) == 0, "a kept destination asked again");
	c = client(1000);
	c->fd = 101;
	for (i = 1000; i < 1100; i++) {
		memcpy(dst.addr, &i, 4);
		route_class(&rtd, c, &dst, now);
	}
	CHECK(c->dests == ROUTES_MAX / SHARE_CONN, "a connection holds %u entries, share %u", c->dests, ROUTES_MAX / SHARE_CONN);
	routes_disown(&rtd, c);
	CHECK(c->dests == 0 && c->u->dests == 0, "disowned: %u %u", c->dests, c->u->dests);
	drain(0);
	routes_prune(&rtd, now + ROUTE_IDLE_NS + 1);
	CHECK(rtd.nroutes == 0, "%u entries after they aged", rtd.nroutes);
	asked = drain(RTD_FORGET);
	CHECK(asked == ROUTES_MAX, "the daemon told of %d forgotten, want %d", asked, ROUTES_MAX);
	root->fd = c->fd = -1;
}

static void test_pacing(void)
{
	struct conn *c, *root;
	int64_t now = mono_now();
	int n;

	setup(400, 1 << 20, 1000);
	c = client(1000);
	root = client(0);
	for (n = 0; n < 1000 && pace_charge(&rtd, c, now); n++)
		;
	CHECK(n == 64, "%d requests passed at once, want the burst, 64", n);
	CHECK(!pace_ready(&rtd, c, now) && c->wake > now, "ready with no tokens");
	CHECK(pace_ready(&rtd, c, c->wake), "not ready at its wake time");
	for (n = 0; n < 1000 && pace_charge(&rtd, root, now); n++)
		;
	CHECK(n == 1000, "root paced");
}

static void test_flows_and_flush(void)
{
	struct conn *c;
	uint32_t i, of5 = 0;
	uint64_t allocs;

	setup(400, 1 << 20, 0);
	for (i = 0; i < 100; i++)
		lane_flow(&rtd, 5, i);
	for (i = 0; i < rtd.nflows; i++)
		of5 += rtd.flowpool[i].v.uid == 5;
	CHECK(of5 == 65, "uid 5 has %u entries, want 64 and its shared one", of5);
	for (i = 0; i < 1000; i++)
		lane_flow(&rtd, 100 + i, 1);
	CHECK(rtd.nflows <= FLOWS_MAX + 1, "%u entries", rtd.nflows);
	c = client(1000);
	allocs = rtd_allocs;
	for (i = 0; i < 40; i++)
		send_req(c, WIRE_FLAG_RELATIVE, 30000000, i * 1000);
	lane_release(&rtd);
	drain(0);
	CHECK(rtd_allocs == allocs, "%llu allocations admitting and releasing", (unsigned long long)(rtd_allocs - allocs));
	lane_flush(&rtd);
	CHECK(rtd.totals.dropped_late == 0, "shutdown counted %llu late", (unsigned long long)rtd.totals.dropped_late);
	CHECK(rtd.q.n == 0 && rtd.pool.nfree == rtd.pool.nchunks && rtd.others_slots == 0, "not empty after the flush");
}

int main(void)
{
	test_horizon();
	test_shares();
	test_link_time();
	test_pool();
	test_routes();
	test_pacing();
	test_flows_and_flush();
	setup(1, 1 << 20, 0);
	pool_free(&rtd.pool);
	if (fails) {
		fprintf(stderr, "%d checks failed\n", fails);
		return 1;
	}
	printf("lanes-rtd core: all checks passed\n");
	return 0;
}
