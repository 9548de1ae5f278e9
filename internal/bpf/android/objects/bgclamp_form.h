/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* bgclamp_form.h: the background upload's LEDBAT++ cwnd clamp in the
 * Android form, for the sock_ops objects that run it (bgclamp.c,
 * sockops.c): bgc_step (internal/bpf/sockops/bgclamp_core.h, lanes' own
 * arithmetic) on a socket's state by cookie in a bpf_map_def LRU hash
 * (socket storage needs BTF), and TCP_BPF_SNDCWND_CLAMP when the window
 * changed. The cwnd-limited flag needs CO-RE: growth waits only for cwnd
 * to reach the window. No foreground presence reaches this form, so the
 * clamp never shares (share flags 0, the full target). */
#ifndef LANES_BGCLAMP_FORM_H
#define LANES_BGCLAMP_FORM_H

#include "android_form.h"
#include "../../sockops/bgclamp_core.h"

#ifndef SOL_TCP
#define SOL_TCP 6
#endif
#define TCP_BPF_SNDCWND_CLAMP 1002

ANDROID_MAP(bgc_state, BPF_MAP_TYPE_LRU_HASH, __u64, struct bgc_state, 4096);
ANDROID_MAP(bgc_joins, BPF_MAP_TYPE_ARRAY, __u32, __u32, 1);

/* bgc_clamp runs bgc_step for a background socket and applies its window. */
static __always_inline void bgc_clamp(struct bpf_sock_ops *ops, __u64 cookie, __u32 target)
{
	struct bgc_state fresh = {}, *st;
	__u32 zero = 0;
	int val;

	st = bpf_map_lookup_elem(&bgc_state, &cookie);
	if (!st) {
		bpf_map_update_elem(&bgc_state, &cookie, &fresh, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&bgc_state, &cookie);
		if (!st)
			return;
	}
	bgc_step(st, ops, target, 0, 1, bpf_map_lookup_elem(&bgc_joins, &zero));
	if (st->cwnd == st->applied)
		return;
	val = st->cwnd;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &val, sizeof(val)) == 0)
		st->applied = st->cwnd;
}

#endif
