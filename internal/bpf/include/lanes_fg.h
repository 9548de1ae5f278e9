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
	__u32 gap;      /* ns: the time between stamps, a maximum that decays */
	__u32 quiet;    /* ns: how long after its last stamp it is quiet */
};

#define FG_WINDOW_NS 100000000ULL
#define FG_MIN_PACKETS 5
#define FG_MIN_BYTES 6000
#define FG_HOLD_NS 500000000ULL
/* A present foreground is quiet (sends nothing now: a video between its
 * segments) once its last stamp is FG_QUIET_GAPS gaps between its stamps
 * old (fg_window.gap: each stamp's interval raises it, each stamp takes
 * 1/FG_GAP_DECAY off it), within [FG_QUIET_MIN_NS, FG_QUIET_NS]. A
 * window's first FG_MIN_PACKETS - 1 packets stamp nothing, so a steady
 * foreground's stamps are up to FG_MIN_PACKETS packets apart: hence one
 * gap more. A new episode starts at FG_QUIET_NS, its pattern unknown; a
 * 50 packets/s call's stamps keep it there. A download's ACK clock (a
 * stamp every 1-3 ms) brings it to the minimum within a few dozen stamps;
 * a round trip's wait (a slow start's, a page's request) raises it past
 * the round trip. */
#define FG_QUIET_NS 150000000ULL
#define FG_QUIET_MIN_NS 20000000ULL
#define FG_QUIET_GAPS (FG_MIN_PACKETS + 1)
#define FG_GAP_DECAY 8

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

/* fg_quiet_after is how long after its last stamp w's foreground is quiet
 * to a background flow in direction up (1) or down (0). The device sees a
 * download end after the bottleneck (its last ACK leaves when the data
 * has arrived): w->quiet, which the classifier measures at each stamp
 * (FG_QUIET_NS before it has). An upload's last packet leaves the device
 * ahead of its queue at the bottleneck (80-110 ms at a video segment's
 * end): FG_QUIET_NS; measured there, a TCP upload beside a video upload
 * kept 0.68-0.69 of the idle capacity against 0.71-0.73 (three runs). */
static __always_inline __u64 fg_quiet_after(const struct fg_window *w, int up)
{
	return w->quiet && !up ? w->quiet : FG_QUIET_NS;
}

/* fg_quiet says whether a foreground sent on interface idx recently and
 * has been quiet since (fg_quiet_after: a video between its segments), to
 * a background flow in direction up: the link between its bursts, which
 * background takes back at the window the link carries (ledbat.c's
 * lb_link_window, rledbat.h's rl_link_wnd). */
static __always_inline int fg_quiet(__u32 idx, __u64 now, int up)
{
	struct fg_window *w = bpf_map_lookup_elem(&lanes_fg_active, &idx);

	return w && w->active && now - w->active >= fg_quiet_after(w, up) && now - w->active < FG_RECENT_NS;
}

/* fg_held says whether the foreground is present on interface idx (0:
 * any) at now: its stamp is younger than FG_HOLD_NS. */
static __always_inline int fg_held(__u32 idx, __u64 now)
{
	struct fg_window *w = bpf_map_lookup_elem(&lanes_fg_active, &idx);

	return w && w->active && now - w->active < FG_HOLD_NS;
}

#endif
