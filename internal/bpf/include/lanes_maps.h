/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_maps.h - the BPF maps shared by the lanes classifier (cls_bpf on the
 * egress HTB) and the lanes sock_ops program, and the structs their keys and
 * values use. Both objects declare the same maps; the Go loader creates them
 * once (with the classifier) and hands them to the sock_ops object through
 * MapReplacements, so both programs see the same state.
 * Their numbers and structs are in lanes_abi.h.
 */
#ifndef LANES_MAPS_H
#define LANES_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "lanes_abi.h"

/* socket cookie -> lane; filled by sock_ops at connect/accept. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u32);
} lanes_cookie SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct flow_key);
	__type(value, __u32);
} lanes_tuple SEC(".maps");

/* cgroup v2 id -> lane (the lane cgroups of this instance and policy rules) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} lanes_cgroup SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} lanes_uid SEC(".maps");

#endif
