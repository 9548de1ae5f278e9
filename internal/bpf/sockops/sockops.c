//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * sockops.c - lanes per-socket program: a cgroup-v2 sock_ops program,
 * attached at the cgroup v2 root through a bpf_link (several lanes daemons in
 * several network namespaces attach side by side), that resolves each TCP
 * socket's lane once and applies the lane's per-socket settings.
 *
 * It acts only on sockets of the network namespace whose cookie the loader
 * set in CFG.netns_cookie (bpf_get_netns_cookie; before 5.15, where sock_ops
 * lacks it, the namespace's inode CFG.netns_ino); the sockets of other
 * namespaces belong to other daemons.
 *
 *   - TCP_CONNECT_CB (active open, before the SYN) and
 *     PASSIVE_ESTABLISHED_CB: resolve the lane (socket cookie already known,
 *     else 5-tuple with the local address (flow_lookup), else destination
 *     prefix, else the socket's cgroup v2 id or an ancestor's, else its
 *     uid) and store cookie -> lane in lanes_cookie for the classifier.
 *     Nothing is stored when nothing matched, so a flow registered later
 *     still wins.
 *   - ACTIVE/PASSIVE_ESTABLISHED_CB: ask for STATE and RTT callbacks; for a
 *     background socket set TCP_NOTSENT_LOWAT = CFG.notsent_lowat so that
 *     its own unsent data stays small; apply the cwnd cap.
 *   - RTT_CB (each RTT sample): apply the cwnd cap if it changed (and switch
 *     a newly capped CUBIC socket's congestion control, below); give
 *     TCP_NOTSENT_LOWAT to a socket that became background after it was
 *     established (the daemon set its cookie's lane later: a 3-tuple
 *     registered after connect, as the LW-LBE API does).
 *   - HDR_OPT_LEN_CB (each segment sent, when asked for): a background
 *     socket's receive window (rLEDBAT, rledbat.h), else the cooperative
 *     downlink cap (rwndcap.h): TCP_WINDOW_CLAMP from lanes_sock_rwnd.
 *   - RTT_CB of a socket whose cookie names another lane after it was
 *     background (a process or cgroup moved back, `lanes move`):
 *     leave_background gives it its own congestion control and
 *     TCP_NOTSENT_LOWAT back; its next segment releases rLEDBAT's window.
 *   - STATE_CB to TCP_CLOSE: drop the cookie's entries.
 *
 * This file holds the programs' entry points and the callbacks' dispatch;
 * the ideas they dispatch to live beside it, each in its own header:
 *   state.h      configuration, maps, per-socket state, counters
 *   resolve.h    a socket's lane (cookie, tuple, prefix, cgroup, uid)
 *   owd.h        a socket's one-way delays per direction (TCP timestamps)
 *   yield.h      the foreground-aware yield (interface, direction, holds,
 *                harm marks)
 *   cause.h      the cause test: whether a held background's absence
 *                lowers the foreground's queue (included by yield.h)
 *   background.h NOTSENT_LOWAT and LEDBAT++ on entering background, both
 *                given back on leaving (callbacks and the live iterator)
 *   cwndcap.h    cwnd caps, capcc switch, pacing, stale clamps
 *   rledbat.h    rLEDBAT: a background download's receive window
 *   rwndcap.h    the cooperative downlink cap (TCP_WINDOW_CLAMP)
 *   bgclamp.h    LEDBAT++ as a cwnd clamp where no struct_ops (over
 *                bgclamp_core.h, shared with the Android form)
 *   fgrcv.h      a foreground download's harm (its receive side)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "lanes_kernel.h"
#include "lanes_maps.h"

char __license[] SEC("license") = "GPL";

#include "state.h"
#include "owd.h"
#include "rledbat.h"
#include "rwndcap.h"
#include "bgclamp.h"
#include "linkrate.h"
#include "yield.h"
#include "fgrcv.h"
#include "resolve.h"
#include "background.h"
#include "cwndcap.h"

/* in_netns: ops's socket belongs to this datapath's network namespace. With
 * CFG.netns_ino set the helper call is dead code the verifier never checks
 * (CFG is read-only, its value known), so the program loads where sock_ops
 * has no bpf_get_netns_cookie. The inode path reads the BTF socket directly
 * (no bpf_probe_read_kernel) and sees full sockets only: on those kernels
 * the SYN-ACK's header-option callbacks (a request socket) are skipped. */
static __always_inline int in_netns(struct bpf_sock_ops *ops)
{
	struct bpf_sock *bsk;
	struct sock *sk;
	struct net *net;

	if (!CFG.netns_ino)
		return bpf_get_netns_cookie(ops) == CFG.netns_cookie;
	bsk = ops->sk;
	sk = bsk ? (struct sock *)bpf_skc_to_tcp_sock(bsk) : 0;
	if (!sk)
		return 0;
	net = sk->__sk_common.skc_net.net;
	return net && net->ns.inum == CFG.netns_ino;
}

SEC("sockops")
int lanes_sockops(struct bpf_sock_ops *ops)
{
	__u64 cookie;
	__u32 lane, *v;

	if (!in_netns(ops))
		return 1;

	switch (ops->op) {
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		bump(OPS_CONNECT);
		fg_opened(ops, resolve(ops, bpf_get_socket_cookie(ops)), FG_AT_CONNECT);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		cookie = bpf_get_socket_cookie(ops);
		if (ops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
			bump(OPS_ACCEPT);
			lane = resolve(ops, cookie);
		} else {
			lane = lane_of(cookie);
		}
		fg_opened(ops, lane, ops->op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB ? FG_AT_PASSIVE : FG_AT_ACTIVE);
		if (lane != LANE_BACKGROUND && CFG.yield) /* the handshake's RTT: its path's (fgpath.h) */
			fg_path_min(ops, ops->srtt_us >> 3, 0);
		bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags |
					       BPF_SOCK_OPS_STATE_CB_FLAG |
					       BPF_SOCK_OPS_RTT_CB_FLAG |
					       ((lane == LANE_BACKGROUND && CFG.rl_target_us) || rwnd_on() ||
							(lane != LANE_BACKGROUND && fg_rcv_on()) ?
						BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG : 0));
		{
			__u8 one = 1;

			bpf_map_update_elem(&lanes_sock_seen, &cookie, &one, BPF_ANY);
		}
		if (lane == LANE_BACKGROUND) {
			set_lowat(ops);
			switch_bg_cc(ops, cookie);
		}
		apply_cap(ops, cookie, lane);
		break;
	case BPF_SOCK_OPS_RTT_CB:
		cookie = bpf_get_socket_cookie(ops);
		/* callbacks asked for by an earlier lanes run reach this program
		 * too: release the clamp that run left on the socket */
		if (!bpf_map_lookup_elem(&lanes_sock_seen, &cookie)) {
			__u8 one = 1;

			bpf_map_update_elem(&lanes_sock_seen, &cookie, &one, BPF_ANY);
			release_stale_clamp(ops);
		}
		lane = lane_of(cookie);
		/* a socket moved to background after it was established (a 3-tuple
		 * registered after connect, as the LW-LBE API does) */
		if (lane == LANE_BACKGROUND) {
			set_lowat(ops);
			switch_bg_cc(ops, cookie);
			bgc_rtt(ops, sharing(ops)); /* LEDBAT++ without struct_ops */
			bg_rtt(ops); /* its own delay: an untold foreground's harm */
			if (CFG.rl_target_us && !(ops->bpf_sock_ops_cb_flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG))
				bpf_sock_ops_cb_flags_set(ops, ops->bpf_sock_ops_cb_flags |
							       BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
		} else {
			/* moved out (a lane, or none: an unregistered flow's
			 * socket that had none before): its own settings */
			struct sk_state *st = sock_state(ops, 0);

			if (st)
				leave_background(ops, st, cookie);
			fg_rtt(ops); /* a foreground socket: is it harmed? */
			fg_rcv_want(ops); /* and its receive side (fgrcv.h) */
		}
		rwnd_want_cb(ops); /* downlink caps turned on after establishment */
		/* the link's capacity: every socket's delivery rate but a held one's */
		if (lane != LANE_BACKGROUND || !yielding(ops, FG_DIR_UP))
			link_rate_sample(ops);
		apply_cap(ops, cookie, lane);
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		cookie = bpf_get_socket_cookie(ops);
		v = bpf_map_lookup_elem(&lanes_cookie, &cookie);
		if (valid_lane(v) && *v == LANE_BACKGROUND && CFG.rl_target_us) {
			/* min(rLEDBAT, downlink cap); beside a present, unharmed
			 * foreground it keeps FG_SHARE_TARGET (CFG.rl_share; 0:
			 * held at the minimum there) */
			int share = sharing(ops);

			rledbat_packet(ops, cookie, yielding(ops, FG_DIR_DOWN) || (share && !CFG.rl_share),
				       share ? CFG.rl_share : 0,
				       CFG.yield && fg_quiet(sock_ifindex(ops), bpf_ktime_get_ns(), 0));
			bg_rcv_delay(ops); /* its own delay: an untold foreground's harm */
			rl_floor_mark(ops); /* its ACKs paced at its floor (classifier.c) */
		} else {
			if (valid_lane(v))
				rledbat_leave(ops); /* moved out of background */
			fg_rcv(ops); /* a foreground download: is it harmed? */
			coop_rwnd(ops, cookie);
		}
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (ops->args[1] == BPF_TCP_CLOSE) {
			cookie = bpf_get_socket_cookie(ops);
			bpf_map_delete_elem(&lanes_cookie, &cookie);
			bpf_map_delete_elem(&lanes_sock_cap, &cookie);
			bpf_map_delete_elem(&lanes_sock_seen, &cookie);
			bpf_map_delete_elem(&lanes_sock_rwnd, &cookie);
			bpf_map_delete_elem(&lanes_app_cc, &cookie);
			bump(OPS_CLOSED);
		}
		break;
	}
	return 1;
}

/* lanes_cc_allowed: the congestion controls anyone may ask for
 * (net.ipv4.tcp_allowed_congestion_control; the loader writes it). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct app_cc_name);
	__type(value, __u8);
} lanes_cc_allowed SEC(".maps");

/* lanes_setsockopt (cgroup/setsockopt, at the cgroup v2 root beside
 * sock_ops): an app's setsockopt(TCP_CONGESTION) on a socket already
 * switched to the background congestion control is skipped (optlen = -1:
 * the call succeeds, the kernel's handler does not run), so the socket keeps
 * LEDBAT++; the name asked for is kept in app_cc and, by the socket's
 * cookie, in lanes_app_cc for the monitor, and leave_background gives it
 * the socket when it leaves background. The new name cannot be
 * written in its place: optlen may only shrink, and the background name is
 * longer than most. A name the kernel would refuse a caller other than root
 * (not in the allow-list) is refused here too (0: EPERM), never kept: it
 * "succeeded" in background, and the move back then ran it, because
 * bpf_setsockopt does not check the allow-list. Only sockets with this
 * program's socket storage are touched, so other namespaces' and not yet
 * connected sockets pass as is. */
SEC("cgroup/setsockopt")
int lanes_setsockopt(struct bpf_sockopt *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	char *val = ctx->optval, *end = ctx->optval_end;
	struct app_cc_name asked = {};
	struct sk_state *st;
	int n;

	if (ctx->level != SOL_TCP || ctx->optname != TCP_CONGESTION || !sk)
		return 1;
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0, 0);
	if (!st || !st->bg_cc)
		return 1;
	n = ctx->optlen;
	/* The copy stops at the name's end: a loop whose every byte chose
	 * between the name and a zero and went on left 2^15 paths to the
	 * verifier (894,587 instructions on 6.18, over the 1,000,000 limit
	 * on 5.10, which then refused the whole sock_ops object). */
	for (int i = 0; i < CC_NAME_LEN - 1; i++) {
		if (i >= n || val + i + 1 > end || !val[i])
			break;
		asked.name[i] = val[i];
	}
	if ((__u32)bpf_get_current_uid_gid() != 0 && !bpf_map_lookup_elem(&lanes_cc_allowed, &asked))
		return 0; /* as the kernel answers: EPERM */
	__builtin_memcpy(st->app_cc, asked.name, CC_NAME_LEN);
	/* a socket already closed (reset) wrote its close: no entry after it */
	if (st->cookie && sk->state != BPF_TCP_CLOSE)
		bpf_map_update_elem(&lanes_app_cc, &st->cookie, &asked, BPF_ANY);
	ctx->optlen = -1;
	bump(OPS_BG_CC_KEPT);
	return 1;
}

/* ---- live moves: the iterator ----------------------------------------
 *
 * lanes_live_cc (iter/tcp, run by the daemon right after it moved open
 * sockets to another lane by cookie, lanes_live_pending): applies the new
 * lane's congestion control and TCP_NOTSENT_LOWAT to each pending socket,
 * and into background asks for the callback rLEDBAT acts at, at once, with the socket locked by the iterator (bpf_setsockopt from
 * iter/tcp: Linux 5.14+), instead of at its next RTT callback; an idle
 * socket so switches too. Loaded apart from the sock_ops program (Load
 * leaves it out), so a kernel without it loses only this.
 */

/* lanes_live_pending: cookie -> the lane it was just moved to; the
 * iterator takes each entry it applied out. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} lanes_live_pending SEC(".maps");

/* live_want_hdr_opt asks a socket just moved into background for
 * HDR_OPT_LEN_CB, where rLEDBAT sets its receive window: a download sends
 * no data, so no RTT callback comes to ask for it (bpf_setsockopt of
 * TCP_BPF_SOCK_OPS_CB_FLAGS: Linux 6.12+; refused before, where the
 * socket's next RTT callback, if it has one, asks). */
static __always_inline void live_want_hdr_opt(struct sock *sk)
{
	int flags = 0;

	if (bpf_getsockopt(sk, SOL_TCP, TCP_BPF_SOCK_OPS_CB_FLAGS, &flags, sizeof(flags)))
		return;
	if (flags & BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG)
		return;
	flags |= BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG;
	bpf_setsockopt(sk, SOL_TCP, TCP_BPF_SOCK_OPS_CB_FLAGS, &flags, sizeof(flags));
}

SEC("iter/tcp")
int lanes_live_cc(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc;
	struct sk_state *st;
	struct sock *sk;
	__u64 cookie;
	__u32 *v, lane;

	/* a kernel without the TCP iterator never runs this (it does not
	 * load there); the check keeps the relocation guarded */
	if (!bpf_core_field_exists(ctx->sk_common))
		return 0;
	skc = ctx->sk_common;
	if (!skc)
		return 0;
	sk = (struct sock *)bpf_skc_to_tcp_sock(skc);
	if (!sk)
		return 0;
	cookie = bpf_get_socket_cookie(sk);
	v = bpf_map_lookup_elem(&lanes_live_pending, &cookie);
	if (!v)
		return 0;
	lane = *v;
	bpf_map_delete_elem(&lanes_live_pending, &cookie);
	st = bpf_sk_storage_get(&lanes_sk_state, sk, 0,
				lane == LANE_BACKGROUND ? BPF_SK_STORAGE_GET_F_CREATE : 0);
	if (!st)
		return 0;
	if (lane != LANE_BACKGROUND) {
		leave_background(sk, st, cookie);
		return 0;
	}
	/* as set_lowat and switch_bg_cc at a callback; marked only once
	 * switched: a refused switch is tried again at the next callback */
	apply_lowat(sk, st);
	if (CFG.bg_cc_name[0] && !st->bg_cc && bg_cc_apply(sk, st) == 0)
		bg_cc_mark(st, cookie);
	if (CFG.rl_target_us)
		live_want_hdr_opt(sk);
	return 0;
}
