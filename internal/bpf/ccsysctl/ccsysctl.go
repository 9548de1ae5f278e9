// Package ccsysctl tells its reader when someone writes
// net.ipv4.tcp_allowed_congestion_control (ccsysctl.c: cgroup/sysctl at
// the cgroup v2 root, 5.2+, and a ring buffer, 5.8+), so the daemon's
// copy of the congestion control allow-list follows the kernel's at each
// write instead of at a reload or a poll. It never blocks or alters a
// write.
package ccsysctl

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel Ccsysctl ccsysctl.c -- -nostdinc -I../include -O2 -g -Wall -Werror

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

// Watch is the program attached at a cgroup and its events' reader.
type Watch struct {
	objs CcsysctlObjects
	link link.Link
	rd   *ringbuf.Reader
}

// Attach loads the program and attaches it at cgroup (the cgroup v2 root,
// so every writer is below it) with a bpf_link: other programs there stay.
func Attach(cgroup string) (*Watch, error) {
	w := &Watch{}
	if err := LoadCcsysctlObjects(&w.objs, nil); err != nil {
		return nil, fmt.Errorf("allow-list watch: load (needs cgroup/sysctl, 5.2+, and a ring buffer, 5.8+): %w", err)
	}
	var err error
	w.link, err = link.AttachCgroup(link.CgroupOptions{Path: cgroup, Attach: ebpf.AttachCGroupSysctl, Program: w.objs.LanesCcSysctl})
	if err != nil {
		w.objs.Close()
		return nil, fmt.Errorf("allow-list watch: attach cgroup/sysctl at %s: %w", cgroup, err)
	}
	if w.rd, err = ringbuf.NewReader(w.objs.Events); err != nil {
		w.link.Close()
		w.objs.Close()
		return nil, fmt.Errorf("allow-list watch: ring buffer: %w", err)
	}
	return w, nil
}

// Wait blocks until the next write of the sysctl (or one the ring dropped
// before it); an error once closed (ringbuf.ErrClosed).
func (w *Watch) Wait() error {
	_, err := w.rd.Read()
	return err
}

// Close detaches the program and ends a Wait.
func (w *Watch) Close() error {
	return errors.Join(w.rd.Close(), w.link.Close(), w.objs.Close())
}
