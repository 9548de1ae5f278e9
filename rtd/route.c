/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * route.c - the destinations' egress classes, as the daemon answers them:
 * whether a destination's device has the lanes tree (send in the realtime
 * class) or not; until the answer comes, the guess.
 *
 * Data structure: ROUTES_MAX entries in a fixed array, found through a
 * hash table (keyed with a random seed, so that no client can choose
 * colliding addresses) and kept in a list from the newest used to the
 * oldest. Every operation on the send path is O(1):
 *   - a known destination: one bucket's chain, moved to the front;
 *   - a new one: an entry taken from the free list, or the oldest
 *     dropped; the daemon is asked (RTD_LOOKUP), again after
 *     ROUTE_ASK_NS without an answer (a busy daemon drops questions);
 *   - an entry unused for ROUTE_IDLE_NS is forgotten (routes_prune, from
 *     the loop), and the daemon told (RTD_FORGET) so that it stops
 *     re-resolving it.
 * A connection not root's holds at most 1/SHARE_CONN of the entries, a
 * uid 1/SHARE_UID; past that its new destinations get the guess and no
 * entry (they still go out), so a flood of destinations never pins the
 * table: the others' entries displace its oldest.
 */
#include <string.h>

#include "rtd.h"

void routes_init(struct rtd *d, uint64_t seed)
{
	uint32_t i;

	memset(d->rbucket, 0, sizeof(d->rbucket));
	d->rfree = NULL;
	d->newest = d->oldest = NULL;
	d->nroutes = 0;
	d->rseed = seed | 1;
	for (i = ROUTES_MAX; i > 0; i--) {
		d->routes[i - 1].hnext = d->rfree;
		d->rfree = &d->routes[i - 1];
	}
}

static size_t alen(uint8_t family) { return family == 4 ? 4 : 16; }

static uint32_t rhash(const struct rtd *d, uint8_t family, const uint8_t *addr)
{
	uint64_t h = d->rseed ^ family;
	size_t i;

	for (i = 0; i < alen(family); i++) {
		h ^= addr[i];
		h *= 0x100000001b3ull; /* FNV-1a over the seed */
	}
	h ^= h >> 29;
	h *= d->rseed;
	return (uint32_t)(h >> 32) % ROUTE_BUCKETS;
}

static struct route *route_find(struct rtd *d, uint8_t family, const uint8_t *addr)
{
	struct route *r;

	for (r = d->rbucket[rhash(d, family, addr)]; r; r = r->hnext)
		if (r->r.family == family && !memcmp(r->r.addr, addr, alen(family)))
			return r;
	return NULL;
}

static void unlink_lru(struct rtd *d, struct route *r)
{
	if (r->older)
		r->older->newer = r->newer;
	else
		d->oldest = r->newer;
	if (r->newer)
		r->newer->older = r->older;
	else
		d->newest = r->older;
	r->older = r->newer = NULL;
}

static void push_newest(struct rtd *d, struct route *r)
{
	r->older = d->newest;
	r->newer = NULL;
	if (d->newest)
		d->newest->newer = r;
	d->newest = r;
	if (!d->oldest)
		d->oldest = r;
}

/* disown stops counting r against its connection and uid. */
static void disown(struct rtd *d, struct route *r)
{
	struct conn *c = r->owner;

	if (!c)
		return;
	r->owner = NULL;
	c->dests--;
	c->u->dests--;
	user_check(d, c->u);
}

/* drop removes r from the table and tells the daemon. */
static void drop(struct rtd *d, struct route *r)
{
	struct route **pp;
	struct rtd_route m = r->r;

	disown(d, r);
	for (pp = &d->rbucket[rhash(d, r->r.family, r->r.addr)]; *pp; pp = &(*pp)->hnext)
		if (*pp == r) {
			*pp = r->hnext;
			break;
		}
	unlink_lru(d, r);
	r->hnext = d->rfree;
	d->rfree = r;
	d->nroutes--;
	m.h.type = RTD_FORGET;
	m.h.conn = 0;
	ctl_send(d, &m, sizeof(m));
}

/* over_share says that c may not add a destination. */
static int over_share(const struct conn *c)
{
	if (!c || c->uid == 0)
		return 0;
	return c->dests >= share(ROUTES_MAX, SHARE_CONN) || c->u->dests >= share(ROUTES_MAX, SHARE_UID);
}

/* route_class says whether dst's egress device has the lanes tree: the
 * daemon's answer, or the guess while it is asked. c is the connection
 * whose datagram goes there (its share), NULL if it has ended. */
int route_class(struct rtd *d, struct conn *c, const struct dest *dst, int64_t now)
{
	struct route *r = route_find(d, dst->family, dst->addr);
	uint32_t b;

	if (r) {
		r->used = now;
		unlink_lru(d, r);
		push_newest(d, r);
		if (r->asked && now - r->asked > ROUTE_ASK_NS) { /* the daemon was busy: it dropped the question */
			r->asked = now;
			ctl_send(d, &r->r, sizeof(r->r));
		}
		return r->asked ? d->guess : r->r.cls;
	}
	if (c && c->fd < 0)
		c = NULL;
	if (over_share(c))
		return d->guess;
	if (!d->rfree)
		drop(d, d->oldest);
	r = d->rfree;
	d->rfree = r->hnext;
	memset(r, 0, sizeof(*r));
	r->r.h.type = RTD_LOOKUP;
	r->r.family = dst->family;
	memcpy(r->r.addr, dst->addr, alen(dst->family));
	r->asked = now;
	r->used = now;
	b = rhash(d, dst->family, dst->addr);
	r->hnext = d->rbucket[b];
	d->rbucket[b] = r;
	push_newest(d, r);
	d->nroutes++;
	if (c && c->uid != 0) {
		r->owner = c;
		c->dests++;
		c->u->dests++;
	}
	ctl_send(d, &r->r, sizeof(r->r));
	return d->guess;
}

/* route_answer takes the daemon's answer for one destination (family 0:
 * the guess). */
void route_answer(struct rtd *d, const struct rtd_route *in)
{
	struct route *r;

	if (!in->family) {
		d->guess = in->cls;
		return;
	}
	if (in->family != 4 && in->family != 6)
		return;
	if ((r = route_find(d, in->family, in->addr))) {
		r->r.cls = in->cls;
		r->asked = 0;
	}
}

/* routes_disown is called as c ends: its entries stay, counted against
 * no one. O(ROUTES_MAX), once per connection that added any. */
void routes_disown(struct rtd *d, struct conn *c)
{
	uint32_t i;

	for (i = 0; i < ROUTES_MAX && c->dests; i++)
		if (d->routes[i].owner == c)
			disown(d, &d->routes[i]);
}

/* routes_prune forgets the entries unused for ROUTE_IDLE_NS, oldest
 * first. */
void routes_prune(struct rtd *d, int64_t now)
{
	while (d->oldest && now - d->oldest->used > ROUTE_IDLE_NS)
		drop(d, d->oldest);
}
