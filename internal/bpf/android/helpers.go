// helpers.go: the kernel helpers a program type may not call on the
// kernels Android ships, the one rule of the kernel's verifier the
// loaders' rules do not cover: NetBpfLoad loads the program as it is, and
// the kernel refuses it ("unknown func"). Read from each kernel's
// net/core/filter.c (sock_ops_func_proto, bpf_sk_base_func_proto) and
// kernel/bpf/helpers.c (bpf_base_func_proto): Linux 5.10 (Android's
// android12-5.10), 6.1 (Debian's 6.1.192), 6.12 (Debian's 6.12.117, the
// GKI-configured kernel of make android-check), 6.18 (the host's).
package android

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
)

// refusedHelper is a helper a program type may not call before a kernel.
type refusedHelper struct {
	name string
	// from is the first kernel known to allow it (ANDROID_KVER's form);
	// refused names the kernels read that refuse it.
	from    uint32
	refused string
}

func kver(a, b, c uint32) uint32 { return a<<16 | b<<8 | c }

// refusedHelpers: by program type, by helper id (enum bpf_func_id).
// SOCK_OPS runs in softirq as often as in a task, so the task's helpers
// came late: bpf_get_current_cgroup_id through bpf_base_func_proto (6.1
// has it only in cgroup_current_func_proto, which sock_ops does not ask),
// bpf_get_current_uid_gid after 6.12. CGROUP_SOCK (socket creation, a
// task's context) has both from 5.10 on.
var refusedHelpers = map[ProgType]map[int32]refusedHelper{
	"SOCK_OPS": {
		14:  {"bpf_get_current_pid_tgid", kver(6, 12, 0), "5.10, 6.1"},
		15:  {"bpf_get_current_uid_gid", kver(6, 18, 0), "5.10, 6.1, 6.12"},
		16:  {"bpf_get_current_comm", kver(6, 18, 0), "5.10, 6.1, 6.12"},
		80:  {"bpf_get_current_cgroup_id", kver(6, 12, 0), "5.10, 6.1"},
		123: {"bpf_get_current_ancestor_cgroup_id", kver(6, 12, 0), "5.10, 6.1"},
	},
}

// checkHelpers: the helpers program section idx (its function fn, of type
// t) calls that its type may not call on a kernel it is loaded on (from
// its bpf_prog_def's min_kver).
func (c *checker) checkHelpers(idx int, fn string, t ProgType) {
	refused := refusedHelpers[t]
	if refused == nil {
		return
	}
	data, err := c.f.Sections[idx].Data()
	if err != nil {
		return
	}
	minKver := c.progDefMinKver(fn + "_def")
	seen := map[int32]bool{}
	for _, id := range helperCalls(data) {
		h, ok := refused[id]
		if !ok || minKver >= h.from || seen[id] {
			continue
		}
		seen[id] = true
		c.problem("program %s (%s, min_kver %s): calls %s, which the kernel refuses to %s before %s (refused by %s)",
			fn, c.f.Sections[idx].Name, kverString(minKver), h.name, t, kverString(h.from), h.refused)
	}
}

// helperCalls returns the helper ids of the calls in a program's
// instructions (BPF_JMP|BPF_CALL with src_reg 0; a 64-bit immediate load
// is two instructions).
func helperCalls(data []byte) []int32 {
	var ids []int32
	for off := 0; off+8 <= len(data); off += 8 {
		switch data[off] {
		case 0x85: // call
			if data[off+1]>>4 == 0 {
				ids = append(ids, int32(binary.LittleEndian.Uint32(data[off+4:off+8])))
			}
		case 0x18: // ld_imm64
			off += 8
		}
	}
	return ids
}

// progDefMinKver is the min_kver of the bpf_prog_def named name, 0 if none.
func (c *checker) progDefMinKver(name string) uint32 {
	idx := c.sectionIndex("progs")
	if idx < 0 {
		return 0
	}
	data, err := c.f.Sections[idx].Data()
	if err != nil {
		return 0
	}
	for _, s := range c.syms {
		if s.Name == name && int(s.Section) == idx && elf.ST_TYPE(s.Info) != elf.STT_SECTION &&
			s.Value+progDefSize <= uint64(len(data)) {
			return binary.LittleEndian.Uint32(data[s.Value+8 : s.Value+12])
		}
	}
	return 0
}

func kverString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>16, v>>8&0xff, v&0xff)
}
