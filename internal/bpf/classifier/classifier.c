//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * classifier.c - lanes egress classifier: a cls_bpf direct-action program
 * attached as a filter to the root HTB qdisc (1:) of a managed interface. It
 * picks each packet's lane and writes the minor of the lane's HTB class into
 * skb->tc_classid; the filter carries classid 1:0 so cls_bpf hands HTB the
 * full 1:<minor> (cls_bpf: res.classid = TC_H_MAJ(filter classid) |
 * qdisc_skb_cb(skb)->tc_classid, and the latter is only 16 bits wide).
 *
 * Lookup order, first hit wins:
 *   1. socket cookie -> lane   (lanes_cookie, filled by sock_ops at connect/accept)
 *   2. 5-tuple -> lane         (lanes_tuple: dst ip and port, src port [, src ip] [, proto];
 *                               flow_lookup's precedence of the wildcards)
 *   2b. destination -> lane    (lanes_dst LPM: dst prefix with the port, then any port)
 *   3. cgroup v2 id -> lane    (lanes_cgroup, bpf_skb_cgroup_id of skb->sk)
 *   4. socket uid -> lane      (lanes_uid, bpf_get_socket_uid)
 *   5. DSCP -> lane            (lanes_dscp, IPv4 TOS / IPv6 traffic class)
 *   6. default: interactive
 * Steps 1, 3 and 4 need a socket on the skb and are skipped without one
 * (forwarded packets, kernel control packets); steps 2 and 5 need the IP
 * header and are skipped for short or non-IP packets.
 *
 * The ACK class: while lanes_ack_on[0] is set, a pure ACK (TCP, no payload,
 * ACK set, no SYN, FIN or RST; options such as SACK blocks and timestamps
 * allowed) of an interactive socket (with lanes_ack_on 1: one that has a
 * downlink cap, a nonzero lanes_sock_rwnd entry; with 2: any) gets the ACK
 * class (minor LANE_ACK_CLASS_MINOR) instead of its lane's: the cooperative
 * controller gives that class a rate just above the downloads' ACK rate
 * (twice what the class sent over the last RTT), so a burst of data arriving
 * leaves as spaced ACKs (docs/datapath.md "The ACK class"). Its ACKs are
 * counted in lanes_ack_stats (the bytes the controller measures).
 *
 * The held-ACK class: a background socket's pure ACK while the yield holds
 * background downloads on its interface (fg_yield_dir, FG_DIR_DOWN) gets
 * minor LANE_HELD_ACK_CLASS_MINOR, whose rate the daemon sets from the
 * download estimate: a held window's 2 packets a round trip are most of a
 * slow link, and the ACKs' pace bounds the remote sender below that.
 *
 * Data structures: the maps of lanes_maps.h, lanes_dscp (64 entries) and a
 * per-CPU matrix of counters indexed [kind][lane].
 *
 * The background lane's non-TCP traffic is a class of its own per interface
 * and direction (bgclass.h): it may be dropped over the rate the daemon's
 * controller sets or the foreground-aware yield's; lanes_bg_ingress, on
 * the clsact ingress hook, polices the same flows' arriving packets and
 * redirects them to the interface's IFB device where they are shaped.
 *
 * Note: apart from that class the program returns TC_ACT_OK. It never
 * drops anything else: a packet it cannot parse is interactive. If the filter is removed, HTB's default
 * class (interactive) takes everything, so the datapath fails open.
 * Note: IPv6 extension headers are not walked; a packet whose first next
 * header is not TCP/UDP/UDP-Lite/SCTP has no ports (no 5-tuple match), its
 * DSCP still counts.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include "lanes_kernel.h"
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lanes_maps.h"

char __license[] SEC("license") = "GPL";

/* Set by the Go loader before load. */
volatile const struct cls_config {
	__u32 minor_base; /* lane l uses HTB class minor minor_base + l (lane.ClassMinor) */
	__u32 flags;      /* CLS_F_*: lab switches */
} CFG = {
	.minor_base = LANE_CLASS_MINOR,
};
#ifndef LANES_ANDROID_FORM /* the Android form declares these four itself */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} lanes_dscp SEC(".maps");

/* counters: index kind * LANE_SLOTS + lane */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MATCH_KINDS * LANE_SLOTS);
	__type(key, __u32);
	__type(value, struct counter);
} lanes_cls_stats SEC(".maps");

