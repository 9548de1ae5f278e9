// load.go: an object in the loaders' form loaded the way NetBpfLoad loads
// it (loadProg: createMaps, readCodeSections, applyMapRelo,
// loadCodeSections), without pinning: the maps created from their
// bpf_map_def, each program section's instructions with every relocated
// 64-bit load turned into a map fd load, loaded with the section's type,
// expected attach type and the object's licence. It shows that what Check
// passes is what the kernel accepts from such a loader.
package android

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
)

// kernelTypes: NetBpfLoad's section prefixes as the kernel's program and
// expected attach types (sectionNameTypes), those lanes' programs use.
var kernelTypes = map[string]struct {
	prog   ebpf.ProgramType
	attach ebpf.AttachType
}{
	"cgroupsockcreate/": {ebpf.CGroupSock, ebpf.AttachCGroupInetSockCreate},
	"cgroupsock/":       {ebpf.CGroupSock, ebpf.AttachNone},
	"cgroupskb/":        {ebpf.CGroupSKB, ebpf.AttachNone},
	"egress/":           {ebpf.CGroupSKB, ebpf.AttachCGroupInetEgress},
	"ingress/":          {ebpf.CGroupSKB, ebpf.AttachCGroupInetIngress},
	"schedcls/":         {ebpf.SchedCLS, ebpf.AttachNone},
	"sockops/":          {ebpf.SockOps, ebpf.AttachCGroupSockOps},
	"setsockopt/":       {ebpf.CGroupSockopt, ebpf.AttachCGroupSetsockopt},
	"skfilter/":         {ebpf.SocketFilter, ebpf.AttachNone},
}

// Objects are the maps and programs of one object, by name (programs by
// section name).
type Objects struct {
	Maps     map[string]*ebpf.Map
	Programs map[string]*ebpf.Program
}

// Close releases every map and program.
func (o *Objects) Close() {
	for _, p := range o.Programs {
		p.Close()
	}
	for _, m := range o.Maps {
		m.Close()
	}
}

// Load loads the object at path as loc's loader would, after Check.
func Load(path string, loc Location) (*Objects, error) {
	return load(path, loc, "")
}

// load is Load; with a bpffs root, each map whose pinned path under root
// exists is that map (createMaps: the loader reuses a pinned map, so
// objects share the maps they declare shared).
func load(path string, loc Location, root string) (*Objects, error) {
	r, err := Check(path, loc)
	if err != nil {
		return nil, err
	}
	if !r.OK() {
		return nil, fmt.Errorf("%s: not loadable at %s: %s", path, loc.Dir, strings.Join(r.Problems, "; "))
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	c := &checker{f: f, syms: syms, loc: loc}
	// before 5.11 maps count against RLIMIT_MEMLOCK; later kernels charge
	// the memory cgroup instead (RemoveMemlock then changes nothing)
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	o := &Objects{Maps: map[string]*ebpf.Map{}, Programs: map[string]*ebpf.Program{}}
	if err := c.createMaps(o, r, root); err != nil {
		o.Close()
		return nil, err
	}
	if err := c.loadPrograms(o); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// createMaps creates each "maps" entry from its bpf_map_def, or opens the
// map pinned at its path under root (root "": none) if it fits the
// definition.
func (c *checker) createMaps(o *Objects, r Report, root string) error {
	specs, err := c.mapSpecs()
	if err != nil {
		return err
	}
	for i, spec := range specs {
		var m *ebpf.Map
		if root != "" && i < len(r.Maps) {
			if m, err = ebpf.LoadPinnedMap(Under(root, r.Maps[i].Pin), nil); err == nil {
				if err = spec.Compatible(m); err != nil {
					m.Close()
					return fmt.Errorf("map %s pinned at %s: %w", spec.Name, r.Maps[i].Pin, err)
				}
			} else if !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("map %s: %w", spec.Name, err)
			}
		}
		if m == nil {
			if m, err = ebpf.NewMap(spec); err != nil {
				return fmt.Errorf("map %s: %w", spec.Name, err)
			}
		}
		o.Maps[spec.Name] = m
	}
	return nil
}

// mapSpecs reads each "maps" entry's bpf_map_def as the kernel's map
// parameters.
func (c *checker) mapSpecs() ([]*ebpf.MapSpec, error) {
	idx := c.sectionIndex("maps")
	if idx < 0 {
		return nil, nil
	}
	data, err := c.f.Sections[idx].Data()
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	var specs []*ebpf.MapSpec
	for i, name := range c.sectionSyms(idx, 0, true) {
		if (i+1)*mapDefSize > len(data) {
			return nil, fmt.Errorf("map %s: past the end of the maps section", name)
		}
		def := data[i*mapDefSize : (i+1)*mapDefSize]
		specs = append(specs, &ebpf.MapSpec{Name: name, Type: ebpf.MapType(le.Uint32(def[0:4])),
			KeySize: le.Uint32(def[4:8]), ValueSize: le.Uint32(def[8:12]),
			MaxEntries: le.Uint32(def[12:16]), Flags: le.Uint32(def[16:20])})
	}
	return specs, nil
}

// MapSpecs returns the kernel parameters of the object's "maps" entries,
// as the loader creates them.
func MapSpecs(path string) ([]*ebpf.MapSpec, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, err
	}
	return (&checker{f: f, syms: syms}).mapSpecs()
}

