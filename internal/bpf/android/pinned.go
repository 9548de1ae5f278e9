// pinned.go: the objects a loader pinned, where a Report says it pins
// them. A daemon on Android cannot load BPF itself (SELinux allows
// prog_load and map_create to the loader alone); it opens what the loader
// pinned instead. Pin does the loader's pinning, for a test or an
// emulation of the loader, under any bpffs root.
package android

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// Pin pins o's programs and maps at r's paths under root (the loader's
// bpfFdPin; its subdirectories, such as tethering/, created).
func (r Report) Pin(o *Objects, root string) error {
	for _, p := range r.Programs {
		if err := pinAt(o.Programs[p.Section], Under(root, p.Pin)); err != nil {
			return err
		}
	}
	for _, m := range r.Maps {
		if err := pinAt(o.Maps[m.Name], Under(root, m.Pin)); err != nil {
			return err
		}
	}
	return nil
}

func pinAt(obj interface{ Pin(string) error }, path string) error {
	if err := mkdirBPF(filepath.Dir(path)); err != nil {
		return err
	}
	return obj.Pin(path)
}

// LoadAndPin is what loc's loader does with the object at path at boot,
// with root as its bpffs (/sys/fs/bpf on Android): Load, where a map
// already pinned at its path (a shared map another object created) is
// reused, then every program and every new map pinned at its path. It
// returns the object's Report (its pinned paths).
func LoadAndPin(path string, loc Location, root string) (Report, error) {
	r, err := Check(path, loc)
	if err != nil {
		return r, err
	}
	o, err := load(path, loc, root)
	if err != nil {
		return r, err
	}
	defer o.Close() // the pins hold them
	for _, p := range r.Programs {
		if err := pinAt(o.Programs[p.Section], Under(root, p.Pin)); err != nil {
			return r, err
		}
	}
	for _, m := range r.Maps {
		if o.Maps[m.Name].IsPinned() {
			continue // reused
		}
		if err := pinAt(o.Maps[m.Name], Under(root, m.Pin)); err != nil {
			return r, err
		}
	}
	return r, nil
}

// OpenPinned opens the programs and maps r names, pinned under root
// (/sys/fs/bpf on Android).
func OpenPinned(r Report, root string) (*Objects, error) {
	o := &Objects{Maps: map[string]*ebpf.Map{}, Programs: map[string]*ebpf.Program{}}
	for _, p := range r.Programs {
		prog, err := ebpf.LoadPinnedProgram(Under(root, p.Pin), nil)
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("pinned program %s: %w", p.Section, err)
		}
		o.Programs[p.Section] = prog
	}
	for _, m := range r.Maps {
		mp, err := ebpf.LoadPinnedMap(Under(root, m.Pin), nil)
		if err != nil {
			o.Close()
			return nil, fmt.Errorf("pinned map %s: %w", m.Name, err)
		}
		o.Maps[m.Name] = mp
	}
	return o, nil
}

// mkdirBPF creates a directory on bpffs (mkdir works there).
func mkdirBPF(dir string) error {
	return os.MkdirAll(dir, 0o755)
}
