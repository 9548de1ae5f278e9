/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_kernel.h - the kernel's constants and internal types that the lanes
 * BPF programs use, declared once (a minimal vmlinux.h).
 *
 * Types carry preserve_access_index: a field access compiles to a CO-RE
 * relocation that libbpf/cilium-ebpf resolves against the running kernel's
 * BTF at load time, so only the fields a program reads are declared, in any
 * order, and a struct here is a subset of the kernel's. The constants are
 * UAPI values that never change.
 */
#ifndef LANES_KERNEL_H
#define LANES_KERNEL_H

#include <linux/types.h>

/* linux/if_ether.h */
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD

/* linux/socket.h, linux/in.h, asm-generic/socket.h, linux/tcp.h */
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define SOL_SOCKET 1
#define SOL_TCP 6
#define SO_MAX_PACING_RATE 47
#define TCP_WINDOW_CLAMP 10
#define TCP_CONGESTION 13
#define TCP_NOTSENT_LOWAT 25
/* uapi linux/bpf.h, for bpf_{get,set}sockopt only (Linux 6.12+) */
#define TCP_BPF_SOCK_OPS_CB_FLAGS 1008

/* include/net/tcp_states.h */
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_FIN_WAIT1 4
#define TCP_TIME_WAIT 6
#define TCP_CLOSE 7
#define TCP_NEW_SYN_RECV 12

/* linux/stat.h */
#define S_IFMT 00170000
#define S_IFSOCK 0140000

/* linux/netdevice.h */
#define NET_XMIT_SUCCESS 0
#define NET_XMIT_DROP 1

/* ---- namespaces, cgroups, files, tasks ---- */

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

/* The established hash table the TCP iterator walks (tcpiter's prefetch). */
struct inet_ehash_bucket {
} __attribute__((preserve_access_index));

struct inet_hashinfo {
	struct inet_ehash_bucket *ehash;
	unsigned int ehash_mask;
} __attribute__((preserve_access_index));

struct inet_timewait_death_row {
	struct inet_hashinfo *hashinfo; /* the namespace's table (6.1+), else the global one */
} __attribute__((preserve_access_index));

struct netns_ipv4 {
	struct inet_timewait_death_row tcp_death_row;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
	struct netns_ipv4 ipv4;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} __attribute__((preserve_access_index)) possible_net_t;

typedef struct {
	__u32 val;
} kuid_t;

struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
	int level;
	struct cgroup *ancestors[]; /* Linux 6.0+ */
} __attribute__((preserve_access_index));

/* struct cgroup before Linux 6.0: the ancestors' ids instead of pointers */
struct cgroup___ids {
	int level;
	__u64 ancestor_ids[];
} __attribute__((preserve_access_index));

struct super_block {
	__u32 s_dev;
} __attribute__((preserve_access_index));

struct inode {
	unsigned short i_mode;
	unsigned long i_ino;
	struct super_block *i_sb;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct linux_binprm {
	struct file *file;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct task_struct *group_leader;
	char comm[16];
	struct nsproxy *nsproxy;
} __attribute__((preserve_access_index));

/* ---- sockets ---- */

struct in6_addr {
	__u8 s6_addr[16];
} __attribute__((preserve_access_index));

struct hlist_nulls_node {
	struct hlist_nulls_node *next;
} __attribute__((preserve_access_index));

struct sock_common {
	possible_net_t skc_net;
	__u32 skc_daddr;
	__u32 skc_rcv_saddr;
	__u16 skc_dport; /* network order */
	__u16 skc_num;   /* host order */
	unsigned short skc_family;
	volatile unsigned char skc_state;
	__u32 skc_hash;
	struct hlist_nulls_node skc_nulls_node; /* next: a socket's, or a nulls marker (bit 0 set) */
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct sock_cgroup_data {
	struct cgroup *cgroup; /* 5.15+ */
} __attribute__((preserve_access_index));

/* struct sock_cgroup_data before Linux 5.15: a union whose val is the cgroup
 * pointer when no cgroup v1 net_cls/net_prio data is kept in it */
struct sock_cgroup_data___val {
	__u64 val;
} __attribute__((preserve_access_index));

/* the device of a socket's cached route: where its packets leave */
struct net_device {
	int ifindex;
} __attribute__((preserve_access_index));

struct dst_entry {
	struct net_device *dev;
} __attribute__((preserve_access_index));

struct socket {
} __attribute__((preserve_access_index));

struct socket_alloc {
	struct socket socket;
	struct inode vfs_inode;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	int sk_rcvbuf;
	int sk_sndbuf;
	int sk_wmem_queued;
	struct {
		int owned;
	} sk_lock;
	struct {
		int counter;
	} sk_drops;
	unsigned long sk_pacing_rate;
	struct socket *sk_socket;
	__u16 sk_protocol;
	struct sock_cgroup_data sk_cgrp_data;
	kuid_t sk_uid;
	struct dst_entry *sk_dst_cache;
} __attribute__((preserve_access_index));

struct sock___val {
	struct sock_cgroup_data___val sk_cgrp_data;
} __attribute__((preserve_access_index));

struct inet_sock {
	struct sock sk;
} __attribute__((preserve_access_index));

/* ---- TCP and its congestion control ---- */

struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;
	__u32 in_flight;
} __attribute__((preserve_access_index));

enum tcp_ca_event {
	CA_EVENT_TX_START,
	CA_EVENT_CWND_RESTART,
	CA_EVENT_COMPLETE_CWR,
	CA_EVENT_LOSS,
	CA_EVENT_ECN_NO_CE,
	CA_EVENT_ECN_IS_CE,
};

/* The operations a lanes congestion control sets (the loader matches them
 * to the kernel's members by name) and the name the TCP iterator reads. */
struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*cwnd_event)(struct sock *sk, enum tcp_ca_event ev);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	char name[16];
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	struct inet_sock icsk_inet;
	__u32 icsk_rto;
	const struct tcp_congestion_ops *icsk_ca_ops;
	__u8 icsk_ca_state : 5;
	__u8 icsk_retransmits;
	__u64 icsk_ca_priv[13];
} __attribute__((preserve_access_index));

