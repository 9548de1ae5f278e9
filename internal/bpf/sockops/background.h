/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * background.h - a socket entering and leaving the background lane:
 * TCP_NOTSENT_LOWAT = CFG.notsent_lowat so that its own unsent data stays
 * small, the switch to CFG.bg_cc_name (LEDBAT++) whatever it ran, and on
 * leaving both given back. Included by sockops.c.
 *
 * The pieces that call bpf_setsockopt take the context as void *: the
 * sock_ops callbacks hand their struct bpf_sock_ops, the live-move iterator
 * (lanes_live_cc) its locked struct sock; the helper accepts both, and
 * each call site is inlined with its own context type for the verifier.
 */
#ifndef LANES_SOCKOPS_BACKGROUND_H
#define LANES_SOCKOPS_BACKGROUND_H

/* apply_lowat gives a background socket TCP_NOTSENT_LOWAT =
 * CFG.notsent_lowat, once (remembered in st). */
static __always_inline void apply_lowat(void *ctx, struct sk_state *st)
{
	int val;

	if (!CFG.notsent_lowat || st->lowat_set)
		return;
	val = CFG.notsent_lowat;
	if (bpf_setsockopt(ctx, SOL_TCP, TCP_NOTSENT_LOWAT, &val, sizeof(val)) == 0) {
		st->lowat_set = 1;
		bump(OPS_NOTSENT_LOWAT);
	} else {
		bump(OPS_SETSOCKOPT_ERR);
	}
}

/* set_lowat is apply_lowat at a callback (the socket storage created only
 * where there is a value to set). */
static __always_inline void set_lowat(struct bpf_sock_ops *ops)
{
	struct sk_state *st;

	if (!CFG.notsent_lowat)
		return;
	st = sock_state(ops, BPF_SK_STORAGE_GET_F_CREATE);
	if (st)
		apply_lowat(ops, st);
}

/* bg_cc_apply keeps the socket's congestion control in st->orig_cc and
 * sets CFG.bg_cc_name; the bpf_setsockopt's result. */
static __always_inline int bg_cc_apply(void *ctx, struct sk_state *st)
{
	char want[CC_NAME_LEN] = {};
	int err;

	if (bpf_getsockopt(ctx, SOL_TCP, TCP_CONGESTION, st->orig_cc, sizeof(st->orig_cc)))
		st->orig_cc[0] = 0;
	/* volatile reads: a plain copy of a const global gets folded to its
	 * all-zero initializer */
	for (int i = 0; i < CC_NAME_LEN; i++)
		want[i] = CFG.bg_cc_name[i];
	err = bpf_setsockopt(ctx, SOL_TCP, TCP_CONGESTION, want, sizeof(want));
	bump(err ? OPS_CC_SWITCH_ERR : OPS_BG_CC);
	return err;
}

/* bg_cc_mark marks st as switched to the background congestion control:
 * LEDBAT++ enforces the cwnd clamp itself, so a cap never switches it on
 * to capcc (cc_checked); the cookie is for lanes_setsockopt. */
static __always_inline void bg_cc_mark(struct sk_state *st, __u64 cookie)
{
	st->bg_cc = 1;
	st->cc_checked = 1;
	st->cookie = cookie;
}

/* switch_bg_cc moves a background socket to CFG.bg_cc_name (LEDBAT++), once
 * per socket, whatever it ran: a background flow must yield at any
 * bottleneck, not only at lanes' own queue. Marked first: a refused switch
 * is not tried again at the next callback. */
static __always_inline void switch_bg_cc(struct bpf_sock_ops *ops, __u64 cookie)
{
	struct sk_state *st;

	if (!CFG.bg_cc_name[0])
		return;
	st = sock_state(ops, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st || st->bg_cc)
		return;
	bg_cc_mark(st, cookie);
	bg_cc_apply(ops, st);
}

/* leave_background gives a socket that left the background lane (a process
 * or cgroup moved back, a rule removed) what it had before: the congestion
 * control its app asked for meanwhile, else the one it ran before LEDBAT++;
 * TCP_NOTSENT_LOWAT 0 (the sysctl's default); the capcc check again. The
 * receive window rLEDBAT clamped is released by rledbat_leave at the next
 * segment the socket sends. */
static __always_inline void leave_background(void *ctx, struct sk_state *st, __u64 cookie)
{
	char want[CC_NAME_LEN] = {};
	int zero = 0;

	if (!(st->bg_cc || st->lowat_set))
		return;
	if (st->bg_cc) {
		if (st->app_cc[0])
			__builtin_memcpy(want, st->app_cc, CC_NAME_LEN);
		else
			__builtin_memcpy(want, st->orig_cc, CC_NAME_LEN);
		want[CC_NAME_LEN - 1] = 0;
		/* bg_cc cleared first: lanes_setsockopt lets the name through */
		st->bg_cc = 0;
		if (want[0] && bpf_setsockopt(ctx, SOL_TCP, TCP_CONGESTION, want, sizeof(want)))
			bump(OPS_CC_SWITCH_ERR);
		st->app_cc[0] = 0;
		bpf_map_delete_elem(&lanes_app_cc, &cookie);
	}
	if (st->lowat_set) {
		st->lowat_set = 0;
		if (bpf_setsockopt(ctx, SOL_TCP, TCP_NOTSENT_LOWAT, &zero, sizeof(zero)))
			bump(OPS_SETSOCKOPT_ERR);
	}
	st->cc_checked = 0;
	bump(OPS_BG_LEFT);
}

#endif
