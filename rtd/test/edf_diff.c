/* SPDX-License-Identifier: (Apache-2.0 OR BSD-2-Clause) */
/*
 * edf_diff.c - lanes-rtd's EDF queue (queue.c) driven by lines on stdin,
 * for internal/edf's TestRtdQueueMatchesReference, which runs the same
 * operations on the Reference and compares every answer. Each line in
 * gives one line out:
 *   a NOW D TX ID   admit          ->  REASON SLACK N BACKLOG
 *   p NOW           pop the head   ->  ID D TX LATE SLACK N BACKLOG, or "empty"
 *   k               peek           ->  ID D TX, or "empty"
 * SLACK is M_1 at NOW (0 when empty), N and BACKLOG the queue's length
 * and sum of T after the operation.
 * Entry ids are slots: the driver gives each admitted packet a free slot
 * and answers with the caller's ID.
 */
#include <stdio.h>

#include "rtd.h"

static struct edfq q;
static uint64_t ids[EDF_CAP];
static uint32_t free_slots[EDF_CAP], nfree;

int main(void)
{
	char line[256], op;
	long long now, d, tx;
	unsigned long long id;
	uint32_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	edfq_init(&q);
	for (i = EDF_CAP; i > 0; i--)
		free_slots[nfree++] = i - 1;
	while (fgets(line, sizeof(line), stdin)) {
		struct edf_ent e;
		int r;

		if (sscanf(line, "a %lld %lld %lld %llu", &now, &d, &tx, &id) == 4) {
			uint32_t slot = nfree ? free_slots[nfree - 1] : 0;

			r = nfree ? edfq_admit(&q, now, d, tx, slot) : EDF_FULL;
			if (r == EDF_ADMITTED) {
				nfree--;
				ids[slot] = id;
			}
			printf("%d %lld %u %lld\n", r, (long long)edfq_slack(&q, now), q.n, (long long)q.backlog);
		} else if (sscanf(line, "%c %lld", &op, &now) == 2 && op == 'p') {
			r = edfq_pop(&q, now, &e);
			if (r < 0) {
				printf("empty\n");
				continue;
			}
			free_slots[nfree++] = (uint32_t)e.id;
			printf("%llu %lld %lld %d %lld %u %lld\n", (unsigned long long)ids[e.id], (long long)e.d, (long long)e.tx,
			       r, (long long)edfq_slack(&q, now), q.n, (long long)q.backlog);
		} else if (line[0] == 'k') {
			if (edfq_peek(&q, &e) < 0)
				printf("empty\n");
			else
				printf("%llu %lld %lld\n", (unsigned long long)ids[e.id], (long long)e.d, (long long)e.tx);
		} else {
			fprintf(stderr, "edf_diff: bad line: %s", line);
			return 2;
		}
	}
	return 0;
}
