/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * pace.c - clients' requests paced before any real-time work: a token
 * bucket per uid not root (cfg.requests per second, PACE_BURST ahead) and
 * one per connection (half that rate), so that one granted client looping
 * requests on many connections costs lanes-rtd, which runs at SCHED_FIFO,
 * a bounded share of a CPU. Root is not paced.
 *
 * A bucket is the time it is empty at (GCRA): a request read at now moves
 * it to max(at, now) + interval; past now + PACE_BURST * interval the
 * connection is out of tokens. A connection out of tokens is not read (nor watched: epoll is
 * level-triggered) until its wake time: its requests wait in its socket,
 * the client's sends block or fail EAGAIN, and nothing of the daemon's
 * work is spent on them. The loop wakes at the earliest wake time.
 */
#include "rtd.h"

#define PACE_BURST 64

static int64_t interval(uint32_t per_s) { return per_s ? 1000000000ll / per_s : 0; }

/* pace_ready says whether c may be read at now: both its buckets within
 * their burst; else c->wake is when they will be. */
int pace_ready(struct rtd *d, struct conn *c, int64_t now)
{
	int64_t iu = interval(d->cfg.requests), ic = interval(share(d->cfg.requests, 2)), wu, wc;

	if (!d->cfg.requests || c->uid == 0)
		return 1;
	wu = c->u->tokens_at - PACE_BURST * iu;
	wc = c->tokens_at - PACE_BURST * ic;
	c->wake = wu > wc ? wu : wc;
	return c->wake <= now;
}

/* pace_charge charges a request read at now to c's buckets; 0 if either
 * is then over its burst (c is not read again before c->wake). */
int pace_charge(struct rtd *d, struct conn *c, int64_t now)
{
	int64_t iu = interval(d->cfg.requests), ic = interval(share(d->cfg.requests, 2)), wu, wc;

	if (!d->cfg.requests || c->uid == 0)
		return 1;
	c->u->tokens_at = (c->u->tokens_at > now ? c->u->tokens_at : now) + iu;
	c->tokens_at = (c->tokens_at > now ? c->tokens_at : now) + ic;
	wu = c->u->tokens_at - PACE_BURST * iu;
	wc = c->tokens_at - PACE_BURST * ic;
	c->wake = wu > wc ? wu : wc;
	return c->wake <= now;
}

/* pace_wake is the earliest wake time of the throttled connections, 0 if
 * none. */
int64_t pace_wake(struct rtd *d, int64_t now)
{
	struct conn *c;
	int64_t w = 0;

	(void)now;
	for (c = d->throttled; c; c = c->tnext)
		if (!w || c->wake < w)
			w = c->wake;
	return w;
}