/* lanes_ack_on[0]: nonzero while the ACK class is on (the daemon sets it
 * once every tree has the class and the controller has set its rate): 1
 * takes the pure ACKs of capped sockets only, 2 those of every interactive
 * socket (the downloads' ACKs from their first round, before any cap). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lanes_ack_on SEC(".maps");

/* lanes_ack_stats[0]: the pure ACKs of capped sockets seen while the class
 * is on (packets, bytes of skb->len, the length HTB counts). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counter);
} lanes_ack_stats SEC(".maps");
#endif
/* What the header parse found. */
struct parsed {
	struct flow_key key;
	__u32 dscp;
	int have_ports;
	int have_ip;
};

static __always_inline int valid_lane(const __u32 *v)
{
	return v && *v >= LANE_REALTIME && *v <= LANE_MAX;
}

#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define IPPROTO_SCTP_ 132
#define IPPROTO_UDPLITE_ 136

static __always_inline int has_ports(__u8 proto)
{
	return proto == IPPROTO_TCP_ || proto == IPPROTO_UDP_ ||
	       proto == IPPROTO_SCTP_ || proto == IPPROTO_UDPLITE_;
}

/* load reads len bytes at off from the network header, whatever link-layer
 * header the device has (Ethernet, none on TUN/WireGuard), so one program
 * serves every interface. */
static __always_inline long load(struct __sk_buff *skb, __u32 off, void *to, __u32 len)
{
	return bpf_skb_load_bytes_relative(skb, off, to, len, BPF_HDR_START_NET);
}

/* parse fills p from the IPv4/IPv6 header. */
static __always_inline void parse(struct __sk_buff *skb, struct parsed *p)
{
	__u32 off = 0;
	__u16 ports[2];

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u8 iph[20];

		if (load(skb, off, iph, sizeof(iph)) < 0)
			return;
		if ((iph[0] >> 4) != 4 || (iph[0] & 0xf) < 5)
			return;
		p->have_ip = 1;
		p->dscp = iph[1] >> 2;
		p->key.proto = iph[9];
		p->key.daddr[10] = 0xff;
		p->key.daddr[11] = 0xff;
		__builtin_memcpy(&p->key.daddr[12], &iph[16], 4);
		p->key.saddr[10] = 0xff;
		p->key.saddr[11] = 0xff;
		__builtin_memcpy(&p->key.saddr[12], &iph[12], 4);
		/* fragment offset != 0: no transport header in this packet */
		if (((iph[6] & 0x1f) | iph[7]) != 0)
			return;
		off += (iph[0] & 0xf) * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		__u8 ip6h[40];

		if (load(skb, off, ip6h, sizeof(ip6h)) < 0)
			return;
		if ((ip6h[0] >> 4) != 6)
			return;
		p->have_ip = 1;
		/* traffic class = low nibble of byte 0 and high nibble of byte 1 */
		p->dscp = (((ip6h[0] & 0xf) << 4) | (ip6h[1] >> 4)) >> 2;
		p->key.proto = ip6h[6];
		__builtin_memcpy(p->key.daddr, &ip6h[24], 16);
		__builtin_memcpy(p->key.saddr, &ip6h[8], 16);
		off += 40;
	} else {
		return;
	}
	if (!has_ports(p->key.proto))
		return;
	if (load(skb, off, ports, sizeof(ports)) < 0)
		return;
	p->key.sport = bpf_ntohs(ports[0]);
	p->key.dport = bpf_ntohs(ports[1]);
	p->have_ports = 1;
}

#include "bgclass.h"
#include "udpbytes.h"

