//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// netnscookie.c: the network namespace's cookie for kernels without
// SO_NETNS_COOKIE (5.14). A cgroup/sock_create program may call
// bpf_get_netns_cookie from 5.7 (which also makes the kernel assign the
// cookie, lazily before 5.12). The loader attaches it to its own cgroup for
// one socket creation: a raw IPv6 socket of protocol 253 (RFC 3692,
// for experiments), which nothing else creates, and reads the cookie the
// program stored. It allows every socket.
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#define PROBE_FAMILY 10 /* AF_INET6 */
#define PROBE_TYPE 3    /* SOCK_RAW */
#define PROBE_PROTO 253 /* RFC 3692 experimentation */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} netns_cookie SEC(".maps");

SEC("cgroup/sock_create")
int record_netns_cookie(struct bpf_sock *sk)
{
	__u32 zero = 0;
	__u64 cookie;

	if (sk->family != PROBE_FAMILY || sk->type != PROBE_TYPE || sk->protocol != PROBE_PROTO)
		return 1;
	cookie = bpf_get_netns_cookie(sk);
	bpf_map_update_elem(&netns_cookie, &zero, &cookie, BPF_ANY);
	return 1;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
