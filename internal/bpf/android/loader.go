// Package android checks BPF objects against the rules of Android's BPF
// loaders, as their public source defines them, so that what lanes ships
// can be judged for an Android build without a phone: which objects a
// loader would load, under which pinned paths, and why the others cannot be.
//
// Two loaders, read on 2026-11-25:
//   - NetBpfLoad, the Tethering mainline module's loader
//     (packages/modules/Connectivity bpf/loader/NetBpfLoad.cpp,
//     BPFLOADER_MAINLINE_VERSION 42, with bpf/headers/include/bpf_map_def.h).
//     It loads only objects inside the Tethering APEX
//     (/apex/com.android.tethering/etc/bpf/...), and it is the only loader
//     that takes the networking program types (sock_ops, cgroup, tc).
//   - bpfloader, the platform's loader (system/bpf bpfloader/BpfLoader.cpp
//     and libbpf_android/Loader.cpp, Android 15). It loads /system/etc/bpf
//     (kprobe, perf_event, socket filter, tracepoint) and /vendor/etc/bpf
//     (socket filter only).
//
// Both read an ELF object the same way: a "license" section; programs in
// sections named by a type prefix ("sockops/", "schedcls/", ...), one
// function each, with a struct bpf_prog_def named <function>_def in a
// "progs" section; maps only as struct bpf_map_def (120 bytes) in a "maps"
// section, named by their symbols; relocations only in the ".rel<section>"
// right after a program's section, only against those maps (a 64-bit
// immediate load becomes the map's fd). They apply no BTF: no .maps
// section, no CO-RE relocations, no global data (.rodata, .data, .bss), no
// calls into .text, no program type that needs a BTF id to attach
// (struct_ops, tp_btf, fentry, iter).
package android

// ProgType is a program type as the kernel's enum bpf_prog_type names it.
type ProgType string

// Loader is one of Android's BPF loaders: its section prefixes and whether
// an object must carry its version sections and a bpf_prog_def per program.
type Loader struct {
	Name string
	// Source names the file and version the rules come from.
	Source string
	// Prefixes maps a program section's name prefix to its type. A
	// program section no prefix matches is not loaded.
	Prefixes map[string]ProgType
	// NeedVersions: the object needs bpfloader_min_ver and
	// bpfloader_max_ver sections (NetBpfLoad aborts without them).
	NeedVersions bool
	// NeedProgDefs: each program needs a <function>_def bpf_prog_def.
	NeedProgDefs bool
}

// Location is a directory a loader loads objects from, the prefix of the
// pinned paths under /sys/fs/bpf, and the program types allowed there
// (nil: every type the loader's prefixes name).
type Location struct {
	Loader  *Loader
	Dir     string
	Prefix  string
	Allowed []ProgType
}

// NetBpfLoad is the Tethering mainline module's loader.
var NetBpfLoad = &Loader{
	Name:   "NetBpfLoad",
	Source: "packages/modules/Connectivity bpf/loader/NetBpfLoad.cpp (BPFLOADER_MAINLINE_VERSION 42)",
	Prefixes: map[string]ProgType{
		"bind4/": "CGROUP_SOCK_ADDR", "bind6/": "CGROUP_SOCK_ADDR",
		"cgroupskb/": "CGROUP_SKB", "cgroupsock/": "CGROUP_SOCK",
		"cgroupsockcreate/": "CGROUP_SOCK", "cgroupsockrelease/": "CGROUP_SOCK",
		"connect4/": "CGROUP_SOCK_ADDR", "connect6/": "CGROUP_SOCK_ADDR",
		"egress/": "CGROUP_SKB", "getsockopt/": "CGROUP_SOCKOPT", "ingress/": "CGROUP_SKB",
		"postbind4/": "CGROUP_SOCK", "postbind6/": "CGROUP_SOCK",
		"recvmsg4/": "CGROUP_SOCK_ADDR", "recvmsg6/": "CGROUP_SOCK_ADDR",
		"schedact/": "SCHED_ACT", "schedcls/": "SCHED_CLS",
		"sendmsg4/": "CGROUP_SOCK_ADDR", "sendmsg6/": "CGROUP_SOCK_ADDR",
		"setsockopt/": "CGROUP_SOCKOPT", "skfilter/": "SOCKET_FILTER",
		"sockops/": "SOCK_OPS", "sysctl": "CGROUP_SYSCTL", "xdp/": "XDP",
	},
	NeedVersions: true,
	NeedProgDefs: true,
}

// PlatformBpfLoader is the platform's loader (/system and /vendor).
var PlatformBpfLoader = &Loader{
	Name:   "bpfloader",
	Source: "system/bpf libbpf_android/Loader.cpp and bpfloader/BpfLoader.cpp (Android 15)",
	Prefixes: map[string]ProgType{
		"kprobe/": "KPROBE", "kretprobe/": "KPROBE", "perf_event/": "PERF_EVENT",
		"skfilter/": "SOCKET_FILTER", "tracepoint/": "TRACEPOINT",
		"uprobe/": "KPROBE", "uretprobe/": "KPROBE",
	},
}

// Locations are the directories the two loaders read, in their order.
var Locations = []Location{
	{Loader: NetBpfLoad, Dir: "/apex/com.android.tethering/etc/bpf/", Prefix: "tethering/"},
	{Loader: NetBpfLoad, Dir: "/apex/com.android.tethering/etc/bpf/netd_shared/", Prefix: "netd_shared/"},
	{Loader: NetBpfLoad, Dir: "/apex/com.android.tethering/etc/bpf/netd_readonly/", Prefix: "netd_readonly/"},
	{Loader: NetBpfLoad, Dir: "/apex/com.android.tethering/etc/bpf/net_shared/", Prefix: "net_shared/"},
	{Loader: NetBpfLoad, Dir: "/apex/com.android.tethering/etc/bpf/net_private/", Prefix: "net_private/"},
	{Loader: PlatformBpfLoader, Dir: "/system/etc/bpf/", Prefix: "",
		Allowed: []ProgType{"KPROBE", "PERF_EVENT", "SOCKET_FILTER", "TRACEPOINT"}},
	{Loader: PlatformBpfLoader, Dir: "/vendor/etc/bpf/", Prefix: "vendor/",
		Allowed: []ProgType{"SOCKET_FILTER"}},
}