static __always_inline void count(struct __sk_buff *skb, __u32 kind, __u32 lane)
{
	__u32 idx = kind * LANE_SLOTS + lane;
	struct counter *c = bpf_map_lookup_elem(&lanes_cls_stats, &idx);

	if (c) {
		c->packets++;
		c->bytes += skb->len;
	}
}

#define TCP_FIN_ 0x01
#define TCP_SYN_ 0x02
#define TCP_RST_ 0x04
#define TCP_ACK_ 0x10

/* pure_ack says whether the packet is a TCP segment without payload that
 * carries an ACK and no SYN, FIN or RST (any options). IPv6 extension
 * headers are not walked (such a packet is not a pure ACK here). */
static __always_inline int pure_ack(struct __sk_buff *skb)
{
	__u32 iplen, hlen, tot;
	__u8 th[2];

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		__u8 iph[20];

		if (load(skb, 0, iph, sizeof(iph)) < 0)
			return 0;
		if ((iph[0] >> 4) != 4 || iph[9] != IPPROTO_TCP_)
			return 0;
		/* fragments (MF or an offset) are not pure ACKs */
		if (((iph[6] & 0x3f) | iph[7]) != 0)
			return 0;
		hlen = (iph[0] & 0xf) * 4;
		tot = ((__u32)iph[2] << 8) | iph[3];
		iplen = hlen;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		__u8 ip6h[8];

		if (load(skb, 0, ip6h, sizeof(ip6h)) < 0)
			return 0;
		if ((ip6h[0] >> 4) != 6 || ip6h[6] != IPPROTO_TCP_)
			return 0;
		hlen = 40;
		tot = 40 + (((__u32)ip6h[4] << 8) | ip6h[5]);
		iplen = 40;
	} else {
		return 0;
	}
	if (iplen < 20 || iplen > 60)
		return 0;
	/* data offset and flags: bytes 12 and 13 of the TCP header */
	if (load(skb, iplen + 12, th, sizeof(th)) < 0)
		return 0;
	hlen += (th[0] >> 4) * 4;
	return tot == hlen && (th[1] & TCP_ACK_) && !(th[1] & (TCP_SYN_ | TCP_FIN_ | TCP_RST_));
}

/* ack_class says whether the packet goes to the ACK class: a pure ACK of a
 * socket (cookie, 0 without one), with a downlink cap where lanes_ack_on is
 * 1, while the class is on. */
static __always_inline int ack_class(struct __sk_buff *skb, __u64 cookie)
{
	__u32 zero = 0, *on, *cap;
	struct counter *c;

	if (!cookie)
		return 0;
	on = bpf_map_lookup_elem(&lanes_ack_on, &zero);
	if (!on || !*on)
		return 0;
	if (*on == 1) { /* capped downloads only */
		cap = bpf_map_lookup_elem(&lanes_sock_rwnd, &cookie);
		if (!cap || !*cap)
			return 0;
	}
	if (!pure_ack(skb))
		return 0;
	c = bpf_map_lookup_elem(&lanes_ack_stats, &zero);
	if (c) {
		c->packets++;
		c->bytes += skb->len;
	}
	return 1;
}


/* fg_gap takes the interval since w's last stamp into its gap (a maximum
 * that decays by 1/FG_GAP_DECAY a stamp) and sets how long after a stamp
 * the foreground is quiet: FG_QUIET_GAPS gaps, within [FG_QUIET_MIN_NS,
 * FG_QUIET_NS] (lanes_fg.h); FG_QUIET_NS with CLS_F_QUIET_FIXED. A
 * window's first stamp (first) comes FG_MIN_PACKETS packets after the
 * last window's last: its interval counts as FG_MIN_PACKETS gaps. */
static __always_inline void fg_gap(struct fg_window *w, __u64 since, int first)
{
	__u64 quiet;

	if (first)
		since /= FG_MIN_PACKETS;
	w->gap = since > w->gap ? (__u32)since : w->gap - w->gap / FG_GAP_DECAY;
	quiet = FG_QUIET_GAPS * (__u64)w->gap;
	if (quiet < FG_QUIET_MIN_NS)
		quiet = FG_QUIET_MIN_NS;
	if (quiet > FG_QUIET_NS || (CFG.flags & CLS_F_QUIET_FIXED))
		quiet = FG_QUIET_NS;
	w->quiet = (__u32)quiet;
}

