/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * linkrate.h - the upload direction's capacity per interface
 * (lanes_link_rate, lanes_linkrate.h), which the yield's hold is a share of (cwndcap.h,
 * which also raises it from its sockets' delivery rates) and an opening's
 * hold lasts the first flight of (yield.h). Included by sockops.c.
 */

/* The yield's hold is at most a small share of what the link carries: 2
 * segments a round trip are the whole of a 0.2 Mbit/s link. The upload
 * direction's capacity per interface (lanes_link_rate) is a windowed,
 * decaying maximum of its sockets' delivery rates (a held background
 * socket's left out): raised by a rate at or above it, halved every
 * LINK_RATE_HALF_NS without one. A held socket is paced at
 * 1/HOLD_RATE_DIV of it (at least a segment a second) where it is known;
 * beyond the hold TCP paces itself as before (pace).
 * A socket's rate is its bytes acked over at least LINK_RATE_WIN_NS and a
 * smoothed RTT (timed by their sending where that took longer than their
 * ACKs' arrival: window_rate), not the kernel's last rate sample: a sample covers as
 * little as the path's minimum RTT, microseconds on a LAN, in which a
 * token bucket's burst passes at the device's speed (3.6 Gbit/s read past
 * a 10 Mbit/s TBF with a 15 KB burst). Over 100 ms that burst is 0.12 of
 * a 10 Mbit/s link's bytes. */
#include "lanes_linkrate.h"

#define LINK_RATE_WIN_NS 100000000ULL
