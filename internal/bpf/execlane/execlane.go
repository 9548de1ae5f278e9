// Package execlane gives the processes an exe: rule matches their lane
// from their first socket on, decided in the kernel at exec (execlane.c):
// the task engine's move, which follows the exec event, comes after a
// process that connects at once. The datapath loads it beside sock_ops
// with the classifier's cookie map; the daemon fills the executables.
package execlane

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type exe_key Execlane execlane.c -- -nostdinc -I../include -O2 -g -Wall -Werror

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Key names an executable: its file system's device, as the kernel keeps
// it (major << 20 | minor), and its inode.
type Key = ExeclaneExeKey

// KernelDev turns a stat(2) device number into the kernel's dev_t.
func KernelDev(major, minor uint32) uint64 { return uint64(major)<<20 | uint64(minor) }

// Lanes is the loaded, attached programs.
type Lanes struct {
	objs  ExeclaneObjects
	links []link.Link
}

// Load loads the programs over the classifier's lanes_cookie, for the
// namespace with netnsCookie and inode netnsIno (its processes and their
// sockets only), and attaches them (sock_create at cgroupRoot).
func Load(netnsCookie uint64, netnsIno uint32, cookieMap *ebpf.Map, cgroupRoot string) (*Lanes, error) {
	spec, err := LoadExeclane()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["CFG"].Set(ExeclaneExeclaneConfig{NetnsCookie: netnsCookie, NetnsIno: netnsIno}); err != nil {
		return nil, err
	}
	l := &Lanes{}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{"lanes_cookie": cookieMap}}
	if err := spec.LoadAndAssign(&l.objs, opts); err != nil {
		return nil, fmt.Errorf("load exec lanes: %w", err)
	}
	for _, p := range []*ebpf.Program{l.objs.ExecLane, l.objs.ForkLane, l.objs.ExitLane} {
		lk, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("attach %s: %w", p, err)
		}
		l.links = append(l.links, lk)
	}
	lk, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupRoot, Attach: ebpf.AttachCGroupInetSockCreate, Program: l.objs.SockLane})
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("attach cgroup/sock_create at %s: %w", cgroupRoot, err)
	}
	l.links = append(l.links, lk)
	return l, nil
}

// Set replaces the executables and their lanes.
func (l *Lanes) Set(want map[Key]uint32) error {
	var k Key
	var gone []Key
	it := l.objs.LanesExeLane.Iterate()
	var v uint32
	for it.Next(&k, &v) {
		if _, ok := want[k]; !ok {
			gone = append(gone, k)
		}
	}
	var errs []error
	for _, k := range gone {
		errs = append(errs, l.objs.LanesExeLane.Delete(k))
	}
	for k, v := range want {
		errs = append(errs, l.objs.LanesExeLane.Put(k, v))
	}
	return errors.Join(errs...)
}

// Close detaches and unloads everything.
func (l *Lanes) Close() error {
	var errs []error
	for _, lk := range l.links {
		errs = append(errs, lk.Close())
	}
	return errors.Join(append(errs, l.objs.Close())...)
}
