/* udpbytes.h: the bytes each local UDP port sent and received on the
 * managed interfaces (QUIC included), for the views' per-lane UDP rates:
 * the classifier counts a local socket's datagrams leaving, the ingress
 * program those arriving for this host. Keyed by the local port alone: a
 * socket bound to any address and one connected both match their
 * datagrams. */
#ifndef LANES_CLS_UDPBYTES_H
#define LANES_CLS_UDPBYTES_H

struct udp_bytes {
	__u64 tx; /* bytes sent (skb->len at the classifier) */
	__u64 rx; /* bytes received (skb->len at ingress) */
};

#ifndef LANES_ANDROID_FORM /* the Android form declares it itself */
/* lanes_udp_bytes: local UDP port -> its bytes; an LRU, so ports no longer
 * used make room (the daemon reads only its sockets' ports). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct udp_bytes);
} lanes_udp_bytes SEC(".maps");
#endif

/* udp_count adds len to local port port's bytes in direction rx. */
static __always_inline void udp_count(__u16 port, __u32 len, int rx)
{
	__u32 k = port;
	struct udp_bytes *b = bpf_map_lookup_elem(&lanes_udp_bytes, &k);

	if (!b) {
		struct udp_bytes zero = {};

		bpf_map_update_elem(&lanes_udp_bytes, &k, &zero, BPF_NOEXIST);
		b = bpf_map_lookup_elem(&lanes_udp_bytes, &k);
		if (!b)
			return;
	}
	if (rx)
		__sync_fetch_and_add(&b->rx, len);
	else
		__sync_fetch_and_add(&b->tx, len);
}

/* udp_egress counts a local UDP socket's datagram leaving (parsing it
 * unless parsed) and returns whether p holds the parse now. */
static __always_inline int udp_egress(struct __sk_buff *skb, struct bpf_sock *sk, struct parsed *p, int parsed)
{
	if (!sk)
		return parsed;
	sk = bpf_sk_fullsock(sk);
	if (!sk || sk->protocol != IPPROTO_UDP_)
		return parsed;
	if (!parsed)
		parse(skb, p);
	if (p->have_ports && p->key.proto == IPPROTO_UDP_)
		udp_count(p->key.sport, skb->len, 0);
	return 1;
}

#endif
