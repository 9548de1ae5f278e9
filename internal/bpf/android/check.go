// check.go: one object against one Location's rules (loader.go), read with
// debug/elf as the loaders read it: section by section, symbol by symbol.
package android

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Sizes of Android's struct bpf_map_def and struct bpf_prog_def
// (bpf_map_def.h's static asserts).
const (
	mapDefSize  = 120
	progDefSize = 92
)

// Program is a program the loader would load and where it pins it.
type Program struct {
	Section, Type, Pin string
}

// Map is a "maps" entry and where the loader pins it.
type Map struct {
	Name, Pin string
}

// Report is what a Location's loader would do with one object.
type Report struct {
	Object   string
	Location Location
	Programs []Program
	// Maps are the object's "maps" entries.
	Maps []Map
	// Problems are the rules the object breaks; empty means loadable.
	Problems []string
}

// OK reports whether the loader would load every program of the object.
func (r Report) OK() bool { return len(r.Problems) == 0 && len(r.Programs) > 0 }

// objName is the loaders' pathToObjName: the file name without its
// extension and without an @version suffix.
func objName(path string) string {
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if i := strings.LastIndex(name, "@"); i >= 0 {
		name = name[:i]
	}
	return name
}

// Check reads the object at path as loc's loader would.
func Check(path string, loc Location) (Report, error) {
	f, err := elf.Open(path)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return Report{}, fmt.Errorf("%s: symbols: %w", path, err)
	}
	c := &checker{f: f, syms: syms, loc: loc, r: Report{Object: path, Location: loc}}
	c.checkSections()
	c.checkMaps()
	c.checkPrograms()
	c.checkCORE()
	return c.r, nil
}

type checker struct {
	f    *elf.File
	syms []elf.Symbol
	loc  Location
	r    Report
}

func (c *checker) problem(format string, a ...any) {
	c.r.Problems = append(c.r.Problems, fmt.Sprintf(format, a...))
}

// checkSections: licence, version sections, and the sections no loader reads.
func (c *checker) checkSections() {
	if c.f.Section("license") == nil {
		c.problem(`no "license" section (the loader refuses the object)`)
	}
	if c.loc.Loader.NeedVersions {
		for _, s := range []string{"bpfloader_min_ver", "bpfloader_max_ver"} {
			if sec := c.f.Section(s); sec == nil || sec.Size < 4 {
				c.problem("no %q section of 4 bytes (%s aborts)", s, c.loc.Loader.Name)
			}
		}
	}
	if c.f.Section(".maps") != nil {
		c.problem(`BTF-defined maps (".maps"): the loader creates only struct bpf_map_def entries of a "maps" section`)
	}
	for _, s := range []string{".kconfig", ".struct_ops", ".struct_ops.link"} {
		if sec := c.f.Section(s); sec != nil && sec.Size > 0 {
			c.problem("section %q: struct_ops maps and kconfig are not created by the loader", s)
		}
	}
	// The loaders skip every section whose name names no program type
	// (readCodeSections), so global data matters only where code refers
	// to it: a constant the compiler folded into the code (an aggregate
	// initializer) and left behind is never read.
	referenced := c.referencedSections()
	for _, s := range []string{".rodata", ".data", ".bss"} {
		if sec := c.f.Section(s); sec != nil && sec.Size > 0 && referenced[s] {
			c.problem("section %q: global data is not created by the loader", s)
		}
	}
	if sec := c.f.Section(".text"); sec != nil && sec.Size > 0 {
		c.problem(`".text" holds subprograms: the loader loads each program section alone, without bpf-to-bpf calls`)
	}
}

// referencedSections names the sections some relocation of the object
// points into.
func (c *checker) referencedSections() map[string]bool {
	out := map[string]bool{}
	for _, rel := range c.f.Sections {
		if rel.Type != elf.SHT_REL {
			continue
		}
		data, err := rel.Data()
		if err != nil {
			continue
		}
		for off := 0; off+16 <= len(data); off += 16 {
			symIdx := int(binary.LittleEndian.Uint64(data[off+8:off+16]) >> 32)
			if symIdx == 0 || symIdx > len(c.syms) {
				continue
			}
			if sec := int(c.syms[symIdx-1].Section); sec > 0 && sec < len(c.f.Sections) {
				out[c.f.Sections[sec].Name] = true
			}
		}
	}
	return out
}

// sectionSyms returns the names of the symbols defined in section idx,
// sorted by value as the loaders sort them, optionally only of one type.
func (c *checker) sectionSyms(idx int, typ elf.SymType, anyType bool) []string {
	var s []elf.Symbol
	for _, sym := range c.syms {
		if int(sym.Section) == idx && (anyType || elf.ST_TYPE(sym.Info) == typ) {
			s = append(s, sym)
		}
	}
	sort.SliceStable(s, func(i, j int) bool { return s[i].Value < s[j].Value })
	names := make([]string, len(s))
	for i, sym := range s {
		names[i] = sym.Name
	}
	return names
}

func (c *checker) sectionIndex(name string) int {
	for i, s := range c.f.Sections {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// checkMaps: the "maps" section's entries and their pinned paths.
func (c *checker) checkMaps() {
	idx := c.sectionIndex("maps")
	if idx < 0 {
		return
	}
	data, err := c.f.Sections[idx].Data()
	if err != nil || len(data)%mapDefSize != 0 {
		c.problem(`"maps" section of %d bytes is not a whole number of %d-byte bpf_map_def`, len(data), mapDefSize)
		return
	}
	names := c.sectionSyms(idx, 0, true)
	for i, name := range names {
		if (i+1)*mapDefSize > len(data) {
			c.problem("map %s: past the end of the maps section", name)
			break
		}
		def := data[i*mapDefSize : (i+1)*mapDefSize]
		if binary.LittleEndian.Uint32(def[20:24]) != 0 {
			c.problem("map %s: bpf_map_def.zero is not 0 (the loader aborts)", name)
		}
		prefix := c.loc.Prefix
		if sub := cString(def[80:112]); sub != "" {
			prefix = sub
		}
		c.r.Maps = append(c.r.Maps, Map{Name: name, Pin: MapPin(prefix, objName(c.r.Object), name, def[112] != 0)})
	}
}

// MapPin is where the loaders pin map name of object obj at a location
// with prefix ("tethering/"): /sys/fs/bpf/<prefix>map_<obj>_<name>, or,
// for a map its definition marks shared, without the object's name.
func MapPin(prefix, obj, name string, shared bool) string {
	if shared {
		obj = ""
	}
	return "/sys/fs/bpf/" + prefix + "map_" + obj + "_" + name
}

// ProgPin is where the loaders pin the program of section (its "/" as "_")
// of object obj: /sys/fs/bpf/<prefix>prog_<obj>_<section>.
func ProgPin(prefix, obj, section string) string {
	return "/sys/fs/bpf/" + prefix + "prog_" + obj + "_" + strings.ReplaceAll(section, "/", "_")
}

// Under moves a /sys/fs/bpf path under root, the bpffs mount the loader
// pinned in.
func Under(root, pin string) string {
	return filepath.Join(root, strings.TrimPrefix(pin, "/sys/fs/bpf/"))
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
