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
 * Data structures: the maps of lanes_maps.h, lanes_dscp (64 entries) and a
 * per-CPU matrix of counters indexed [kind][lane].
 *
 * Note: the program always returns TC_ACT_OK. It never drops: a packet it
 * cannot parse is interactive. If the filter is removed, HTB's default
 * class (interactive) takes everything, so the datapath fails open.
 * Note: IPv6 extension headers are not walked; a packet whose first next
 * header is not TCP/UDP/UDP-Lite/SCTP has no ports (no 5-tuple match), its
 * DSCP still counts.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "lanes_maps.h"

char __license[] SEC("license") = "GPL";

/* Set by the Go loader before load. */
volatile const struct cls_config {
	__u32 minor_base; /* lane l uses HTB class minor minor_base + l (lane.ClassMinor) */
	__u32 pad;
} CFG = {
	.minor_base = LANE_CLASS_MINOR,
};

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

static __always_inline void count(struct __sk_buff *skb, __u32 kind, __u32 lane)
{
	__u32 idx = kind * LANE_SLOTS + lane;
	struct counter *c = bpf_map_lookup_elem(&lanes_cls_stats, &idx);

	if (c) {
		c->packets++;
		c->bytes += skb->len;
	}
}

static __always_inline int classify(struct __sk_buff *skb, __u32 lane, __u32 kind)
{
	skb->tc_classid = CFG.minor_base + lane;
	count(skb, kind, lane);
	return TC_ACT_OK;
}

SEC("tc")
int lanes_classify(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;
	struct parsed p = {};
	__u32 *v;

	if (sk) {
		__u64 cookie = bpf_get_socket_cookie(skb);

		v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
		if (valid_lane(v))
			return classify(skb, *v, MATCH_COOKIE);
	}

	parse(skb, &p);
	if (p.have_ports) {
		v = flow_lookup(&p.key);
		if (v)
			return classify(skb, *v, MATCH_TUPLE);
	}
	if (p.have_ip) {
		/* without ports (ICMP, fragments) only any-port rules match */
		v = dst_lookup(p.key.daddr, p.have_ports ? p.key.dport : 0);
		if (v)
			return classify(skb, *v, MATCH_DST);
	}

	if (sk) {
		__u64 cg = bpf_skb_cgroup_id(skb);
		__u32 uid;

		v = bpf_map_lookup_elem(&lanes_cgroup, &cg);
		if (valid_lane(v))
			return classify(skb, *v, MATCH_CGROUP);
		uid = bpf_get_socket_uid(skb);
		v = bpf_map_lookup_elem(&lanes_uid, &uid);
		if (valid_lane(v))
			return classify(skb, *v, MATCH_UID);
	}

	if (p.have_ip) {
		__u32 dscp = p.dscp & 63;

		v = bpf_map_lookup_elem(&lanes_dscp, &dscp);
		if (valid_lane(v))
			return classify(skb, *v, MATCH_DSCP);
	}

	return classify(skb, LANE_INTERACTIVE, MATCH_DEFAULT);
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