/* fg_mark stamps one interface's window (lanes_maps.h's rule); it returns
 * whether the packet stamped it active. */
static __always_inline int fg_mark(__u32 idx, __u32 len, __u64 now, int count)
{
	struct fg_window *w = bpf_map_lookup_elem(&lanes_fg_active, &idx), fresh = {};
	int first = 0;

	if (!w) {
		bpf_map_update_elem(&lanes_fg_active, &idx, &fresh, BPF_NOEXIST);
		w = bpf_map_lookup_elem(&lanes_fg_active, &idx);
		if (!w)
			return 0;
	}
	if (count) {
		if (now - w->start > FG_WINDOW_NS) {
			w->start = now;
			w->packets = 0;
			w->bytes = 0;
		}
		first = w->packets < FG_MIN_PACKETS && w->bytes < FG_MIN_BYTES;
		w->packets++;
		w->bytes += len;
		if (w->packets < FG_MIN_PACKETS && w->bytes < FG_MIN_BYTES)
			return 0;
	}
	if (!w->active || now - w->active >= FG_HOLD_NS) {
		w->since = now;
		w->episodes++;
		w->gap = FG_QUIET_NS / 2;
		w->quiet = FG_QUIET_NS;
	} else {
		fg_gap(w, now - w->active, first);
	}
	w->active = now;
	return 1;
}

/* fg_stamp records a foreground packet on its egress interface, and on
 * key 0 (any interface) when it stamps that interface. */
static __always_inline void fg_stamp(struct __sk_buff *skb)
{
	__u64 now = bpf_ktime_get_ns();

	if (fg_mark(skb->ifindex, skb->len, now, 1))
		fg_mark(0, 0, now, 0);
}

/* held_down says whether the yield holds background TCP downloads on
 * interface idx at now, as sock_ops' yielding does with the lab switches
 * off: beside the QUIC/UDP class's own harm (which holds the class, not
 * the sockets) only an opening holds them. */
static __always_inline int held_down(__u32 idx, __u64 now)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx);

	if (h && h->limited == FG_HARM_KIND_OWN)
		return fg_opening(idx, now) || (idx && fg_opening(0, now));
	return fg_yield_dir(idx, FG_DIR_DOWN, now, 0, 0);
}

/* rl_floor says whether a background download by interface idx is at its
 * floor (lanes_rl_floor, rledbat.h's rl_floor_mark). */
static __always_inline int rl_floor(__u32 idx)
{
	__u64 *at = bpf_map_lookup_elem(&lanes_rl_floor, &idx);

	return at && *at;
}

/* fg_receives: a foreground receives by interface idx at now, in the
 * direction a download's floor would take from it: a foreground TCP
 * socket read that direction's queue from its data's timestamps
 * (sock_ops' fg_dir_queue) within FG_HOLD_NS (a 0.2 Mbit/s bulk download
 * sends under the presence stamp's 50 packets a second), or a foreground
 * no TCP sample speaks for (fg_untold: a call, a probe, whose replies come
 * that way) is present. A foreground that only sends (an upload, its ACKs
 * coming back) is not harmed by two packets a round trip the other way:
 * directions apart. */
static __always_inline int fg_receives(__u32 idx, __u64 now)
{
	struct fg_harm *h = bpf_map_lookup_elem(&lanes_fg_harm, &idx);

	if (h && h->dir_qd_at[FG_DIR_DOWN] && now - h->dir_qd_at[FG_DIR_DOWN] < FG_HOLD_NS)
		return 1;
	return fg_untold(idx, now);
}

