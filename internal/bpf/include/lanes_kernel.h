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

#endif /* LANES_KERNEL_H */
