/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * bgclass.h - the background lane's non-TCP traffic as a class, per
 * interface and direction: a token-bucket policer the daemon steers
 * (internal/bgudp) and the kernel's foreground-aware yield holds.
 *
 * Egress (lanes_classify): a background packet that is not TCP records its
 * flow in lanes_bg_flows and passes the interface's egress bucket.
 * Ingress (lanes_bg_ingress, clsact ingress): an arriving packet whose
 * reversed 5-tuple is in lanes_bg_flows passes the ingress bucket, and
 * where the daemon shapes the arrivals (bg_ctl.shaped) it is redirected
 * to the interface's IFB device, whose HTB class drains it at the
 * daemon's rate from a queue of ~100 ms of it (bg_ifb). A packet over the
 * bucket is dropped: QUIC's own congestion control reads the loss and
 * backs off, an unresponsive sender is held at the rate.
 *
 * Each field has one writer. The daemon writes lanes_bg_ctl (struct
 * bg_ctl: the rates, and empty_gen, bumped to have the bucket emptied);
 * the program alone writes lanes_bg_state (struct bg_state: the bucket and
 * the counters), creating the entry at the class's first packet. A write
 * of the control value thus never puts back tokens or counts the program
 * spent or added since the daemon last read them.
 *
 * The bucket's rate is lanes_bg_ctl[key].rate (bytes/s, 0: none); while
 * the sockets of its direction are held (fg_yield_dir of lanes_maps.h: a
 * foreground TCP socket reads harm in that direction, the class's own
 * delay beside a foreground no TCP sample speaks for reads it both ways
 * (bgudp), a foreground TCP connection's opening holds the interface), the
 * rate
 * is at most yield_rate (0: no yield), and while a foreground
 * connection's opening holds the interface (lanes_fg_open) the egress
 * passes nothing (bg_opened). Beside a present foreground whose TCP
 * sockets are not harmed both directions are the controller's: it steers
 * them to the share target (internal/bgudp); the lab switch
 * CLS_F_HOLD_ARRIVALS holds arrivals at yield_rate there too. The first packet after BG_QUIET_NS without
 * one posts an event (lanes_bg_events), and a packet a second after it
 * while the traffic lasts, so the daemon's controller wakes only while
 * such traffic exists, and also when it missed the first.
 *
 * The bucket is updated without a lock: two CPUs may both take tokens of
 * one refill; the error is a packet per CPU per refill.
 */
#ifndef LANES_BGCLASS_H
#define LANES_BGCLASS_H

#define BG_DIR_EGRESS 0
#define BG_DIR_INGRESS 1
#define BG_QUIET_NS 1000000000ULL /* an episode ends after 1 s without a packet */
#define BG_EVENT_HELD_ACKS 2      /* bg_event's dir: a held download's pure ACKs (classifier.c) */
#define BG_HELD_ACK_KEY 0x80000000U /* lanes_bg_state's key of their event's rate limit */
#define BG_BURST_NS 25000000ULL   /* bucket depth: 25 ms of the rate */
#define BG_BURST_MIN 24224ULL     /* at least 16 full frames: a paced QUIC sender's burst */
#define NSEC 1000000000ULL
/* cls_config.flags: arrivals held at yield_rate beside any present foreground (a lab switch) */
#define CLS_F_HOLD_ARRIVALS 1U
/* cls_config.flags: an untold foreground (no TCP RTT sample) holds the
 * class, and foreground non-TCP arrivals do not stamp presence (a lab
 * switch: the rule the share beside an untold foreground replaced) */
#define CLS_F_UNTOLD_HELD 2U
/* cls_config.flags: either direction's harm holds the class both ways (a
 * lab switch, the rule directions apart replaced; sock_ops' YIELD_JOINED) */
#define CLS_F_DIRS_JOINED 4U
/* cls_config.flags: a foreground quiet FG_QUIET_NS after its last stamp,
 * not six gaps between its stamps (a lab switch, the rule the
 * measured quiet replaced; classifier.c's fg_gap) */
#define CLS_F_QUIET_FIXED 8U

/* bg_ctl: the daemon's half of a class (the program only reads it). */
struct bg_ctl {
	__u64 rate;       /* bytes/s; 0: not policed (yield_rate still applies) */
	__u64 yield_rate; /* bytes/s while the foreground is active; 0: no yield */
	__u64 empty_gen;  /* a change empties the bucket once, at the next packet */
	__u64 shaped;     /* egress: nonzero, the class leaves by the shaper class
			   * (LANE_BG_SHAPE_CLASS_MINOR) whose HTB rate the daemon sets;
			   * ingress: the ifindex of the interface's IFB device, to
			   * which the class's arrivals are redirected and whose HTB
			   * class the daemon's rate drains (0: not shaped), with
			   * BG_IFB_PUSH_MAC where the interface's arrivals carry
			   * no link-layer header */
	__u64 acks;       /* nonzero: this direction carries the class's
			   * acknowledgments, its data going the other way (the
			   * daemon's controlled direction): the yield does not
			   * hold it, as a background TCP download's ACKs are not
			   * held for the upload's harm (the data's direction is);
			   * a foreground's opening still stops the egress */
};

/* BG_IFB_PUSH_MAC: the interface's arrivals carry no link-layer header (a
 * TUN, WireGuard, a modem's raw-IP device, an IP tunnel): the program
 * pushes an empty Ethernet header before redirecting them to the IFB, an
 * Ethernet device, where bpf_redirect drops a packet without one (the
 * kernel's __bpf_redirect_common). */
#define BG_IFB_PUSH_MAC (1ULL << 32)

/* bg_state: the program's half of a class (the daemon only reads it). */
struct bg_state {
	__u64 tokens;      /* bytes x 1e9; all ones while unpoliced */
	__u64 last;        /* the last refill, bpf_ktime_get_ns */
	__u64 seen;        /* the last packet */
	__u64 packets, bytes;
	__u64 drops, drop_bytes;
	__u64 held_drops;  /* drops while the yield held the class */
	__u64 episodes;    /* episodes begun: first packets after BG_QUIET_NS */
	__u64 emptied_gen; /* the bg_ctl.empty_gen last acted on */
	__u64 posted;      /* the last event posted */
};

struct bg_event {
	__u32 ifindex;
	__u32 dir;
	__u8 peer[16]; /* the remote address (IPv4 v4-mapped) */
};

LANES_MAP(lanes_bg_ctl,
	  BPF_MAP_TYPE_HASH,
	  256,
	  __u32, /* ifindex * 2 + dir */
	  struct bg_ctl
);

LANES_MAP(lanes_bg_state,
	  BPF_MAP_TYPE_HASH,
	  256,
	  __u32, /* ifindex * 2 + dir */
	  struct bg_state
);

/* lanes_bg_flows: the background non-TCP flows seen leaving, by their
 * egress 5-tuple; the value is the egress ifindex. */
LANES_MAP(lanes_bg_flows,
	  BPF_MAP_TYPE_LRU_HASH,
	  4096,
	  struct flow_key,
	  __u32
);

/* lanes_own_socks: the daemon's own sockets (by cookie) whose packets are
 * no user's foreground: the class's delay probes (bgudp's prober). They
 * leave in their lane, but do not stamp the foreground present: a probe
 * every 50 ms beside a light foreground made the class share with
 * itself. */
LANES_MAP(lanes_own_socks,
	  BPF_MAP_TYPE_HASH,
	  64,
	  __u64,
	  __u8
);

LANES_MAP_NOKEY(lanes_bg_events,
	  BPF_MAP_TYPE_RINGBUF,
	  4096
);

static __always_inline void bg_event(__u32 ifindex, __u32 dir, const __u8 *peer)
{
	struct bg_event *ev = bpf_ringbuf_reserve(&lanes_bg_events, sizeof(*ev), 0);

	if (!ev)
		return;
	ev->ifindex = ifindex;
	ev->dir = dir;
	__builtin_memcpy(ev->peer, peer, 16);
	bpf_ringbuf_submit(ev, 0);
}

/* bg_opened says whether a foreground TCP connection's opening by interface
 * ifindex (or by one not known) holds it (lanes_fg_open): the class's egress
 * then passes nothing. A background download's remote sender is clocked
 * by the device's acknowledgements: without them it stops within a one-way
 * delay, as a TCP sender at a closed window does, and what it already sent
 * drains from the remote queue before the new connection's first data
 * round trip; drops of its arrivals reach it only a round trip later, as
 * loss, and its congestion control then steps down by a fraction per round
 * trip while its data keeps crossing the remote queue. Only for the
 * opening's hold: a longer stop would push a QUIC sender's probe timeout
 * back by doubling steps, and its restart with it. */
static __always_inline int bg_opened(__u32 ifindex, __u64 now)
{
	return fg_opening(ifindex, now) || (ifindex && fg_opening(0, now));
}

/* bg_state_of is the class's state, created (empty: the first packet
 * finds the bucket full) at its first packet. */
static __always_inline struct bg_state *bg_state_of(__u32 key)
{
	struct bg_state *c = bpf_map_lookup_elem(&lanes_bg_state, &key);
	struct bg_state fresh = {};

	if (c)
		return c;
	bpf_map_update_elem(&lanes_bg_state, &key, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&lanes_bg_state, &key);
}

/* bg_pass charges len bytes to the class of (ifindex, dir); it returns
 * whether the packet may pass. */
static __always_inline int bg_pass(__u32 ifindex, __u32 dir, __u32 len, const __u8 *peer)
{
	__u32 key = ifindex * 2 + dir;
	struct bg_ctl *ctl = bpf_map_lookup_elem(&lanes_bg_ctl, &key);
	struct bg_state *c;
	__u64 now = bpf_ktime_get_ns(), rate, yield_rate, empty_gen, acks, depth, add, gap;
	int held;

	if (!ctl)
		return 1;
	rate = ctl->rate;
	yield_rate = ctl->yield_rate;
	empty_gen = ctl->empty_gen;
	acks = ctl->acks;
	c = bg_state_of(key);
	if (!c)
		return 1;
	if (!c->seen || now - c->seen >= BG_QUIET_NS) {
		c->episodes++;
		c->posted = now;
		bg_event(ifindex, dir, peer);
	} else if (now - c->posted >= BG_QUIET_NS) {
		/* again each second while it flows: a controller that was not
		 * reading at the first (starting, restarted) still wakes */
		c->posted = now;
		bg_event(ifindex, dir, peer);
	}
	c->seen = now;
	c->packets++;
	c->bytes += len;
	if (c->emptied_gen != empty_gen) { /* the daemon asked: once per bump */
		c->emptied_gen = empty_gen;
		c->tokens = 0;
	}
	/* directions apart: the upload is held for the upload's harm, the
	 * arrivals for the download's, as the background sockets are */
	held = yield_rate && (fg_yield_dir(ifindex, dir == BG_DIR_EGRESS ? FG_DIR_UP : FG_DIR_DOWN, now,
					   CFG.flags & CLS_F_UNTOLD_HELD, CFG.flags & CLS_F_DIRS_JOINED) ||
			      ((CFG.flags & CLS_F_HOLD_ARRIVALS) && dir != BG_DIR_EGRESS && fg_held(ifindex, now)));
	if (held && dir == BG_DIR_EGRESS && bg_opened(ifindex, now))
		goto drop; /* an opening stops the egress, a download's ACKs too */
	if (acks)
		held = 0; /* the acknowledgments of the class's data the other way */
	if (held && (!rate || yield_rate < rate))
		rate = yield_rate;
	if (!rate) { /* unpoliced: the bucket stays full for when a rate comes */
		c->tokens = ~0ULL;
		c->last = now;
		return 1;
	}
	/* tokens in bytes x 1e9 (byte-nanoseconds per second), so that a gap
	 * worth less than a byte still counts; a gap is at most 1 s and a rate
	 * at most 1e10 bytes/s, so gap x rate fits */
	depth = rate * BG_BURST_NS;
	if (depth < BG_BURST_MIN * NSEC)
		depth = BG_BURST_MIN * NSEC;
	gap = now - c->last;
	if (gap > NSEC)
		gap = NSEC;
	add = gap * rate;
	if (c->tokens >= depth || add >= depth - c->tokens)
		c->tokens = depth;
	else
		c->tokens += add;
	c->last = now;
	if (c->tokens >= (__u64)len * NSEC) {
		c->tokens -= (__u64)len * NSEC;
		return 1;
	}
drop:
	c->drops++;
	c->drop_bytes += len;
	if (held)
		c->held_drops++;
	return 0;
}

/* bg_egress's verdicts */
#define BG_DROP 0
#define BG_PASS 1
#define BG_PASS_SHAPED 2 /* passes, by the shaper class */

/* bg_shaped says whether the interface's egress class leaves by the
 * shaper class: a queue the daemon's rate drains, so that a loss-based
 * sender's window cut at a drop empties that queue, not the bottleneck. */
static __always_inline int bg_shaped(__u32 ifindex)
{
	__u32 key = ifindex * 2 + BG_DIR_EGRESS;
	struct bg_ctl *ctl = bpf_map_lookup_elem(&lanes_bg_ctl, &key);

	return ctl && ctl->shaped;
}

/* bg_egress records a background non-TCP packet's flow and charges it to
 * its interface's egress class; it returns BG_DROP, BG_PASS, or
 * BG_PASS_SHAPED where the class is shaped. */
static __always_inline int bg_egress(struct __sk_buff *skb, struct parsed *p)
{
	__u32 ifindex = skb->ifindex;

	if (!p->have_ip || p->key.proto == IPPROTO_TCP_)
		return 1;
	if (p->have_ports)
		bpf_map_update_elem(&lanes_bg_flows, &p->key, &ifindex, BPF_ANY);
	if (!bg_pass(ifindex, BG_DIR_EGRESS, skb->len, p->key.daddr))
		return BG_DROP;
	return bg_shaped(ifindex) ? BG_PASS_SHAPED : BG_PASS;
}

/* bg_ifb is the ifindex of the IFB device the interface's arrivals of the
 * class are shaped on (0: they are not shaped, only policed); *push_mac
 * says they need a link-layer header pushed first (BG_IFB_PUSH_MAC). */
static __always_inline __u32 bg_ifb(__u32 ifindex, int *push_mac)
{
	__u32 key = ifindex * 2 + BG_DIR_INGRESS;
	struct bg_ctl *ctl = bpf_map_lookup_elem(&lanes_bg_ctl, &key);

	if (!ctl)
		return 0;
	*push_mac = (ctl->shaped & BG_IFB_PUSH_MAC) != 0;
	return (__u32)ctl->shaped;
}

/* bg_reverse turns an arriving packet's key into the key its flow left
 * with. */
static __always_inline void bg_reverse(struct flow_key *in, struct flow_key *out)
{
	__builtin_memcpy(out->daddr, in->saddr, 16);
	__builtin_memcpy(out->saddr, in->daddr, 16);
	out->dport = in->sport;
	out->sport = in->dport;
	out->proto = in->proto;
}

#endif
