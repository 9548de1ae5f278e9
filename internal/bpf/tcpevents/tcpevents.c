//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// tcpevents.c: per-ACK congestion state and flow start/end of TCP sockets,
// from two stable tracepoints, sent to user space through one ring buffer.
//
//   tcp:tcp_probe            fires for every segment a socket receives in
//                            ESTABLISHED (so per ACK on a sender): cwnd,
//                            ssthresh, srtt, snd_wnd, snd_una/nxt.
//   sock:inet_sock_set_state fires on every TCP state change: the first
//                            change of a socket starts its clock (keyed by
//                            its struct sock address, as tcplife does), the
//                            change to ESTABLISHED emits a start event and
//                            the change to CLOSE an end event with the
//                            flow's duration.
//
// Configuration comes as read-only globals set before load: which of the two
// to report, a port list (either side matching; empty = all ports), whether
// probe events are limited to pure ACKs (the default: segments with payload
// only move the receiver's state), and a least gap between two probe events
// of one socket, so a busy flow costs a bounded number of events. Events the ring buffer has no room for are
// counted in `dropped`.
//
// The tracepoint records are hand-written from
// /sys/kernel/tracing/events/{tcp/tcp_probe,sock/inet_sock_set_state}/format
// (the first 8 bytes are the common header).
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "lanes_kernel.h"

#define MAX_PORTS 8

char LICENSE[] SEC("license") = "GPL";

enum event_kind {
	EVENT_PROBE = 1,
	EVENT_START = 2,
	EVENT_END = 3,
};

struct event {
	__u64 ts_ns;       /* CLOCK_MONOTONIC */
	__u64 cookie;      /* probe only: socket cookie */
	__u64 skaddr;
	__u64 duration_ns; /* start: handshake time; end: lifetime */
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u8 kind;
	__u8 oldstate;
	__u8 newstate;
	__u8 pad[3];
	__u32 snd_cwnd;
	__u32 ssthresh;
	__u32 snd_wnd;
	__u32 srtt_us;
	__u32 rcv_wnd;
	__u32 snd_nxt;
	__u32 snd_una;
	__u32 data_len;
	__u32 pid;
	char comm[16];
};

struct config {
	__u8 want_probe;
	__u8 want_state;
	__u8 nports;
	__u8 all_segments; /* probe: also segments carrying data, not just pure ACKs */
	__u16 ports[MAX_PORTS];
	__u64 probe_gap_ns;
	__u64 wakeup_bytes; /* 0: wake the reader per event; else when this much is pending */
};

volatile const struct config CFG = {.want_probe = 1, .want_state = 1};

struct start_info {
	__u64 ts_ns;
	__u32 pid;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct start_info);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} last_probe SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

/* Force the event type into BTF so bpf2go can export it. */
const struct event *unused_event __attribute__((unused));

static __always_inline int port_wanted(__u16 sport, __u16 dport)
{
	if (CFG.nports == 0)
		return 1;
#pragma unroll
	for (int i = 0; i < MAX_PORTS; i++) {
		if (i >= CFG.nports)
			break;
		if (CFG.ports[i] == sport || CFG.ports[i] == dport)
			return 1;
	}
	return 0;
}

/* With wakeup_bytes set, the reader is woken only once enough events are
 * pending and polls for the rest itself: one wake-up per batch instead of
 * per event. */
static __always_inline void submit(struct event *e)
{
	__u64 flags = 0;
	if (CFG.wakeup_bytes)
		flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) + sizeof(*e) >= CFG.wakeup_bytes ?
				BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&dropped, &zero);
	if (n)
		(*n)++;
}

