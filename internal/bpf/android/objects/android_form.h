/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* android_form.h: lanes' BPF objects in the form Android's BPF loaders read
 * (internal/bpf/android/loader.go names the source and version): maps as
 * struct bpf_map_def entries of a "maps" section, a struct bpf_prog_def
 * named <function>_def per program in "progs", the loader version range in
 * bpfloader_min_ver and bpfloader_max_ver. The layouts are those the
 * loader's bpf_map_def.h asserts (120 and 92 bytes, 4-byte aligned). */
#ifndef LANES_ANDROID_FORM_H
#define LANES_ANDROID_FORM_H

/* lanes' shared sources (internal/bpf/include/lanes_form.h) then declare
 * their maps with ANDROID_MAP_FLAGS, fold their loader constants and name
 * their tc sections "schedcls/". */
#define LANES_ANDROID_FORM 1

#include <linux/types.h>

/* Loader versions: from NetBpfLoad's BPFLOADER_MAINLINE_VERSION (42, the
 * version these rules were read from) to v1.0 (0x10000, exclusive). */
#define ANDROID_LOADER_MIN 42u
#define ANDROID_LOADER_MAX 0x10000u
#define ANDROID_KVER(a, b, c) (((a) << 16) | ((b) << 8) | (c))

struct android_map_def {
	__u32 type, key_size, value_size, max_entries, map_flags;
	__u32 zero; /* uid 0, as old loaders require */
	__u32 gid, mode;
	__u32 bpfloader_min_ver, bpfloader_max_ver;
	__u32 min_kver, max_kver;
	char selinux_context[32];
	char pin_subdir[32];
	__u8 shared;
	__u8 ignore_on; /* the ignore_on_* bit fields: none set */
	char pad0[2];
	__u32 uid;
};
_Static_assert(sizeof(struct android_map_def) == 120, "bpf_map_def is 120 bytes");

struct android_prog_def {
	__u32 uid, gid;
	__u32 min_kver, max_kver;
	__u8 optional;
	__u8 ignore_on;
	char pad0[2];
	__u32 bpfloader_min_ver, bpfloader_max_ver;
	char selinux_context[32];
	char pin_subdir[32];
};
_Static_assert(sizeof(struct android_prog_def) == 92, "bpf_prog_def is 92 bytes");

/* ANDROID_MAP_FLAGS(name, type, key size, value size, entries, flags): a
 * map owned by root, mode 0600, on every kernel the loader runs. */
#define ANDROID_MAP_FLAGS(NAME, TYPE, KEY_SIZE, VALUE_SIZE, ENTRIES, FLAGS)              \
	struct android_map_def __attribute__((section("maps"), used)) NAME = {          \
		.type = TYPE, .key_size = KEY_SIZE, .value_size = VALUE_SIZE,            \
		.max_entries = ENTRIES, .map_flags = FLAGS, .mode = 0600,                \
		.bpfloader_min_ver = ANDROID_LOADER_MIN,                                 \
		.bpfloader_max_ver = ANDROID_LOADER_MAX, .max_kver = 0xffffffffu,        \
	}

/* ANDROID_SHARED_MAP_FLAGS: the same, shared between objects: pinned
 * without the object's name (map__<name>), so every object that declares
 * it gets the one map (the loader reuses a map already pinned there). */
#define ANDROID_SHARED_MAP_FLAGS(NAME, TYPE, KEY_SIZE, VALUE_SIZE, ENTRIES, FLAGS)       \
	struct android_map_def __attribute__((section("maps"), used)) NAME = {          \
		.type = TYPE, .key_size = KEY_SIZE, .value_size = VALUE_SIZE,            \
		.max_entries = ENTRIES, .map_flags = FLAGS, .mode = 0600,                \
		.bpfloader_min_ver = ANDROID_LOADER_MIN,                                 \
		.bpfloader_max_ver = ANDROID_LOADER_MAX, .max_kver = 0xffffffffu,        \
		.shared = 1,                                                             \
	}

/* ANDROID_MAP(name, type, key, value, entries): the same, by types. */
#define ANDROID_MAP(NAME, TYPE, KEY, VALUE, ENTRIES)                                     \
	ANDROID_MAP_FLAGS(NAME, TYPE, sizeof(KEY), sizeof(VALUE), ENTRIES, 0)

/* ANDROID_PROG(section, function, min_kver): the program's definition;
 * the function follows in SEC(section). */
#define ANDROID_PROG(FUNC, MIN_KVER)                                                     \
	const struct android_prog_def __attribute__((section("progs"), used)) FUNC##_def = { \
		.min_kver = MIN_KVER, .max_kver = 0xffffffffu,                           \
		.bpfloader_min_ver = ANDROID_LOADER_MIN,                                 \
		.bpfloader_max_ver = ANDROID_LOADER_MAX,                                 \
	}

#define ANDROID_LOADER_VERSIONS                                                          \
	const __u32 __attribute__((section("bpfloader_min_ver"), used))                  \
		android_loader_min_ver = ANDROID_LOADER_MIN;                                  \
	const __u32 __attribute__((section("bpfloader_max_ver"), used))                  \
		android_loader_max_ver = ANDROID_LOADER_MAX

#endif
