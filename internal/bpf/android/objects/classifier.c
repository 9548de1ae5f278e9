// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
// classifier.c (Android form): lanes' egress classifier,
// internal/bpf/classifier/classifier.c itself, built as NetBpfLoad reads
// objects (android_form.h, lanes_form.h): the lane of each packet from its
// socket cookie, 5-tuple, destination prefix, cgroup, uid or DSCP into
// skb->tc_classid (the HTB class minor LANE_CLASS_MINOR + lane, the value
// lanes' loader sets), the ACK class, the foreground stamps and the
// background lane's non-TCP class, each local UDP port's bytes. Its maps are struct bpf_map_def
// entries of "maps" with the names of lanes' own; its two programs are
// sections "schedcls/lanes_classify" (the HTB root's cls_bpf filter, direct
// action, classid 1:0) and "schedcls/lanes_bg_ingress" (clsact ingress);
// no BTF, no CO-RE, no global data. Pinned by the loader as
// /sys/fs/bpf/<prefix>prog_classifier_schedcls_<program> and
// /sys/fs/bpf/<prefix>map_classifier_<map>; a daemon fills those maps as it
// fills its own (datapath.HostConfig.Pinned).
#include "android_form.h"
#include <linux/types.h>
#include <linux/bpf.h>
#include "lanes_abi.h"

/* bpf_skb_load_bytes_relative, bpf_skb_cgroup_id, __sk_buff.sk, ring
 * buffers: Linux 5.8 has every piece; lanes needs 5.10. */
ANDROID_PROG(lanes_classify, ANDROID_KVER(5, 10, 0));
ANDROID_PROG(lanes_bg_ingress, ANDROID_KVER(5, 10, 0));

/* classifier.c's own maps, as its BTF definitions declare them (its
 * lanes' form keeps them written out; TestAndroidFormClassifierMaps
 * compares the two forms map by map). */
ANDROID_MAP(lanes_dscp, BPF_MAP_TYPE_ARRAY, __u32, __u32, 64);
ANDROID_MAP(lanes_cls_stats, BPF_MAP_TYPE_PERCPU_ARRAY, __u32, struct counter, MATCH_KINDS * LANE_SLOTS);
ANDROID_MAP(lanes_ack_on, BPF_MAP_TYPE_ARRAY, __u32, __u32, 1);
ANDROID_MAP(lanes_ack_stats, BPF_MAP_TYPE_PERCPU_ARRAY, __u32, struct counter, 1);
ANDROID_MAP(lanes_udp_bytes, BPF_MAP_TYPE_LRU_HASH, __u32, __u64[2], 4096); /* struct udp_bytes */

/* classifier.c's headers first, then its CFG (HTB class minor base), the
 * one volatile of its own text, as a plain constant: its initializer,
 * LANE_CLASS_MINOR, folded into the code (the loaders create no global
 * data; lanes' loader sets the same value). */
#include "lanes_kernel.h"
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "lanes_maps.h"
#define volatile
#include "../../classifier/classifier.c"
#undef volatile

ANDROID_LOADER_VERSIONS;