SEC("tracepoint/tcp/tcp_probe")
int on_tcp_probe(struct trace_event_raw_tcp_probe *ctx)
{
	if (!CFG.want_probe || !port_wanted(ctx->sport, ctx->dport))
		return 0;
	/* A sender's congestion state moves on ACKs; segments with payload
	 * arrive at the receiver, whose cwnd nobody asked about. */
	if (!CFG.all_segments && ctx->data_len)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 cookie = ctx->sock_cookie;
	if (CFG.probe_gap_ns) {
		__u64 *last = bpf_map_lookup_elem(&last_probe, &cookie);
		if (last && now - *last < CFG.probe_gap_ns)
			return 0;
		bpf_map_update_elem(&last_probe, &cookie, &now, BPF_ANY);
	}
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop();
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = now;
	e->kind = EVENT_PROBE;
	e->cookie = cookie;
	if (bpf_core_field_exists(ctx->skaddr))
		e->skaddr = (__u64)(long)ctx->skaddr;
	/* sa_family of the sockaddr: the record's own family field is 5.13+ */
	bpf_core_read(&e->family, sizeof(e->family), &ctx->saddr);
	e->sport = ctx->sport;
	e->dport = ctx->dport;
	if (e->family == AF_INET) {
		/* sockaddr_in: family(2) port(2) addr(4) */
		bpf_core_read(e->saddr, 4, &ctx->saddr[4]);
		bpf_core_read(e->daddr, 4, &ctx->daddr[4]);
	} else {
		/* sockaddr_in6: family(2) port(2) flowinfo(4) addr(16) */
		bpf_core_read(e->saddr, 16, &ctx->saddr[8]);
		bpf_core_read(e->daddr, 16, &ctx->daddr[8]);
	}
	e->snd_cwnd = ctx->snd_cwnd;
	e->ssthresh = ctx->ssthresh;
	e->snd_wnd = ctx->snd_wnd;
	e->srtt_us = ctx->srtt;
	e->rcv_wnd = ctx->rcv_wnd;
	e->snd_nxt = ctx->snd_nxt;
	e->snd_una = ctx->snd_una;
	e->data_len = ctx->data_len;
	submit(e);
	return 0;
}

SEC("tracepoint/sock/inet_sock_set_state")
int on_set_state(struct trace_event_raw_inet_sock_set_state *ctx)
{
	if (!CFG.want_state || ctx->protocol != IPPROTO_TCP)
		return 0;
	if (!port_wanted(ctx->sport, ctx->dport))
		return 0;
	__u64 sk = (__u64)(long)ctx->skaddr;
	__u64 now = bpf_ktime_get_ns();
	int newstate = ctx->newstate;
	struct start_info *st = bpf_map_lookup_elem(&starts, &sk);

	if (newstate < TCP_FIN_WAIT1 && !st) {
		/* First sight of this socket: start its clock. The process is
		 * known only for active opens (SYN_SENT runs in connect()). */
		struct start_info s = {.ts_ns = now};
		if (newstate == TCP_SYN_SENT) {
			s.pid = bpf_get_current_pid_tgid() >> 32;
			bpf_get_current_comm(s.comm, sizeof(s.comm));
		}
		bpf_map_update_elem(&starts, &sk, &s, BPF_ANY);
		st = bpf_map_lookup_elem(&starts, &sk);
	}
	if (newstate != TCP_ESTABLISHED && newstate != TCP_CLOSE)
		return 0;
	if (!st && newstate == TCP_CLOSE)
		return 0; /* a socket we never saw open (e.g. a listener) */

	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_drop();
		if (newstate == TCP_CLOSE)
			bpf_map_delete_elem(&starts, &sk);
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = now;
	e->kind = newstate == TCP_ESTABLISHED ? EVENT_START : EVENT_END;
	e->skaddr = sk;
	e->family = ctx->family;
	e->sport = ctx->sport;
	e->dport = ctx->dport;
	e->oldstate = ctx->oldstate;
	e->newstate = newstate;
	if (ctx->family == AF_INET) {
		bpf_core_read(e->saddr, 4, &ctx->saddr);
		bpf_core_read(e->daddr, 4, &ctx->daddr);
	} else {
		bpf_core_read(e->saddr, 16, &ctx->saddr_v6);
		bpf_core_read(e->daddr, 16, &ctx->daddr_v6);
	}
	if (st) {
		e->duration_ns = now - st->ts_ns;
		e->pid = st->pid;
		__builtin_memcpy(e->comm, st->comm, sizeof(e->comm));
	}
	submit(e);
	if (newstate == TCP_CLOSE)
		bpf_map_delete_elem(&starts, &sk);
	return 0;
}
