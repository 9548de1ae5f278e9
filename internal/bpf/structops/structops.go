// Package structops registers lanes' struct_ops congestion controls
// (internal/bpf/capcc, internal/bpf/ledbat) with the kernel, in one of two
// ways, and finds and removes the ones a dead process left registered.
//
//   - Link (Linux 6.4+, "bpf: Create links for BPF struct_ops maps"):
//     the map is created with BPF_F_LINK and registered
//     by a bpf_link; the registration ends when the link closes or its
//     process dies.
//   - Update (Linux 5.6+, where struct_ops began): the map is created
//     without BPF_F_LINK and the kernel registers the congestion control
//     when the map's one element is written (cilium/ebpf writes it at load).
//     The registration holds a reference on the map, so it outlives the
//     process: it ends only when the element is deleted. Close deletes it;
//     after a SIGKILL the next start of the same daemon, `lanes reset` or
//     the sweep of a vanished namespace's instance deletes it (Remove).
//
// The map is named after the congestion control ("lanes_" + 8 hex digits,
// unique per daemon instance and namespace), so a leftover is found by
// walking the kernel's maps (BPF_MAP_GET_NEXT_ID), without any file.
// name.go holds the name rules, the name derivation and the load errors
// the loaders share.
package structops

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Mode says how a congestion control is registered.
type Mode int

const (
	Auto   Mode = iota // Link where the kernel has struct_ops links, else Update
	Link               // bpf_link (6.4+): gone with the process
	Update             // map update (5.6+): stays until the element is deleted
)

func (m Mode) String() string {
	switch m {
	case Link:
		return "bpf_link"
	case Update:
		return "map update"
	}
	return "auto"
}

// bpfFLink is BPF_F_LINK (include/uapi/linux/bpf.h).
const bpfFLink = 1 << 13

var (
	linkOnce sync.Once
	linkErr  error
)

// LinkSupported says whether this kernel registers struct_ops through a
// bpf_link: nil when its BTF has struct bpf_struct_ops_link (6.4+).
func LinkSupported() error {
	linkOnce.Do(func() {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			linkErr = fmt.Errorf("kernel BTF: %w", err)
			return
		}
		var st *btf.Struct
		if err := spec.TypeByName("bpf_struct_ops_link", &st); err != nil {
			linkErr = errors.New("no struct_ops bpf_link in this kernel (Linux 6.4+)")
		}
	})
	return linkErr
}

// Resolve turns Auto into the mode this kernel offers.
func (m Mode) Resolve() Mode {
	if m != Auto {
		return m
	}
	if LinkSupported() == nil {
		return Link
	}
	return Update
}

// Prepare sets up a struct_ops map spec before load: the kernel map is
// named name, and in Update mode it loses BPF_F_LINK, so that loading it
// registers the congestion control. m must be resolved.
func Prepare(ms *ebpf.MapSpec, name string, m Mode) error {
	if ms == nil || ms.Type != ebpf.StructOpsMap {
		return errors.New("structops: not a struct_ops map")
	}
	ms.Name = name
	switch m {
	case Link:
		ms.Flags |= bpfFLink
	case Update:
		ms.Flags &^= bpfFLink
	default:
		return fmt.Errorf("structops: unresolved mode %v", m)
	}
	return nil
}

// Registration is one registered congestion control.
type Registration struct {
	Name string
	Mode Mode
	m    *ebpf.Map
	l    link.Link
}

// Register finishes the registration of a loaded map prepared with
// Prepare: in Link mode it attaches the link; in Update mode the load
// already registered it.
func Register(m *ebpf.Map, name string, mode Mode) (*Registration, error) {
	r := &Registration{Name: name, Mode: mode, m: m}
	if mode == Link {
		l, err := link.AttachStructOps(link.StructOpsOptions{Map: m})
		if err != nil {
			return nil, err
		}
		r.l = l
	}
	return r, nil
}

// Close unregisters: closes the link, or deletes the map's element. The
// caller still closes the map.
func (r *Registration) Close() error {
	if r == nil {
		return nil
	}
	if r.l != nil {
		return r.l.Close()
	}
	if err := r.m.Delete(uint32(0)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unregister %s: %w", r.Name, err)
	}
	return nil
}

// Leftover is a struct_ops map registered by map update.
type Leftover struct {
	ID   ebpf.MapID
	Name string
}

// Find lists the struct_ops maps registered by map update (no BPF_F_LINK)
// whose name passes keep.
func Find(keep func(name string) bool) ([]Leftover, error) {
	var out []Leftover
	err := walk(func(id ebpf.MapID, m *ebpf.Map, info *ebpf.MapInfo) {
		if keep(info.Name) {
			out = append(out, Leftover{ID: id, Name: info.Name})
		}
	})
	return out, err
}

// Remove unregisters every struct_ops map registered by map update whose
// name is one of names (a dead daemon's, found by name): it deletes the
// map's element, which unregisters the congestion control and drops the
// registration's reference on the map. It returns the names removed.
func Remove(names ...string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	return removeWhere(func(_ ebpf.MapID, name string) bool { return want[name] })
}

// IDs returns the ids of the struct_ops maps registered by map update
// under name.
func IDs(name string) map[ebpf.MapID]bool {
	ids := map[ebpf.MapID]bool{}
	_ = walk(func(id ebpf.MapID, _ *ebpf.Map, info *ebpf.MapInfo) {
		if info.Name == name {
			ids[id] = true
		}
	})
	return ids
}

// RemoveNew is Remove(name) sparing the maps in before (IDs taken before
// a load that failed: only what that load registered is removed).
func RemoveNew(name string, before map[ebpf.MapID]bool) ([]string, error) {
	return removeWhere(func(id ebpf.MapID, n string) bool { return n == name && !before[id] })
}

func removeWhere(match func(ebpf.MapID, string) bool) ([]string, error) {
	var done []string
	var errs []error
	err := walk(func(id ebpf.MapID, m *ebpf.Map, info *ebpf.MapInfo) {
		if !match(id, info.Name) {
			return
		}
		switch err := m.Delete(uint32(0)); {
		case err == nil:
			done = append(done, info.Name)
		case errors.Is(err, ebpf.ErrKeyNotExist), errors.Is(err, unix.EINPROGRESS):
			// never registered, or already being unregistered
		default:
			errs = append(errs, fmt.Errorf("unregister struct_ops map %d %s: %w", id, info.Name, err))
		}
	})
	return done, errors.Join(append(errs, err)...)
}

// walk calls fn for each struct_ops map without BPF_F_LINK.
func walk(fn func(ebpf.MapID, *ebpf.Map, *ebpf.MapInfo)) error {
	var id ebpf.MapID
	for {
		next, err := ebpf.MapGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("walk BPF maps: %w", err)
		}
		id = next
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		if info, err := m.Info(); err == nil && info.Type == ebpf.StructOpsMap && info.Flags&bpfFLink == 0 {
			fn(id, m, info)
		}
		m.Close()
	}
}

// IsLanes says whether a map or congestion control name is lanes'.
func IsLanes(name string) bool { return strings.HasPrefix(name, "lanes") }