/* held_ack says whether a background packet is a pure ACK of a download
 * that the yield holds (held_down) or, beside a foreground that receives
 * (fg_receives), whose window is at its floor by its queue (rl_floor: two
 * packets a round trip are most of a slow link; alone they harm no one);
 * at most once per BG_QUIET_NS per interface it posts BG_EVENT_HELD_ACKS
 * (bgclass.h's event, its rate limit kept in lanes_bg_state at key
 * BG_HELD_ACK_KEY | ifindex), so the daemon paces the class while they
 * come. */
static __always_inline int held_ack(struct __sk_buff *skb)
{
	__u8 none[16] = {};
	__u64 now = bpf_ktime_get_ns();
	struct bg_state *s;

	if (!pure_ack(skb))
		return 0;
	if (!held_down(skb->ifindex, now) && !(rl_floor(skb->ifindex) && fg_receives(skb->ifindex, now)))
		return 0;
	s = bg_state_of(BG_HELD_ACK_KEY | skb->ifindex);
	if (s && now - s->posted >= BG_QUIET_NS) {
		s->posted = now;
		bg_event(skb->ifindex, BG_EVENT_HELD_ACKS, none);
	}
	return 1;
}

/* classify sets the lane's class (the ACK class for an interactive
 * socket's pure ACK that ack_class takes) and counts the lane. */
static __always_inline int classify(struct __sk_buff *skb, __u32 lane, __u32 kind, __u64 cookie)
{
	if (lane == LANE_INTERACTIVE && ack_class(skb, cookie))
		skb->tc_classid = LANE_ACK_CLASS_MINOR;
	else if (lane == LANE_BACKGROUND && held_ack(skb))
		skb->tc_classid = LANE_HELD_ACK_CLASS_MINOR;
	else
		skb->tc_classid = CFG.minor_base + lane;
	count(skb, kind, lane);
	if (lane != LANE_BACKGROUND && !(cookie && bpf_map_lookup_elem(&lanes_own_socks, &cookie)))
		fg_stamp(skb);
	return TC_ACT_OK;
}

SEC(LANES_TC("lanes_classify"))
int lanes_classify(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	struct parsed p = {};
	__u64 cookie = 0;
	__u32 *v, lane, kind;
	int parsed = 0;

	if (sk) {
		cookie = bpf_get_socket_cookie(skb);
		v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
		if (valid_lane(v)) {
			lane = *v;
			kind = MATCH_COOKIE;
			goto out;
		}
	}

	parse(skb, &p);
	parsed = 1;
	if (p.have_ports) {
		/* flow_lookup rewrites its key's proto and saddr to the shape
		 * that matched: a copy, so that the background class records the
		 * packet's own 5-tuple and knows TCP as TCP (bg_egress) */
		struct flow_key k = p.key;

		v = flow_lookup(&k);
		if (v) {
			lane = *v;
			kind = MATCH_TUPLE;
			goto out;
		}
	}
	if (p.have_ip) {
		/* without ports (ICMP, fragments) only any-port rules match */
		v = dst_lookup(p.key.daddr, p.have_ports ? p.key.dport : 0);
		if (v) {
			lane = *v;
			kind = MATCH_DST;
			goto out;
		}
	}

	if (sk) {
		__u64 cg = bpf_skb_cgroup_id(skb);
		__u32 uid;

		v = bpf_map_lookup_elem(&lanes_cgroup, &cg);
		if (valid_lane(v)) {
			lane = *v;
			kind = MATCH_CGROUP;
			goto out;
		}
		uid = bpf_get_socket_uid(skb);
		v = bpf_map_lookup_elem(&lanes_uid, &uid);
		if (valid_lane(v)) {
			lane = *v;
			kind = MATCH_UID;
			goto out;
		}
	}

	if (p.have_ip) {
		__u32 dscp = p.dscp & 63;

		v = bpf_map_lookup_elem(&lanes_dscp, &dscp);
		if (valid_lane(v)) {
			lane = *v;
			kind = MATCH_DSCP;
			goto out;
		}
	}

	lane = LANE_INTERACTIVE;
	kind = MATCH_DEFAULT;
out:
	parsed |= udp_egress(skb, sk, &p, parsed);
	if (lane == LANE_BACKGROUND) {
		int bg;

		if (!parsed)
			parse(skb, &p);
		bg = bg_egress(skb, &p);
		if (bg != BG_PASS) {
			count(skb, kind, lane);
			if (bg == BG_DROP)
				return TC_ACT_SHOT;
			skb->tc_classid = LANE_BG_SHAPE_CLASS_MINOR;
			return TC_ACT_OK;
		}
	}
	return classify(skb, lane, kind, cookie);
}

