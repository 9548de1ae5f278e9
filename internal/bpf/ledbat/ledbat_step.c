//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ledbat_step.c - one LEDBAT++ operation (ledbat_core.h) on a state kept in
 * a one-entry array map, run by BPF_PROG_TEST_RUN as a socket filter, so
 * tests run the congestion control's own arithmetic through the kernel
 * (BPF_PROG_TEST_RUN cannot run a struct_ops congestion control) and compare
 * it with the Go reference model, step by step. (A map, not the context:
 * the context takes constant offsets only. A socket filter, not a syscall
 * program: those came in 5.14, and the arithmetic is checked on 5.10 too;
 * the packet the test run needs is ignored.)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "ledbat_core.h"

char __license[] SEC("license") = "GPL";

enum step_op {
	STEP_INIT = 0, /* arg = target_us */
	STEP_RTT = 1,  /* arg = rtt_us, srtt_us = other_us (ledbat_rtt) */
	STEP_ACK = 2,  /* arg = packets acked */
	STEP_LOSS = 3, /* win.ssthresh = the returned ssthresh */
	STEP_SLOWDOWN_NOW = 4,
	STEP_SHARE = 5, /* arg = target_us, share = LEDBAT_F_SHARE_* */
	STEP_KEEP_RATE = 6, /* arg = sother before the last sample, limited = present (ledbat_keep_rate) */
};

struct ledbat_step {
	struct ledbat st;
	struct ledbat_win win;
	__u64 now_us;
	__u32 op;
	__u32 arg;
	__u32 srtt_us;
	__u32 limited;
	/* out, after the operation */
	__u32 base_us;
	__u32 current_us;
	__u32 gain_div;
	__u32 share; /* in: STEP_SHARE's flags */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ledbat_step);
} lanes_ledbat_step SEC(".maps");

SEC("socket")
int ledbat_run(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct ledbat_step *s = bpf_map_lookup_elem(&lanes_ledbat_step, &zero);

	if (!s)
		return 2;
	switch (s->op) {
	case STEP_INIT:
		ledbat_init(&s->st, s->arg, s->now_us);
		break;
	case STEP_RTT:
		ledbat_rtt(&s->st, s->arg, s->srtt_us, s->now_us);
		break;
	case STEP_ACK:
		ledbat_ack(&s->st, &s->win, s->arg, (__u32)s->now_us, s->srtt_us, s->limited);
		break;
	case STEP_LOSS:
		s->win.ssthresh = ledbat_loss(&s->st, s->win.cwnd, (__u32)s->now_us, s->srtt_us);
		break;
	case STEP_SLOWDOWN_NOW:
		ledbat_slowdown_now(&s->st, (__u32)s->now_us);
		break;
	case STEP_SHARE:
		ledbat_share(&s->st, s->arg, s->share);
		break;
	case STEP_KEEP_RATE:
		ledbat_keep_rate(&s->st, &s->win, s->arg, s->limited);
		break;
	default:
		return 1;
	}
	s->base_us = ledbat_base(&s->st);
	s->current_us = ledbat_current(&s->st);
	s->gain_div = ledbat_gain_div(s->st.target_us, s->base_us);
	return 0;
}
