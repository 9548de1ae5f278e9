//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * edf_step.c - one operation of edf_core.h (admit or pop) on a queue kept
 * in a one-entry array map, run by BPF_PROG_TEST_RUN as a socket filter, so
 * the tests compare the qdisc's own arithmetic, run by the kernel, with
 * internal/edf's reference decision by decision (BPF_PROG_TEST_RUN cannot
 * run a qdisc; a socket filter runs on every kernel lanes supports; the
 * packet the test run needs is ignored).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "edf_core.h"

char __license[] SEC("license") = "GPL";

enum edf_step_op {
	EDF_STEP_ADMIT = 0,
	EDF_STEP_POP = 1,
};

struct edf_step {
	struct edf_queue q;
	__s64 now;
	struct edf_ent in; /* the packet to admit */
	__u32 op;
	__s32 ret;         /* admit: edf_reason; pop: -1 empty, 1 late, 0 on time */
	struct edf_ent out; /* the popped packet */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct edf_step);
} lanes_edf_step SEC(".maps");

SEC("socket")
int edf_run(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct edf_step *s = bpf_map_lookup_elem(&lanes_edf_step, &zero);

	if (!s)
		return 2;
	switch (s->op) {
	case EDF_STEP_ADMIT:
		s->ret = edf_admit(&s->q, s->now, s->in.d, s->in.tx, s->in.id);
		break;
	case EDF_STEP_POP:
		s->ret = edf_pop(&s->q, s->now, &s->out);
		break;
	default:
		return 1;
	}
	return 0;
}
