/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_owd.h - each direction's queue from TCP timestamps (RFC 7323), so
 * that a socket tells the upload's queue from the download's. Included by
 * sock_ops (the yield's harm, rLEDBAT) and LEDBAT++ (its delay).
 *
 * Every segment received carries the peer's clock when it left (TSval)
 * and echoes the TSval of ours it answers (TSecr):
 *   - upload direction:   TSval - TSecr, from our send to the peer's;
 *   - download direction: our clock at its arrival - TSval.
 * Each is a one-way delay plus the offset of two clocks, a constant; above
 * its minimum it is that direction's queue (the offset cancels). On an
 * ACK of our data the upload direction is the RTT above its minimum less
 * the download direction's queue (owd_read_ack). Linux's
 * timestamps count ms (us where a route asks for them: tcp_usec_ts, 6.7+).
 * The minimum is kept over one to two OWD_BUCKET_MS buckets, so that a
 * path's change and the clocks' drift (at most 100 ppm: 6 ms a minute)
 * leave it within a minute. On data received the
 * download direction reads the data's way and the upload direction our
 * ACK's plus the peer's wait to send (nothing for a sender the ACKs
 * clock, a whole idle period for one that paused): the queue read is the
 * smaller of the last two groups of OWD_GROUP samples, so that one
 * sample's wait (a pause, a delayed ACK) is no queue, a standing queue is.
 */
#ifndef LANES_OWD_H
#define LANES_OWD_H

#define OWD_BUCKET_MS 30000 /* the minimum spans one to two of these */
#define OWD_GROUP 4         /* samples per group of the queue's filter */

/* one direction's state */
struct owd_dir {
	__u32 base[2]; /* the minimum of this bucket and the last (TS units) */
	__u32 bucket;  /* the bucket of base[0], + 1 (0: no sample yet) */
	__u32 has;     /* bit i: base[i] is set */
	__u32 cur[2];  /* the smallest queue of this group and the last */
	__u32 n;       /* samples in cur[0]'s group */
	__u32 filled;  /* cur[1] holds a whole group */
	__u32 start;   /* cur[0]'s group's first sample, ms */
};

/* a socket's two directions; acked: the upload direction's queue as an
 * ACK of our data reads it (owd_read_ack: from the RTT), filtered apart
 * from the one data received reads (owd_read: TSval - TSecr, our ACK's
 * way plus the peer's wait), which a socket that sends and receives (a
 * request, its response) reads too */
struct owd {
	struct owd_dir up, down, acked;
};

#define OWD_UP 0
#define OWD_DOWN 1

/* owd_smaller: a before b in the clocks' modular arithmetic */
static __always_inline int owd_smaller(__u32 a, __u32 b)
{
	return (__s32)(a - b) < 0;
}

/* owd_base records raw (TS units) at now_ms and returns its minimum over
 * the last one to two buckets. */
static __always_inline __u32 owd_base(struct owd_dir *d, __u32 raw, __u32 now_ms)
{
	__u32 b = now_ms / OWD_BUCKET_MS + 1, m;

	if (b != d->bucket) {
		d->has = b == d->bucket + 1 && (d->has & 1) ? 2 : 0;
		d->base[1] = d->base[0];
		d->bucket = b;
	}
	if (!(d->has & 1) || owd_smaller(raw, d->base[0])) {
		d->base[0] = raw;
		d->has |= 1;
	}
	m = d->base[0];
	if ((d->has & 2) && owd_smaller(d->base[1], m))
		m = d->base[1];
	return m;
}

/* owd_filter_span records one queue sample q of d at now_ms and returns
 * the smaller of this group's smallest and the last group's (before a
 * whole group, this group's: a short connection's request, one or two
 * samples, read its queue as none). A group is OWD_GROUP samples over at
 * least span_ms: spanning a round trip, the reading is the queue that
 * stood through one, not a burst's that drained within it. */
static __always_inline __u32 owd_filter_span(struct owd_dir *d, __u32 q, __u32 now_ms, __u32 span_ms)
{
	if (d->n >= OWD_GROUP && now_ms - d->start >= span_ms) {
		d->cur[1] = d->cur[0];
		d->filled = 1;
		d->n = 0;
	}
	if (!d->n) {
		d->start = now_ms;
		d->cur[0] = q;
	} else if (q < d->cur[0]) {
		d->cur[0] = q;
	}
	d->n++;
	return d->filled && d->cur[1] < d->cur[0] ? d->cur[1] : d->cur[0];
}

/* owd_filter is owd_filter_span over OWD_GROUP samples, whatever their span. */
static __always_inline __u32 owd_filter(struct owd_dir *d, __u32 q)
{
	return owd_filter_span(d, q, 0, 0);
}

/* owd_queue records one sample raw of d at now_ms and returns the
 * direction's queue in TS units: raw above its minimum, filtered. */
static __always_inline __u32 owd_queue(struct owd_dir *d, __u32 raw, __u32 now_ms)
{
	return owd_filter(d, raw - owd_base(d, raw, now_ms));
}

/* owd_raw reads the last segment's timestamps of tp: the upload
 * direction's and the download direction's raw delays (TS units), the
 * clock now_ms (ms) and the TS unit in us (1000, or 1 with tcp_usec_ts).
 * 0: the connection has no timestamps (then the caller reads its RTT). */
static __always_inline int owd_raw(struct tcp_sock *tp, __u32 *up, __u32 *down, __u32 *now_ms, __u32 *unit_us)
{
	__u64 now_us = tp->tcp_mstamp;
	__u32 tsval, tsecr, now_ts;

	tsval = tp->rx_opt.rcv_tsval;
	tsecr = tp->rx_opt.rcv_tsecr;
	if (!tsecr) /* never set: the connection agreed no timestamps */
		return 0;
	*unit_us = 1000;
	if (bpf_core_field_exists(tp->tcp_usec_ts) && BPF_CORE_READ_BITFIELD(tp, tcp_usec_ts))
		*unit_us = 1;
	now_ts = *unit_us == 1 ? (__u32)now_us : (__u32)(now_us / 1000);
	*up = tsval - tsecr;
	*down = now_ts - tsval;
	*now_ms = (__u32)(now_us / 1000);
	return 1;
}

/* owd_down_us is tp's last segment's download-direction raw delay in us:
 * our clock at its arrival less its TSval in us. Where the peer's
 * timestamps count ms, TSval truncates its send time by under a ms and
 * our clock is read to the us, so a minimum over a few samples reads the
 * queue within a fraction of a ms (owd_raw's difference of two ms clocks
 * is off by up to a ms either way: a 2.5 ms target read 1-3 ms with no
 * queue). Modulo 2^32 us, as a difference it is exact. 0: no timestamps. */
static __always_inline int owd_down_us(struct tcp_sock *tp, __u32 *raw_us, __u32 *now_ms)
{
	__u32 up, down, unit;
	__u64 now_us = tp->tcp_mstamp;

	if (!owd_raw(tp, &up, &down, now_ms, &unit))
		return 0;
	*raw_us = (__u32)now_us - tp->rx_opt.rcv_tsval * unit;
	return 1;
}

/* owd_read records tp's last segment (data received) in o and returns the
 * upload and download directions' queues in us; 0: no timestamps. */
static __always_inline int owd_read(struct tcp_sock *tp, struct owd *o, __u32 *up_us, __u32 *down_us)
{
	__u32 up, down, now_ms, unit;

	if (!owd_raw(tp, &up, &down, &now_ms, &unit))
		return 0;
	*up_us = owd_queue(&o->up, up, now_ms) * unit;
	*down_us = owd_queue(&o->down, down, now_ms) * unit;
	return 1;
}

/* owd_read_up records tp's last segment's upload direction in o (as data
 * received does: TSval - TSecr) and returns its queue in us; 0: no
 * timestamps. On ACKs of our data it reads each ACK, in whole TS units,
 * with the gap between two segments one ACK covers (the filter's minimum
 * drops it). */
static __always_inline int owd_read_up(struct tcp_sock *tp, struct owd *o, __u32 *up_us)
{
	__u32 up, down, now_ms, unit;

	if (!owd_raw(tp, &up, &down, &now_ms, &unit))
		return 0;
	*up_us = owd_queue(&o->up, up, now_ms) * unit;
	return 1;
}

/* owd_read_ack records tp's last segment, an ACK of our data whose newest
 * segment's RTT is rtt_us, in o and returns the two directions' queues in
 * us; 0: no timestamps. The download direction is the ACK's way (its
 * TSval to its arrival); the upload direction is the RTT above the path's
 * minimum min (us; 0 or ~0: none) less that: the ACK's TSecr is our older segment's where the
 * peer acknowledges two at once, and a paced sender's segments leave a
 * gap apart (at 15 segments per 80 ms round trip, 5 ms: read as a queue
 * twice LEDBAT++'s share target, its window shrank with it). */
static __always_inline int owd_read_ack(struct tcp_sock *tp, struct owd *o, __u32 rtt_us, __u32 min, __u32 *up_us, __u32 *down_us)
{
	__u32 up, down, now_ms, unit, q = 0, dq;

	if (!owd_raw(tp, &up, &down, &now_ms, &unit))
		return 0;
	/* this ACK's own download queue: the filtered one lags a queue that
	 * grows, and the upload's would take the difference */
	dq = (down - owd_base(&o->down, down, now_ms)) * unit;
	*down_us = owd_filter(&o->down, dq / unit) * unit;
	if (min && min != ~0U && rtt_us > min + dq)
		q = rtt_us - min - dq;
	*up_us = owd_filter(&o->acked, q);
	return 1;
}

#endif
