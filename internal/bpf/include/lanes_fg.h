/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_fg.h - the foreground's presence per egress interface, as the
 * classifier stamps it (lanes_fg_active), and the queuing-delay target a
 * background flow keeps beside it. Included by lanes_maps.h (classifier,
 * sock_ops) and by the LEDBAT++ congestion control, which the Go loader
 * hands the classifier's map (MapReplacements), so all see the same state.
 *
 * The foreground is *present* on an interface while its stamp is younger
 * than FG_HOLD_NS. Present is not harmed: beside a present foreground a
 * background flow keeps its queue at FG_SHARE_TARGET(target) instead of the
 * target (LEDBAT++ and rLEDBAT), and it is held at the minimum window only
 * while the foreground is harmed or a foreground connection has just
 * opened (lanes_maps.h, fg_yield).
 *
 * The stamp: a window of FG_WINDOW_NS opens at a foreground packet; the
 * interface is active from the packet that brings the window to
 * FG_MIN_PACKETS packets or FG_MIN_BYTES bytes (50 packets/s or 480 kbit/s:
 * a ping every 50 ms or a coop announcement is not foreground activity, an
 * interactive transfer's data or ACK clock is), and every later packet of
 * an active window stamps it again. Key 0 is stamped with any interface:
 * it stands for the sockets whose interface cannot be told.
 */
#ifndef LANES_FG_H
#define LANES_FG_H

#include <linux/types.h>
#include <linux/bpf.h>
#include "lanes_form.h"

struct fg_window {
	__u64 start;    /* the window's first packet, bpf_ktime_get_ns */
	__u64 active;   /* the last stamp, 0: never */
	__u64 since;    /* the current episode's first stamp */
	__u64 episodes; /* stamps after a quiet of FG_HOLD_NS or more */
	__u32 packets;  /* in the window */
	__u32 bytes;
};

#define FG_WINDOW_NS 100000000ULL
#define FG_MIN_PACKETS 5
#define FG_MIN_BYTES 6000
#define FG_HOLD_NS 500000000ULL
/* FG_QUIET_NS: a present foreground whose last stamp is older sends
 * nothing now (a video between segments); longer than a steady one's gap
 * between stamps (a 50 packets/s call: up to a window, 100 ms) */
#define FG_QUIET_NS 150000000ULL

/* FG_SHARE_TARGET is the queuing-delay target of a background flow beside
 * a present foreground: a quarter of its own (2.5 ms at the default 10 ms),
 * at least FG_SHARE_MIN_US. */
#define FG_SHARE_MIN_US 1000
#define FG_SHARE_TARGET(t) ((t) / 4 > FG_SHARE_MIN_US ? (t) / 4 : ((t) < FG_SHARE_MIN_US ? (t) : FG_SHARE_MIN_US))

LANES_MAP(lanes_fg_active,
	  BPF_MAP_TYPE_HASH,
	  1024,
	  __u32,
	  struct fg_window
);

/* FG_RECENT_NS: a foreground whose last stamp is younger sent recently
 * (the account's capacity halves as often: LINK_RATE_HALF_NS); after it a
 * background flow finds the link by its own delay alone. */
#define FG_RECENT_NS 10000000000ULL

/* fg_quiet says whether a foreground sent on interface idx recently and
 * has been quiet FG_QUIET_NS since (a video between its segments): the
 * link between its bursts, which background takes back at the window the
 * link carries (ledbat.c's lb_link_window, rledbat.h's rl_link_wnd). */
static __always_inline int fg_quiet(__u32 idx, __u64 now)
{
	struct fg_window *w = bpf_map_lookup_elem(&lanes_fg_active, &idx);

	return w && w->active && now - w->active >= FG_QUIET_NS && now - w->active < FG_RECENT_NS;
}

/* fg_held says whether the foreground is present on interface idx (0:
 * any) at now: its stamp is younger than FG_HOLD_NS. */
static __always_inline int fg_held(__u32 idx, __u64 now)
{
	struct fg_window *w = bpf_map_lookup_elem(&lanes_fg_active, &idx);

	return w && w->active && now - w->active < FG_HOLD_NS;
}

#endif
