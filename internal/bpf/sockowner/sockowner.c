//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * sockowner.c - which process holds which socket: an iter/task_file
 * program (5.8) that writes one record per socket descriptor of every
 * process the reader's pid namespace sees (the kernel visits each fd table
 * once, not once per thread), with the socket's inode number, the process
 * id and the process's name. The monitor reads it instead of a readlink of
 * every /proc/PID/fd/N (what ss -p does), ~3.6 us a descriptor.
 *
 * The socket test is the inode's file type (S_IFSOCK), plain CO-RE loads,
 * no helper: the inode is the one /proc/PID/fd/N names "socket:[INO]".
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "lanes_kernel.h"

char LICENSE[] SEC("license") = "GPL";

struct owner_rec {
	__u64 ino;
	__u32 tgid;
	__u32 pad;
	char comm[16]; /* the thread group leader's, as /proc/PID/comm */
};

/* Keeps struct owner_rec in the BTF for bpf2go -type. */
const struct owner_rec *unused_owner_rec __attribute__((unused));

SEC("iter/task_file")
int owners(struct bpf_iter__task_file *ctx)
{
	struct task_struct *task = ctx->task;
	struct file *file = ctx->file;
	struct owner_rec r = {};
	struct inode *ino;

	if (!task || !file)
		return 0;
	ino = file->f_inode;
	if (!ino || (ino->i_mode & S_IFMT) != S_IFSOCK)
		return 0;
	r.ino = ino->i_ino;
	r.tgid = task->tgid;
	bpf_probe_read_kernel(r.comm, sizeof(r.comm), task->group_leader->comm);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
