// programs.go: the program sections of an object, their relocations and
// pinned paths, and the CO-RE relocations no Android loader applies.
package android

import (
	"debug/elf"
	"encoding/binary"
	"slices"
	"strings"
)

// progType returns the type a loader gives a section name, or "".
func (l *Loader) progType(section string) ProgType {
	for p, t := range l.Prefixes {
		if strings.HasPrefix(section, p) {
			return t
		}
	}
	return ""
}

// checkPrograms: each executable section against the loader's prefixes,
// the location's allowed types, the prog defs and the relocations.
func (c *checker) checkPrograms() {
	for i, s := range c.f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Size == 0 || s.Name == ".text" {
			continue
		}
		t := c.loc.Loader.progType(s.Name)
		if t == "" {
			c.problem("program section %q: no %s section prefix names its type (not loaded)", s.Name, c.loc.Loader.Name)
			continue
		}
		if c.loc.Allowed != nil && !slices.Contains(c.loc.Allowed, t) {
			c.problem("program section %q: type %s not permitted in %s", s.Name, t, c.loc.Dir)
			continue
		}
		funcs := c.sectionSyms(i, elf.STT_FUNC, false)
		if len(funcs) == 0 {
			c.problem("program section %q: no function symbol", s.Name)
			continue
		}
		if c.loc.Loader.NeedProgDefs && !c.hasProgDef(funcs[0]+"_def") {
			c.problem(`program %s: no %s_def bpf_prog_def in a "progs" section`, funcs[0], funcs[0])
		}
		c.checkRelocations(i)
		c.checkHelpers(i, funcs[0], t)
		name := s.Name
		if j := strings.LastIndex(name, "$"); j >= 0 {
			name = name[:j]
		}
		c.r.Programs = append(c.r.Programs, Program{Section: s.Name, Type: string(t), Pin: ProgPin(c.loc.Prefix, objName(c.r.Object), name)})
	}
}

func (c *checker) hasProgDef(name string) bool {
	idx := c.sectionIndex("progs")
	if idx < 0 {
		return false
	}
	if sec := c.f.Sections[idx]; sec.Size%progDefSize != 0 {
		c.problem(`"progs" section of %d bytes is not a whole number of %d-byte bpf_prog_def`, sec.Size, progDefSize)
		return false
	}
	return slices.Contains(c.sectionSyms(idx, 0, true), name)
}

// checkRelocations: the loader reads only the ".rel<section>" right after
// the program's section and resolves only references to "maps" symbols.
func (c *checker) checkRelocations(idx int) {
	name := c.f.Sections[idx].Name
	relIdx := c.sectionIndex(".rel" + name)
	if relIdx < 0 {
		return
	}
	if relIdx != idx+1 {
		c.problem("relocations of %q are not in the section right after it (the loader ignores them)", name)
		return
	}
	data, err := c.f.Sections[relIdx].Data()
	if err != nil {
		c.problem("relocations of %q: %v", name, err)
		return
	}
	for off := 0; off+16 <= len(data); off += 16 {
		symIdx := int(binary.LittleEndian.Uint64(data[off+8:off+16]) >> 32)
		if symIdx == 0 || symIdx > len(c.syms) {
			c.problem("program section %q: relocation against symbol %d", name, symIdx)
			continue
		}
		sym := c.syms[symIdx-1] // debug/elf drops the null symbol 0
		target := "undefined"
		if int(sym.Section) > 0 && int(sym.Section) < len(c.f.Sections) {
			target = c.f.Sections[sym.Section].Name
		}
		if target != "maps" {
			c.problem("program section %q: reference to %s (in %s): only \"maps\" entries are resolved", name, symName(sym), target)
		}
	}
}

func symName(s elf.Symbol) string {
	if s.Name == "" {
		return "a section symbol"
	}
	return s.Name
}

// checkCORE counts the CO-RE relocations in .BTF.ext (its header's
// core_relo_off and core_relo_len, from 32-byte headers on).
func (c *checker) checkCORE() {
	sec := c.f.Section(".BTF.ext")
	if sec == nil {
		return
	}
	data, err := sec.Data()
	if err != nil || len(data) < 32 {
		return
	}
	le := binary.LittleEndian
	hdrLen := int(le.Uint32(data[4:8]))
	if hdrLen < 32 {
		return
	}
	off, n := hdrLen+int(le.Uint32(data[24:28])), int(le.Uint32(data[28:32]))
	if n <= 4 || off+n > len(data) {
		return
	}
	relos, rec := 0, int(le.Uint32(data[off:off+4]))
	for p := off + 4; p+8 <= off+n && rec > 0; {
		k := int(le.Uint32(data[p+4 : p+8]))
		relos += k
		p += 8 + k*rec
	}
	if relos > 0 {
		c.problem("%d CO-RE relocations: the loader applies none (it reads no BTF)", relos)
	}
}
