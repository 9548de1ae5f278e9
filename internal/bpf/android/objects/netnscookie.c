// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// netnscookie.c (Android form): internal/bpf/netnscookie's program, the
// network namespace's cookie for kernels without SO_NETNS_COOKIE, built as
// NetBpfLoad reads objects (android_form.h): its map a struct bpf_map_def
// in "maps", its section "cgroupsockcreate/" (CGROUP_SOCK, attach type
// INET_SOCK_CREATE), no BTF. Pinned by the loader as
// /sys/fs/bpf/<prefix>prog_netnscookie_cgroupsockcreate_record_netns_cookie
// and /sys/fs/bpf/<prefix>map_netnscookie_netns_cookie.
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include "android_form.h"

#define PROBE_FAMILY 10 /* AF_INET6 */
#define PROBE_TYPE 3    /* SOCK_RAW */
#define PROBE_PROTO 253 /* RFC 3692 experimentation */

ANDROID_MAP(netns_cookie, BPF_MAP_TYPE_ARRAY, __u32, __u64, 1);

/* bpf_get_netns_cookie in cgroup/sock_create: Linux 5.7. */
ANDROID_PROG(record_netns_cookie, ANDROID_KVER(5, 7, 0));

SEC("cgroupsockcreate/record_netns_cookie")
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

ANDROID_LOADER_VERSIONS;
char LICENSE[] SEC("license") = "Dual BSD/GPL";
