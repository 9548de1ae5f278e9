//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * execlane.c - an exe: rule's lane from the process's first socket on. The
 * task engine moves a matching process into its lane's cgroup after the
 * exec event reaches the daemon; a process that opens and uses a socket
 * before that would send its first packets in the wrong lane. Here the
 * kernel decides at exec itself:
 *
 *   - tp_btf/sched_process_exec: the new image's (device, inode) looked up
 *     in lanes_exe_lane (the daemon fills it from the exe: rules that name
 *     an absolute path and nothing else): the process's tgid -> lane in
 *     lanes_task_lane, or out of it (an exec of another image, or in
 *     another network namespace than this datapath's: another daemon's
 *     processes take no entry of this one's map);
 *   - tp_btf/sched_process_fork: a new process of a marked one inherits
 *     the mark (not one made in a network namespace of its own);
 *     tp_btf/sched_process_exit: the leader's exit drops it;
 *   - cgroup/sock_create (at the cgroup v2 root): a socket of this
 *     datapath's namespace created by a marked process gets the lane by its
 *     cookie in lanes_cookie (the classifier's first lookup, sock_ops' at
 *     connect), before any packet of it, TCP and UDP alike.
 *
 * Pids are the initial pid namespace's on both sides (the tracepoints and
 * bpf_get_current_pid_tgid).
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "lanes_kernel.h"
#include "lanes_maps.h"

char LICENSE[] SEC("license") = "GPL";

/* an executable: its file system's device (the kernel's dev_t) and inode */
struct exe_key {
	__u64 dev;
	__u64 ino;
};

/* Keeps struct exe_key in the BTF for bpf2go -type. */
const struct exe_key *unused_exe_key __attribute__((unused));

volatile const struct execlane_config {
	__u64 netns_cookie; /* only sockets of this network namespace */
	__u32 netns_ino;    /* only processes of this network namespace */
	__u32 pad;
} CFG = {};

/* ours: the task lives in this datapath's network namespace. */
static __always_inline int ours(struct task_struct *p)
{
	struct nsproxy *ns = p->nsproxy;

	return ns && ns->net_ns && ns->net_ns->ns.inum == CFG.netns_ino;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct exe_key);
	__type(value, __u32);
} lanes_exe_lane SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u32);
} lanes_task_lane SEC(".maps");

SEC("tp_btf/sched_process_exec")
int BPF_PROG(exec_lane, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	struct exe_key k = {};
	struct inode *ino = bprm->file->f_inode;
	__u32 tgid = p->tgid, *lane;

	k.dev = ino->i_sb->s_dev;
	k.ino = ino->i_ino;
	lane = ours(p) ? bpf_map_lookup_elem(&lanes_exe_lane, &k) : 0;
	if (lane)
		bpf_map_update_elem(&lanes_task_lane, &tgid, lane, BPF_ANY);
	else
		bpf_map_delete_elem(&lanes_task_lane, &tgid);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_lane, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, tgid = child->tgid, *lane;

	if (child->pid != tgid)
		return 0; /* a thread: its process has the mark already */
	lane = bpf_map_lookup_elem(&lanes_task_lane, &ptgid);
	if (lane && ours(child))
		bpf_map_update_elem(&lanes_task_lane, &tgid, lane, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(exit_lane, struct task_struct *p)
{
	__u32 tgid = p->tgid;

	if (p->pid == tgid)
		bpf_map_delete_elem(&lanes_task_lane, &tgid);
	return 0;
}

SEC("cgroup/sock_create")
int sock_lane(struct bpf_sock *sk)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, *lane;
	__u64 cookie;

	lane = bpf_map_lookup_elem(&lanes_task_lane, &tgid);
	if (!lane || bpf_get_netns_cookie(sk) != CFG.netns_cookie)
		return 1;
	cookie = bpf_get_socket_cookie(sk);
	bpf_map_update_elem(&lanes_cookie, &cookie, lane, BPF_ANY);
	return 1;
}