// loadPrograms loads each program section with its map loads resolved.
func (c *checker) loadPrograms(o *Objects) error {
	license, err := c.f.Section("license").Data()
	if err != nil {
		return err
	}
	for i, s := range c.f.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Size == 0 || s.Name == ".text" {
			continue
		}
		insns, err := c.instructions(i, o.Maps)
		if err != nil {
			return fmt.Errorf("program section %q: %w", s.Name, err)
		}
		kt, ok := kernelTypes[strings.SplitAfter(s.Name, "/")[0]]
		if !ok {
			return fmt.Errorf("program section %q: no kernel type for its prefix here", s.Name)
		}
		name := strings.ReplaceAll(s.Name, "/", "_")
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name[:min(len(name), 15)], Type: kt.prog,
			AttachType: kt.attach, Instructions: insns, License: string(bytes.TrimRight(license, "\x00"))})
		if err != nil {
			return fmt.Errorf("program section %q: %w", s.Name, err)
		}
		o.Programs[s.Name] = p
	}
	return nil
}

// instructions decodes section idx and points every 64-bit load its
// .rel section names at that map's fd (applyRelo: src_reg PSEUDO_MAP_FD).
func (c *checker) instructions(idx int, maps map[string]*ebpf.Map) (asm.Instructions, error) {
	data, err := c.f.Sections[idx].Data()
	if err != nil {
		return nil, err
	}
	relocs := map[uint64]string{} // byte offset -> map name
	if rel := c.sectionIndex(".rel" + c.f.Sections[idx].Name); rel == idx+1 {
		rd, err := c.f.Sections[rel].Data()
		if err != nil {
			return nil, err
		}
		for off := 0; off+16 <= len(rd); off += 16 {
			sym := c.syms[int(binary.LittleEndian.Uint64(rd[off+8:off+16])>>32)-1]
			relocs[binary.LittleEndian.Uint64(rd[off:off+8])] = sym.Name
		}
	}
	var insns asm.Instructions
	rd := bytes.NewReader(data)
	for off := uint64(0); ; {
		var ins asm.Instruction
		if err := ins.Unmarshal(rd, binary.LittleEndian, "linux"); errors.Is(err, io.EOF) {
			return insns, nil
		} else if err != nil {
			return nil, err
		}
		if name, ok := relocs[off]; ok {
			ins.Src = asm.PseudoMapFD
			if err := ins.AssociateMap(maps[name]); err != nil {
				return nil, fmt.Errorf("map %s at byte %d: %w", name, off, err)
			}
		}
		insns = append(insns, ins)
		off += ins.Size()
	}
}
