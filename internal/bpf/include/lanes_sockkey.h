/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_sockkey.h - a sock_ops socket's 5-tuple as a lanes_tuple key
 * (lanes_abi.h's struct flow_key: remote address and port, local address
 * and port, IPv4 v4-mapped, ports in host order), from bpf_sock_ops'
 * fields alone (no CO-RE), for the sock_ops programs that resolve a
 * socket's lane (flow_lookup, dst_lookup of lanes_maps.h). It returns 0
 * for a family other than IPv4 and IPv6.
 */
#ifndef LANES_SOCKKEY_H
#define LANES_SOCKKEY_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include "lanes_abi.h"

static __always_inline int sock_flow_key(struct bpf_sock_ops *ops, struct flow_key *key)
{
	if (ops->family == 2 /* AF_INET */) {
		__u32 a = ops->remote_ip4, l = ops->local_ip4;

		key->daddr[10] = 0xff;
		key->daddr[11] = 0xff;
		__builtin_memcpy(&key->daddr[12], &a, 4);
		key->saddr[10] = 0xff;
		key->saddr[11] = 0xff;
		__builtin_memcpy(&key->saddr[12], &l, 4);
	} else if (ops->family == 10 /* AF_INET6 */) {
		/* one 4-byte context load each: the verifier refuses wider ones */
		__u32 a[4] = {*(volatile __u32 *)&ops->remote_ip6[0], *(volatile __u32 *)&ops->remote_ip6[1],
			      *(volatile __u32 *)&ops->remote_ip6[2], *(volatile __u32 *)&ops->remote_ip6[3]};
		__u32 l[4] = {*(volatile __u32 *)&ops->local_ip6[0], *(volatile __u32 *)&ops->local_ip6[1],
			      *(volatile __u32 *)&ops->local_ip6[2], *(volatile __u32 *)&ops->local_ip6[3]};

		__builtin_memcpy(key->daddr, a, 16);
		__builtin_memcpy(key->saddr, l, 16);
	} else {
		return 0;
	}
	/* remote_port: the be16 port in the high half on little endian */
	key->dport = bpf_ntohl(ops->remote_port) & 0xffff;
	key->sport = ops->local_port;
	key->proto = 6; /* IPPROTO_TCP */
	return 1;
}

#endif