/* fg_arrival stamps the foreground's presence (fg_stamp) at an arriving
 * non-TCP packet for this host that is not a background flow's (a call's
 * or a stream's UDP, whose device sends little or nothing back): a
 * foreground TCP download is stamped by its ACKs leaving, a UDP one only
 * here. k is the packet's 5-tuple reversed (the device's egress shape), so
 * the policy's tuple and destination rules read it as they read the
 * flow's own packets; a flow they put in background is not foreground. */
static __always_inline void fg_arrival(struct __sk_buff *skb, const struct flow_key *k)
{
	struct flow_key fk = *k;
	__u32 *v;

	if ((CFG.flags & CLS_F_UNTOLD_HELD) || skb->pkt_type != 0 /* PACKET_HOST */)
		return;
	v = flow_lookup(&fk);
	if (!v)
		v = dst_lookup(k->daddr, k->dport);
	if (v && *v == LANE_BACKGROUND)
		return;
	fg_stamp(skb);
}

/* push_link_header puts an empty Ethernet header (its type the packet's
 * protocol) before an arrival that has none (BG_IFB_PUSH_MAC). */
static __always_inline long push_link_header(struct __sk_buff *skb)
{
	__u16 proto = (__u16)skb->protocol;

	if (bpf_skb_change_head(skb, 14 /* ETH_HLEN */, 0) < 0)
		return -1;
	return bpf_skb_store_bytes(skb, 12, &proto, sizeof(proto), 0);
}

/*
 * lanes_bg_ingress polices the arriving packets of the background non-TCP
 * flows the classifier saw leave (bgclass.h) and redirects them to the
 * interface's IFB device where the daemon shapes them; everything else passes, and
 * the other non-TCP arrivals stamp the foreground's presence (fg_arrival).
 */
SEC(LANES_TC("lanes_bg_ingress"))
int lanes_bg_ingress(struct __sk_buff *skb)
{
	struct parsed p = {};
	struct flow_key k = {};
	int push_mac = 0;
	__u32 ifb;

	parse(skb, &p);
	if (!p.have_ports || p.key.proto == IPPROTO_TCP_)
		return TC_ACT_OK;
	if (p.key.proto == IPPROTO_UDP_ && skb->pkt_type == 0 /* PACKET_HOST */)
		udp_count(p.key.dport, skb->len, 1);
	bg_reverse(&p.key, &k);
	if (!bpf_map_lookup_elem(&lanes_bg_flows, &k)) {
		fg_arrival(skb, &k);
		return TC_ACT_OK;
	}
	if (!bg_pass(skb->ifindex, BG_DIR_INGRESS, skb->len, p.key.saddr))
		return TC_ACT_SHOT;
	ifb = bg_ifb(skb->ifindex, &push_mac);
	if (!ifb || (push_mac && push_link_header(skb) < 0))
		return TC_ACT_OK;
	/* to the IFB's egress; it pulls the link-layer header again and hands
	 * the packet back to this interface's receive path past the ingress
	 * hook */
	return bpf_redirect(ifb, 0);
}

#ifndef LANES_ANDROID_FORM /* the tests' programs: not in the Android form */
/* lanes_pure_ack returns pure_ack's answer (1: a pure ACK), for the tests'
 * BPF_PROG_TEST_RUN table of TCP segments (classifier_test.go).
 */
SEC("tc")
int lanes_pure_ack(struct __sk_buff *skb)
{
	return pure_ack(skb);
}

/*
 * lanes_passthrough is the comparison point for the classifier benchmark:
 * the same attach point and return code, no lookups.
 */
SEC("tc")
int lanes_passthrough(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}
#endif
