//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * procevents.c - process events from the scheduler's tracepoints, for the
 * task engine where the proc connector delivers none: the kernel sends
 * connector events only to the initial network namespace, so a daemon in
 * another one (a container, the lab's hosts) would otherwise poll /proc.
 *
 *   - tp_btf/sched_process_exec: exec of (pid, tgid);
 *   - tp_btf/sched_process_fork: a new thread or process, with its parent;
 *   - tp_btf/sched_process_exit: a thread's exit;
 *   - tp_btf/task_rename: a process's new comm (prctl PR_SET_NAME,
 *     /proc/PID/comm), at most one per process per 100 ms (rename_at).
 *
 * Each is one record on the events ring buffer, with the connector's event
 * codes and CLOCK_MONOTONIC time (bpf_ktime_get_ns, as the connector's
 * timestamp), so the engine reads both the same way. Pids are the initial
 * pid namespace's: the loader refuses a reader in another one.
 *
 * Only the tasks of one network namespace (CFG.netns_ino, its inode; 0:
 * every task) make events: a daemon acts on its own namespace's processes,
 * and another namespace's exec, fork and rename neither reach its ring nor
 * count against its pace. A process leader's exit goes out whatever its
 * namespace: a tracked process that left the namespace (setns) is still
 * forgotten when it ends, before its pid is reused.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "lanes_kernel.h"

char LICENSE[] SEC("license") = "GPL";

/* the connector's codes (linux/cn_proc.h) */
#define EV_FORK 0x00000001
#define EV_EXEC 0x00000002
#define EV_COMM 0x00000200
#define EV_EXIT 0x80000000

struct proc_event {
	__u32 what;
	__u32 pid;
	__u32 tgid;
	__u32 parent_pid;  /* fork */
	__u32 parent_tgid; /* fork */
	__u32 pad;
	__u64 time_ns;
	char comm[16]; /* comm */
};

/* Keeps struct proc_event in the BTF for bpf2go -type. */
const struct proc_event *unused_proc_event __attribute__((unused));

volatile const struct procevents_config {
	__u32 netns_ino; /* only this network namespace's tasks; 0: all */
} CFG = {};

/* ours: the task lives in the configured network namespace (its nsproxy,
 * NULL once it has left its namespaces, belongs to none). */
static __always_inline int ours(struct task_struct *p)
{
	struct nsproxy *ns;

	if (!CFG.netns_ino)
		return 1;
	ns = p->nsproxy;
	return ns && ns->net_ns && ns->net_ns->ns.inum == CFG.netns_ino;
}

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

/* lost counts the events the full ring refused (the reader rescans). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline struct proc_event *reserve(__u32 what, struct task_struct *p)
{
	struct proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	__u32 zero = 0;
	__u64 *n;

	if (!e) {
		n = bpf_map_lookup_elem(&lost, &zero);
		if (n)
			(*n)++;
		return 0;
	}
	e->what = what;
	e->pid = p->pid;
	e->tgid = p->tgid;
	e->parent_pid = 0;
	e->parent_tgid = 0;
	e->pad = 0;
	e->time_ns = bpf_ktime_get_ns();
	__builtin_memset(e->comm, 0, sizeof(e->comm));
	return e;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	struct proc_event *e;

	if (!ours(p))
		return 0;
	e = reserve(EV_EXEC, p);
	if (e)
		bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	struct proc_event *e;

	if (!ours(child))
		return 0;
	e = reserve(EV_FORK, child);
	if (!e)
		return 0;
	e->parent_pid = parent->pid;
	e->parent_tgid = parent->tgid;
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	struct proc_event *e;

	if (p->pid != p->tgid && !ours(p))
		return 0; /* another namespace's thread */
	e = reserve(EV_EXIT, p);
	if (e)
		bpf_ringbuf_submit(e, 0);
	return 0;
}

/* rename_at: when a process's last rename went out, and whether renames
 * came since that did not (pending; the reader looks those processes up,
 * Source.PendingRenames). A process at nice 19 looping prctl(PR_SET_NAME)
 * put every rename on the ring: the daemon read them at 81-97 % of a core
 * and overran the ring; now each process's renames go out at most one per
 * RENAME_GAP_NS, and the reader learns of the rest once a second. A
 * thread's rename (not the process's name) is not sent: the engine matches
 * processes. */
struct rename_state {
	__u64 at;
	__u32 pending;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct rename_state);
} rename_at SEC(".maps");

#define RENAME_GAP_NS (100 * 1000 * 1000ULL)

SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct *task, const char *comm)
{
	struct rename_state *st, fresh = {};
	__u32 tgid = task->tgid;
	struct proc_event *e;
	__u64 now;

	if (task->pid != tgid || !ours(task))
		return 0;
	now = bpf_ktime_get_ns();
	st = bpf_map_lookup_elem(&rename_at, &tgid);
	if (st && now - st->at < RENAME_GAP_NS) {
		st->pending = 1;
		return 0;
	}
	fresh.at = now;
	bpf_map_update_elem(&rename_at, &tgid, &fresh, BPF_ANY);
	e = reserve(EV_COMM, task);
	if (!e)
		return 0;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
