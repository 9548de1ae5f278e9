/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * pool.c - what lanes-rtd holds for its clients, in memory allocated once:
 * the payload pool and the users' table.
 *
 *   pool   max_queue_bytes in POOL_CHUNK-byte chunks, allocated (and
 *          locked: mlockall) at the first configuration; a datagram takes
 *          ceil(len / POOL_CHUNK) chunks chained by index, sent with one
 *          iovec per chunk. Taking and returning chunks is O(chunks).
 *   users  a uid's connections, queued slots and bytes, counters entries
 *          and destinations (its shares, rtd.h) and its pacing bucket: a
 *          hash table over a fixed array, an entry freed when it holds
 *          nothing.
 *
 * Note: chunks rather than one arena of variable blocks: EDF releases in
 * deadline order, not in arrival order, so a ring would fragment, and a
 * fixed chunk size makes every allocation O(1) per chunk with no search.
 * A 1-byte datagram wastes 255 bytes; the shares count chunks, so what a
 * client wastes is its own.
 */
#include <string.h>

#include "rtd.h"

uint32_t pool_chunks(uint32_t len) { return len ? (len + POOL_CHUNK - 1) / POOL_CHUNK : 1; }

/* pool_init allocates a pool of bytes (rounded down to chunks); 0 or -1. */
int pool_init(struct pool *p, uint32_t bytes)
{
	uint32_t n = bytes / POOL_CHUNK, i;

	memset(p, 0, sizeof(*p));
	if (!n)
		return -1;
	p->mem = malloc((size_t)n * POOL_CHUNK);
	p->next = malloc((size_t)n * sizeof(uint32_t));
	if (!p->mem || !p->next) {
		pool_free(p);
		return -1;
	}
	for (i = 0; i < n; i++)
		p->next[i] = i + 1 < n ? i + 1 : POOL_END;
	p->free = 0;
	p->nfree = p->nchunks = n;
	return 0;
}

void pool_free(struct pool *p)
{
	free(p->mem);
	free(p->next);
	memset(p, 0, sizeof(*p));
}

/* pool_put copies len bytes into a chain of chunks and returns its first,
 * or POOL_END if the pool has too few free (the caller checks first). */
uint32_t pool_put(struct pool *p, const unsigned char *b, uint32_t len)
{
	uint32_t need = pool_chunks(len), first = p->free, k = first, last = first, i;

	if (need > p->nfree)
		return POOL_END;
	for (i = 0; i < need; i++) {
		uint32_t n = len - i * POOL_CHUNK < POOL_CHUNK ? len - i * POOL_CHUNK : POOL_CHUNK;

		if (len)
			memcpy(p->mem + (size_t)k * POOL_CHUNK, b + (size_t)i * POOL_CHUNK, n);
		last = k;
		k = p->next[k];
	}
	p->free = k;
	p->next[last] = POOL_END;
	p->nfree -= need;
	return first;
}

/* pool_release returns a chain to the free list. */
void pool_release(struct pool *p, uint32_t chunk)
{
	while (chunk != POOL_END) {
		uint32_t next = p->next[chunk];

		p->next[chunk] = p->free;
		p->free = chunk;
		p->nfree++;
		chunk = next;
	}
}

/* pool_iov describes a chain of len bytes in iov (at most max entries);
 * it returns the number used. */
int pool_iov(const struct pool *p, uint32_t chunk, uint32_t len, struct iovec *iov, int max)
{
	int n = 0;

	while (chunk != POOL_END && n < max) {
		uint32_t l = len < POOL_CHUNK ? len : POOL_CHUNK;

		iov[n].iov_base = p->mem + (size_t)chunk * POOL_CHUNK;
		iov[n].iov_len = l;
		n++;
		len -= l;
		chunk = p->next[chunk];
	}
	return n;
}

void users_init(struct rtd *d)
{
	uint32_t i;

	memset(d->ubucket, 0, sizeof(d->ubucket));
	d->ufree = NULL;
	for (i = USERS_MAX; i > 0; i--) {
		d->users[i - 1].next = d->ufree;
		d->ufree = &d->users[i - 1];
	}
}

static uint32_t ubucket(uint32_t uid) { return (uid * 2654435761u) % (sizeof(((struct rtd *)0)->ubucket) / sizeof(void *)); }

/* user_get returns uid's entry, made if new; NULL if the table is full. */
struct user *user_get(struct rtd *d, uint32_t uid)
{
	uint32_t b = ubucket(uid);
	struct user *u;

	for (u = d->ubucket[b]; u; u = u->next)
		if (u->uid == uid)
			return u;
	if (!(u = d->ufree))
		return NULL;
	d->ufree = u->next;
	memset(u, 0, sizeof(*u));
	u->uid = uid;
	u->next = d->ubucket[b];
	d->ubucket[b] = u;
	return u;
}

/* user_check frees u's entry if it holds nothing any more. */
void user_check(struct rtd *d, struct user *u)
{
	struct user **pp;

	if (u->conns || u->slots || u->chunks || u->flows || u->dests)
		return;
	for (pp = &d->ubucket[ubucket(u->uid)]; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	u->next = d->ufree;
	d->ufree = u;
}
