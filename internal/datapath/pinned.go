// pinned.go: the OEM path. Where lanes cannot load BPF itself (Android:
// SELinux lets only the platform's loaders create maps and load programs),
// the host runs on the classifier another loader loaded and pinned: the
// Android form of lanes' classifier (internal/bpf/android/objects), pinned
// as NetBpfLoad pins it. Each map is opened from its pinned path and
// checked against lanes' own definition (type, key and value sizes,
// entries, flags), so the host's writes mean what they mean in lanes'
// own maps; the programs are the pinned ones. Everything else the host
// does (lane cgroups, the egress trees) is unchanged. sock_ops: the
// Android form's (sockops.o: sock_ops and its socket-creation program)
// where the loader pinned it, attached at the cgroup v2 root with its
// configuration written; else lanes' own on the pinned maps, unless
// turned off.
package datapath

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/lanes-net/lanes/internal/bpf/android"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
)

// Pinned names where another loader pinned lanes' classifier: Root is the
// bpffs it pins under (/sys/fs/bpf on Android), Prefix its location's
// ("tethering/" for objects in the Tethering APEX). The object is
// "classifier": programs Root/<Prefix>prog_classifier_schedcls_<program>,
// maps Root/<Prefix>map__<map> (lanes_maps.h's, shared with sock_ops) or
// Root/<Prefix>map_classifier_<map> (the classifier's own).
type Pinned struct {
	Root, Prefix string
}

// pinnedObject is the Android form's object name, part of every pinned path.
const pinnedObject = "classifier"

// openPinnedClassifier opens the classifier p names.
func openPinnedClassifier(p Pinned) (*classifier.ClassifierObjects, error) {
	spec, err := classifier.LoadClassifier()
	if err != nil {
		return nil, err
	}
	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{}, Programs: map[string]*ebpf.Program{}}
	fail := func(err error) (*classifier.ClassifierObjects, error) {
		coll.Close()
		return nil, err
	}
	for name, ms := range spec.Maps {
		if ms.Name == "" || name[0] == '.' { // .rodata: CFG, a constant in the Android form
			continue
		}
		m, err := openPinnedMap(p, name)
		if err != nil {
			return fail(err)
		}
		coll.Maps[name] = m
		if err := ms.Compatible(m); err != nil {
			return fail(fmt.Errorf("pinned map %s: not lanes' %s: %w", m.String(), name, err))
		}
	}
	for _, name := range []string{"lanes_classify", "lanes_bg_ingress"} {
		path := android.Under(p.Root, android.ProgPin(p.Prefix, pinnedObject, "schedcls/"+name))
		prog, err := ebpf.LoadPinnedProgram(path, nil)
		if err != nil {
			return fail(fmt.Errorf("pinned program %s: %w", name, err))
		}
		coll.Programs[name] = prog
	}
	var objs classifier.ClassifierObjects
	if err := coll.Assign(&objs.ClassifierMaps); err != nil {
		return fail(err)
	}
	objs.LanesClassify = coll.Programs["lanes_classify"]
	objs.LanesBgIngress = coll.Programs["lanes_bg_ingress"]
	// lanes_pure_ack and lanes_passthrough are test programs: not pinned
	return &objs, nil
}

// openPinnedMap opens map name at its shared path, else at the object's.
func openPinnedMap(p Pinned, name string) (*ebpf.Map, error) {
	var errs []error
	for _, shared := range []bool{true, false} {
		path := android.Under(p.Root, android.MapPin(p.Prefix, pinnedObject, name, shared))
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pinned map %s: %w", path, err)
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("pinned map %s: %w", name, errors.Join(errs...))
}

// attachPinnedSockops attaches the Android form's sock_ops the loader
// pinned (program prog_sockops_sockops_lanes_sockops) at the cgroup v2
// root, with the object's socket-creation program
// (prog_sockops_cgroupsockcreate_lanes_sock_create: a socket's creator,
// for the cgroup and uid rules at its connect), and writes its
// configuration (lanes_ops_cfg: background sockets' TCP_NOTSENT_LOWAT,
// LEDBAT++'s target for their cwnd clamp). It returns false where none is
// pinned. What the Android form lacks is off, named.
func (h *Host) attachPinnedSockops() bool {
	p := *h.cfg.Pinned
	prog, err := ebpf.LoadPinnedProgram(android.Under(p.Root, android.ProgPin(p.Prefix, "sockops", "sockops/lanes_sockops")), nil)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err == nil {
		defer prog.Close() // the link holds it
		err = h.configurePinnedSockops(p)
	}
	if err == nil {
		h.opsStats, err = ebpf.LoadPinnedMap(android.Under(p.Root, android.MapPin(p.Prefix, "sockops", "lanes_ops_stats", false)), nil)
	}
	if err == nil {
		h.ownerLink, err = h.attachPinnedOwner(p)
	}
	if err == nil {
		h.opsLink, err = link.AttachCgroup(link.CgroupOptions{Path: h.cfg.CgroupRoot, Attach: ebpf.AttachCGroupSockOps, Program: prog})
	}
	if err != nil {
		if h.ownerLink != nil {
			h.ownerLink.Close()
			h.ownerLink = nil
		}
		h.opsStats.Close()
		h.opsStats = nil
		h.disable(CapSockops, fmt.Errorf("pinned sock_ops: %w", err))
		h.needsSockops()
	}
	return true
}

// attachPinnedOwner attaches the pinned socket-creation program at the
// cgroup v2 root (BPF_CGROUP_INET_SOCK_CREATE, multi: Android's netd
// attaches its own there).
func (h *Host) attachPinnedOwner(p Pinned) (link.Link, error) {
	path := android.Under(p.Root, android.ProgPin(p.Prefix, "sockops", "cgroupsockcreate/lanes_sock_create"))
	prog, err := ebpf.LoadPinnedProgram(path, nil)
	if err != nil {
		return nil, fmt.Errorf("socket-creation program: %w", err)
	}
	defer prog.Close() // the link holds it
	return link.AttachCgroup(link.CgroupOptions{Path: h.cfg.CgroupRoot, Attach: ebpf.AttachCGroupInetSockCreate, Program: prog})
}

// configurePinnedSockops writes lanes_ops_cfg and turns off what the
// Android form's sock_ops does not do.
func (h *Host) configurePinnedSockops(p Pinned) error {
	cfg, err := ebpf.LoadPinnedMap(android.Under(p.Root, android.MapPin(p.Prefix, "sockops", "lanes_ops_cfg", false)), nil)
	if err != nil {
		return err
	}
	defer cfg.Close()
	for _, c := range []Capability{CapCapCC, CapBackgroundCC, CapRLEDBAT, CapBgCCKeep, CapLiveCC, CapExecLane} {
		if _, off := h.off[c]; !off {
			h.off[c] = "not in the pinned sock_ops (Android form)"
		}
	}
	return cfg.Put(uint32(0), [2]uint32{h.notsentLowat(), h.loadBgClamp()})
}

// pinnedOpsCounters reads the pinned sock_ops' counters (lanes_abi.h's
// enum ops_counter, as lanes' own) into s; none without it.
func (h *Host) pinnedOpsCounters(s *HostStats) (err error) {
	if h.opsStats == nil {
		return nil
	}
	s.Sockops, err = sockops.ReadCounters(h.opsStats)
	return err
}
