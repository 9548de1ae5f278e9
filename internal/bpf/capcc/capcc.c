//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * capcc.c - lanes "CUBIC with an enforced clamp": a BPF struct_ops TCP
 * congestion control that delegates every operation to the kernel's CUBIC
 * (through its kfuncs) and then pulls snd_cwnd down to snd_cwnd_clamp.
 *
 * Why: the cooperative controller caps a socket's cwnd with sock_ops
 * bpf_setsockopt(TCP_BPF_SNDCWND_CLAMP), which only sets snd_cwnd_clamp and
 * snd_ssthresh. CUBIC applies the clamp inside cong_avoid, after it has
 * returned early for a socket that is not cwnd-limited, so a socket whose
 * cwnd is already large (receive-window- or application-limited) keeps it.
 * Here the clamp is applied after CUBIC on every call that may leave cwnd
 * above it:
 *   - init (the sock_ops program switches a socket to this CC right after
 *     setting its first clamp, so the switch itself brings cwnd down);
 *   - cong_avoid, which tcp_cong_control calls on every ACK that acks data
 *     outside CWR/Recovery (Open, Disorder, Loss), cwnd-limited or not: the
 *     first such ACK after a cap change brings cwnd down;
 *   - set_state (leaving Recovery without an undo marker keeps PRR's
 *     cwnd = in_flight + sndcnt, which can be above the clamp; entering Loss
 *     sets cwnd = in_flight + 1);
 *   - cwnd_event (CA_EVENT_TX_START/CWND_RESTART: a sender restarting after
 *     idle sends at most the clamp, not the old cwnd);
 *   - undo_cwnd (an undone reduction restores at most the clamp).
 *   - pkts_acked (a released socket: below) keeps ssthresh where the
 *     release put it.
 * In CWR/Recovery the kernel's PRR (tcp_cwnd_reduction) owns cwnd: it
 * sets cwnd = in_flight + sndcnt on each ACK, which stays above the clamp
 * while more than the clamp is still in flight from before the cap, but
 * sends less than is acked until in_flight reaches snd_ssthresh (which
 * TCP_BPF_SNDCWND_CLAMP set to the clamp, or less after a loss); the clamp
 * is applied again when the state changes.
 *
 * The name is set by the loader before load (one name per lanes datapath:
 * congestion control names are global to the kernel); the map is in
 * .struct_ops.link: on 6.4+ it is registered through a bpf_link and
 * unregistered when the link closes or its process dies; before, the
 * loader drops BPF_F_LINK and the map update registers it until the
 * element is deleted (internal/bpf/structops). Sockets already using it
 * keep it (the kernel holds a reference) until they close.
 *
 * A released socket slow-starts to its first loss. Removing a cap sets
 * the clamp to CAP_NONE through TCP_BPF_SNDCWND_CLAMP, which sets
 * snd_ssthresh to it too (infinite: slow start). But the caps are
 * removed when the safety fallback finds someone else's queue, and
 * CUBIC's HyStart (armed again by cubictcp_init at the switch to this
 * congestion control) reads that queue as its own slow start's: the
 * round's RTT above the connection's minimum by more than 4-16 ms ends
 * slow start within a round (ssthresh = cwnd), and the socket grows from
 * its cap by CUBIC's curve while a plain flow that won the start holds
 * its window (the lab's coop-mixed: 9 of 60 released uploads grew less
 * than 1.6x, some not at all, in the 0.6-1.4 s before their next loss,
 * beside a plain winner's 140-425 segments). So while the clamp is CAP_NONE and
 * ssthresh is still the release's, pkts_acked puts back the ssthresh
 * HyStart lowered; the first loss sets it as for any flow (and then
 * HyStart, found, stays off as CUBIC leaves it).
 *
 * Only snd_cwnd and (on a released socket) snd_ssthresh are written;
 * net/ipv4/bpf_tcp_ca.c allows a BPF congestion control to write
 * snd_cwnd, snd_cwnd_cnt, snd_cwnd_stamp, snd_ssthresh, ecn_flags,
 * app_limited, sk_pacing_* and icsk_ca_priv.
 */
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "lanes_abi.h"
#include "lanes_kernel.h"

char __license[] SEC("license") = "GPL";

#ifndef bpf_ksym_exists
#define bpf_ksym_exists(sym) (!!(sym))
#endif

extern void cubictcp_init(struct sock *sk) __ksym;
extern __u32 cubictcp_recalc_ssthresh(struct sock *sk) __ksym;
extern void cubictcp_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern void cubictcp_state(struct sock *sk, __u8 new_state) __ksym;
/* Gone in 7.x (CUBIC handles only CA_EVENT_TX_START, through its own op). */
extern void cubictcp_cwnd_event(struct sock *sk, enum tcp_ca_event event) __ksym __weak;
extern void cubictcp_acked(struct sock *sk, const struct ack_sample *sample) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* enforce sets snd_cwnd = min(snd_cwnd, snd_cwnd_clamp) (never below 1). */
static __always_inline void enforce(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 clamp = tp->snd_cwnd_clamp;

	if (clamp && tp->snd_cwnd > clamp)
		tp->snd_cwnd = clamp;
}

SEC("struct_ops")
void BPF_PROG(lanes_cc_init, struct sock *sk)
{
	cubictcp_init(sk);
	enforce(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(lanes_cc_ssthresh, struct sock *sk)
{
	return cubictcp_recalc_ssthresh(sk);
}

SEC("struct_ops")
void BPF_PROG(lanes_cc_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	cubictcp_cong_avoid(sk, ack, acked);
	enforce(sk);
}

SEC("struct_ops")
void BPF_PROG(lanes_cc_set_state, struct sock *sk, __u8 new_state)
{
	cubictcp_state(sk, new_state);
	enforce(sk);
}

SEC("struct_ops")
void BPF_PROG(lanes_cc_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (bpf_ksym_exists(cubictcp_cwnd_event))
		cubictcp_cwnd_event(sk, ev);
	enforce(sk);
}

SEC("struct_ops")
void BPF_PROG(lanes_cc_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 ss = tp->snd_ssthresh;

	cubictcp_acked(sk, sample);
	/* released, no loss since: HyStart's exit undone (see the top) */
	if (tp->snd_cwnd_clamp == CAP_NONE && ss == CAP_NONE && tp->snd_ssthresh != ss)
		tp->snd_ssthresh = ss;
}

SEC("struct_ops")
__u32 BPF_PROG(lanes_cc_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 cwnd = tcp_reno_undo_cwnd(sk);
	__u32 clamp = tp->snd_cwnd_clamp;

	if (clamp && cwnd > clamp)
		cwnd = clamp;
	return cwnd;
}

SEC(".struct_ops.link")
struct tcp_congestion_ops lanes_capcc = {
	.init = (void *)lanes_cc_init,
	.ssthresh = (void *)lanes_cc_ssthresh,
	.cong_avoid = (void *)lanes_cc_cong_avoid,
	.set_state = (void *)lanes_cc_set_state,
	.cwnd_event = (void *)lanes_cc_cwnd_event,
	.pkts_acked = (void *)lanes_cc_pkts_acked,
	.undo_cwnd = (void *)lanes_cc_undo_cwnd,
	.name = "lanes_capcc",
};
