//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ccsysctl.c - tells the daemon at once when someone writes
 * net.ipv4.tcp_allowed_congestion_control, so the copy of that list the
 * cgroup/setsockopt program checks (sockops.c, lanes_cc_allowed) follows
 * the kernel's without polling.
 *
 *   - cgroup/sysctl at the cgroup v2 root (5.2+): on a write to that one
 *     sysctl, one record on the events ring buffer (5.8+). It allows every
 *     read and write and changes none (returns 1, sets no new value).
 *
 * The list is global (its handler sets the flags of the kernel's
 * congestion controls) and only the initial network namespace may write
 * it (it is read-only in the others), so every write seen counts; the
 * daemon reads the list again on each record (a reader may also be a
 * record late: a full ring drops it, counted in lost).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

/* lost counts the records the full ring refused. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

#define CC_ALLOWED "net/ipv4/tcp_allowed_congestion_control"

SEC("cgroup/sysctl")
int lanes_cc_sysctl(struct bpf_sysctl *ctx)
{
	static const char want[] = CC_ALLOWED;
	char name[sizeof(want) + 1] = {};
	__u32 zero = 0;
	__u64 *n;

	if (!ctx->write)
		return 1;
	/* -E2BIG (a longer name, truncated) or another length: not ours */
	if (bpf_sysctl_get_name(ctx, name, sizeof(name), 0) != sizeof(want) - 1)
		return 1;
	for (int i = 0; i < (int)sizeof(want) - 1; i++)
		if (name[i] != want[i])
			return 1;
	if (bpf_ringbuf_output(&events, &zero, sizeof(zero), 0) != 0) {
		n = bpf_map_lookup_elem(&lost, &zero);
		if (n)
			__sync_fetch_and_add(n, 1);
	}
	return 1;
}
