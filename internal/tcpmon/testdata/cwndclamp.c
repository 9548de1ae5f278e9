//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// cwndclamp.c: test-only sock_ops program pinning the congestion window of
// connections to one server port with TCP_BPF_SNDCWND_CLAMP, so the
// monitor's tests have a flow whose cwnd is known (internal/tcpmon).
// Built by `go generate` (see integration_test.go); attached to a throw-away
// cgroup holding only the test's sender process.
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define SOL_TCP 6

char LICENSE[] SEC("license") = "GPL";

volatile const __u32 port = 0;  /* server port, host order */
volatile const __u32 clamp = 10; /* segments */

SEC("sockops")
int cwnd_clamp(struct bpf_sock_ops *skops)
{
	if (bpf_ntohl(skops->remote_port) != port)
		return 1;
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB: {
		int v = clamp;
		bpf_setsockopt(skops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &v, sizeof(v));
		break;
	}
	}
	return 1;
}
