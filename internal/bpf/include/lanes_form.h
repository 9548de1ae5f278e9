/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lanes_form.h - how lanes' shared BPF headers declare their maps, and
 * how a tc program names its section, so that one source builds in two
 * forms:
 *   - lanes' own (bpf2go, cilium/ebpf): BTF-defined maps in ".maps", tc
 *     programs in sections "tc";
 *   - the Android form (LANES_ANDROID_FORM, defined by
 *     internal/bpf/android/objects/android_form.h, included first): maps
 *     as struct bpf_map_def entries of "maps", shared between objects
 *     (pinned as map__<name>: the classifier's and sock_ops' objects get
 *     the one map, as lanes' loader hands sock_ops the classifier's), tc
 *     programs in "schedcls/<name>" sections, as NetBpfLoad reads them.
 * The map macros take the fields in the order of the BTF definitions they
 * stand for (type, max_entries[, map_flags], key, value), so lanes' own
 * objects are the same bytes as with the definitions written out.
 */
#ifndef LANES_FORM_H
#define LANES_FORM_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifdef LANES_ANDROID_FORM

/* shared: the classifier's and sock_ops' objects get the one map */
#define LANES_MAP(NAME, TYPE, ENTRIES, KEY, VALUE) \
	ANDROID_SHARED_MAP_FLAGS(NAME, TYPE, sizeof(KEY), sizeof(VALUE), ENTRIES, 0)
#define LANES_MAP_FLAGS(NAME, TYPE, ENTRIES, FLAGS, KEY, VALUE) \
	ANDROID_SHARED_MAP_FLAGS(NAME, TYPE, sizeof(KEY), sizeof(VALUE), ENTRIES, FLAGS)
#define LANES_MAP_NOKEY(NAME, TYPE, ENTRIES) ANDROID_SHARED_MAP_FLAGS(NAME, TYPE, 0, 0, ENTRIES, 0)
#define LANES_TC(NAME) "schedcls/" NAME

#else

#define LANES_MAP(NAME, TYPE, ENTRIES, KEY, VALUE)                                        \
	struct {                                                                          \
		__uint(type, TYPE);                                                       \
		__uint(max_entries, ENTRIES);                                             \
		__type(key, KEY);                                                         \
		__type(value, VALUE);                                                     \
	} NAME SEC(".maps")
#define LANES_MAP_FLAGS(NAME, TYPE, ENTRIES, FLAGS, KEY, VALUE)                           \
	struct {                                                                          \
		__uint(type, TYPE);                                                       \
		__uint(max_entries, ENTRIES);                                             \
		__uint(map_flags, FLAGS);                                                 \
		__type(key, KEY);                                                         \
		__type(value, VALUE);                                                     \
	} NAME SEC(".maps")
#define LANES_MAP_NOKEY(NAME, TYPE, ENTRIES)                                              \
	struct {                                                                          \
		__uint(type, TYPE);                                                       \
		__uint(max_entries, ENTRIES);                                             \
	} NAME SEC(".maps")
#define LANES_TC(NAME) "tc"

#endif

#endif
