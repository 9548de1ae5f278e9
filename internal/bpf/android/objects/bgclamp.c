// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// bgclamp.c (Android form): the background upload's LEDBAT++ without
// struct_ops, internal/bpf/sockops' cwnd clamp (bgclamp_core.h, over
// ledbat_core.h: the same arithmetic) built as NetBpfLoad reads objects
// (android_form.h): section "sockops/" (SOCK_OPS), maps as struct
// bpf_map_def in "maps", no BTF, no CO-RE, no global data, no calls.
//   - bg_target[cookie]: the queuing-delay target (us) of a background
//     socket, for a daemon that knows its lanes to write (lanes' daemon
//     loads its own sock_ops instead: docs/android.md); others are left
//     alone;
//   - established sockets ask for RTT and state callbacks;
//   - at each RTT callback of a background socket: bgc_step on its state
//     (bgc_state[cookie]), and TCP_BPF_SNDCWND_CLAMP when the window
//     changed; the sender's cwnd-limited flag needs CO-RE, so growth waits
//     only for cwnd to reach the window;
//   - at close: the socket's entries go.
// Pinned by the loader as /sys/fs/bpf/<prefix>prog_bgclamp_sockops_lanes_bgclamp
// and map_bgclamp_<map>.
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include "android_form.h"

ANDROID_MAP(bg_target, BPF_MAP_TYPE_HASH, __u64, __u32, 4096);
#include "bgclamp_form.h"

/* RTT callbacks with sock_ops' socket cookie and bpf_setsockopt's cwnd
 * clamp: Linux 4.19 has every piece; lanes needs 5.10. */
ANDROID_PROG(lanes_bgclamp, ANDROID_KVER(5, 10, 0));

SEC("sockops/lanes_bgclamp")
int lanes_bgclamp(struct bpf_sock_ops *ops)
{
	__u64 cookie;
	__u32 *target;

	switch (ops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_RTT_CB_FLAG |
					       BPF_SOCK_OPS_STATE_CB_FLAG);
		break;
	case BPF_SOCK_OPS_RTT_CB:
		cookie = bpf_get_socket_cookie(ops);
		target = bpf_map_lookup_elem(&bg_target, &cookie);
		if (target && *target)
			bgc_clamp(ops, cookie, *target);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (ops->args[1] == BPF_TCP_CLOSE) {
			cookie = bpf_get_socket_cookie(ops);
			bpf_map_delete_elem(&bg_target, &cookie);
			bpf_map_delete_elem(&bgc_state, &cookie);
		}
		break;
	}
	return 1;
}

ANDROID_LOADER_VERSIONS;
char LICENSE[] SEC("license") = "Dual BSD/GPL";
