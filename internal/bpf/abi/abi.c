//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/*
 * abi.c - not a program: it only names every type of lanes_abi.h once, so
 * that clang emits their BTF and bpf2go -type turns them into Go constants
 * and structs (abi_bpfel.go). Never loaded.
 */
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "lanes_abi.h"

char __license[] SEC("license") = "GPL";

/* One member per ABI type. */
struct lanes_abi {
	enum lane lane;
	enum lane_class lane_class;
	enum match_kind match_kind;
	enum ops_counter ops_counter;
	struct flow_key flow_key;
	struct dst_key dst_key;
	struct counter counter;
};

struct lanes_abi lanes_abi_types __attribute__((used));
