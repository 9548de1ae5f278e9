/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * linux/types.h - lanes' own stand-in for the kernel's UAPI types header:
 * the fixed-size integer types the vendored linux/bpf.h and the lanes BPF
 * programs use, for the BPF target alone (LP64, little or big endian).
 *
 * Note: the system's linux/types.h pulls asm/types.h from an
 * architecture's include folder (/usr/include/x86_64-linux-gnu on Debian);
 * this one needs none, so the objects build with -nostdinc the same on any
 * machine.
 */
#ifndef _LINUX_TYPES_H
#define _LINUX_TYPES_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;

typedef __u16 __le16;
typedef __u16 __be16;
typedef __u32 __le32;
typedef __u32 __be32;
typedef __u64 __le64;
typedef __u64 __be64;
typedef __u16 __sum16;
typedef __u32 __wsum;

#define __aligned_u64 __u64 __attribute__((aligned(8)))

#endif /* _LINUX_TYPES_H */