struct minmax_sample {
	__u32 t;
	__u32 v;
} __attribute__((preserve_access_index));

struct minmax {
	struct minmax_sample s[3];
} __attribute__((preserve_access_index));

struct rcv_rtt_est {
	__u32 rtt_us; /* smoothed, << 3 */
} __attribute__((preserve_access_index));

/* the TCP options of the last segment received (the timestamps: RFC 7323) */
struct tcp_options_received {
	__u32 rcv_tsval; /* the peer's TSval */
	__u32 rcv_tsecr; /* the TSval of ours it echoed; 0: no timestamps agreed */
} __attribute__((preserve_access_index));

struct tcp_sock {
	struct inet_connection_sock inet_conn;
	__u16 advmss;
	__u32 segs_in;
	__u32 rcv_nxt;
	__u32 copied_seq;
	__u64 bytes_received;
	__u32 segs_out;
	__u64 bytes_acked;
	__u32 snd_una;
	__u32 snd_wnd;
	__u32 max_packets_out;
	__u64 tcp_mstamp;
	__u32 snd_nxt;
	__u32 write_seq;
	__u32 window_clamp;
	__u32 rcv_ooopack;
	__u32 mss_cache;
	__u32 srtt_us;
	__u32 mdev_us;
	struct minmax rtt_min;
	__u32 packets_out;
	__u32 snd_ssthresh;
	__u32 snd_cwnd;
	__u32 snd_cwnd_clamp;
	__u8 is_cwnd_limited : 1;
	__u8 rate_app_limited : 1;
	__u32 rate_delivered;
	__u32 rate_interval_us;
	__u32 lost_out;
	__u32 sacked_out;
	__u32 total_retrans;
	__u64 bytes_sent;
	__u64 bytes_retrans;
	struct rcv_rtt_est rcv_rtt_est;
	__u32 chrono_start;
	__u32 chrono_stat[3];
	__u8 chrono_type : 2;
	struct tcp_options_received rx_opt;
	__u8 tcp_usec_ts : 1; /* 6.7+: timestamps in us, not ms */
} __attribute__((preserve_access_index));

/* ---- BPF iterators' contexts ---- */

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
	__u32 uid;
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_sk_storage_map {
	struct bpf_iter_meta *meta;
	struct bpf_map *map;
	struct sock *sk;
	void *value;
} __attribute__((preserve_access_index));

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	__u32 fd;
	struct file *file;
} __attribute__((preserve_access_index));

/* ---- tracepoints (trace_event_raw_<event>) ---- */

/* Fields move between kernels (tcp_probe has skaddr only after 6.1); a
 * field a kernel lacks is read only behind bpf_core_field_exists. */
struct trace_event_raw_tcp_probe {
	__u8 saddr[28]; /* struct sockaddr_in or sockaddr_in6 */
	__u8 daddr[28];
	__u16 sport;    /* host order */
	__u16 dport;
	__u16 data_len; /* (family, 5.13+, is not read: the sockaddr has it) */
	__u32 snd_nxt;
	__u32 snd_una;
	__u32 snd_cwnd;
	__u32 ssthresh;
	__u32 snd_wnd;
	__u32 srtt;     /* µs */
	__u32 rcv_wnd;
	__u64 sock_cookie;
	const void *skaddr; /* after 6.1 */
} __attribute__((preserve_access_index));

struct trace_event_raw_inet_sock_set_state {
	const void *skaddr;
	int oldstate;
	int newstate;
	__u16 sport;
	__u16 dport;
	__u16 family;
	__u16 protocol;
	__u8 saddr[4];
	__u8 daddr[4];
	__u8 saddr_v6[16];
	__u8 daddr_v6[16];
} __attribute__((preserve_access_index));

/* ---- the BPF qdisc (6.16+) ---- */

struct sk_buff {
	__u64 tstamp;
	char cb[48];
	unsigned int len;
	struct sock *sk;
} __attribute__((preserve_access_index));

struct qdisc_skb_cb {
	struct {
		unsigned int pkt_len;
		__u16 slave_dev_queue_mapping;
		__u16 tc_classid;
	};
} __attribute__((preserve_access_index));

struct qdisc_skb_head {
	__u32 qlen;
} __attribute__((preserve_access_index));

struct gnet_stats_queue {
	__u32 backlog;
	__u32 drops;
} __attribute__((preserve_access_index));

struct Qdisc {
	unsigned int limit;
	struct qdisc_skb_head q;
	struct gnet_stats_queue qstats;
} __attribute__((preserve_access_index));

struct bpf_sk_buff_ptr {
	struct sk_buff *skb;
} __attribute__((preserve_access_index));

struct nlattr;
struct netlink_ext_ack;

struct Qdisc_ops {
	char id[16];
	int (*enqueue)(struct sk_buff *skb, struct Qdisc *sch, struct bpf_sk_buff_ptr *to_free);
	struct sk_buff *(*dequeue)(struct Qdisc *sch);
	int (*init)(struct Qdisc *sch, struct nlattr *arg, struct netlink_ext_ack *extack);
	void (*reset)(struct Qdisc *sch);
	void (*destroy)(struct Qdisc *sch);
} __attribute__((preserve_access_index));

#endif /* LANES_KERNEL_H */
