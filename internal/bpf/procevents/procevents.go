// Package procevents reads process events (exec, fork, exit, comm) from
// BPF programs on the scheduler's tracepoints (procevents.c: tp_btf, 5.5+,
// and a ring buffer, 5.8+), for the task engine where the netlink proc
// connector delivers nothing: a daemon outside the initial network
// namespace. The task_rename hook is optional (a kernel without it still
// gives exec, fork and exit).
package procevents

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-19 -target bpfel -type proc_event Procevents procevents.c -- -nostdinc -I../include -O2 -g -Wall -Werror

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
)

// Event is one record: What is the connector's code (linux/cn_proc.h).
type Event = ProceventsProcEvent

// ErrTimeout is Read's answer when no event came within the timeout.
var ErrTimeout = errors.New("procevents: timeout")

// Source is the loaded, attached programs and their ring buffer.
type Source struct {
	objs  ProceventsObjects
	links []link.Link
	rd    *ringbuf.Reader
	rec   ringbuf.Record
}

// Open loads and attaches the programs, for the tasks of the network
// namespace with inode netnsIno (0: every task; a process leader's exit
// comes whatever its namespace). It refuses a caller in a pid namespace
// other than the initial one (the records carry its pids).
func Open(netnsIno uint32) (*Source, error) {
	if nested, err := inChildPidNS(); err != nil || nested {
		return nil, fmt.Errorf("procevents: the caller is in a child pid namespace (the tracepoints report the initial one's pids)")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, err
	}
	spec, err := LoadProcevents()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["CFG"].Set(ProceventsProceventsConfig{NetnsIno: netnsIno}); err != nil {
		return nil, err
	}
	s := &Source{}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load process event programs: %w", err)
	}
	for _, p := range []*ebpf.Program{s.objs.OnExec, s.objs.OnFork, s.objs.OnExit, s.objs.OnRename} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			if p == s.objs.OnRename {
				continue // comm changes are a nicety: exec, fork and exit suffice
			}
			s.Close()
			return nil, fmt.Errorf("attach %s: %w", p, err)
		}
		s.links = append(s.links, l)
	}
	rd, err := ringbuf.NewReader(s.objs.Events)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("process events ring: %w", err)
	}
	s.rd = rd
	return s, nil
}

// Read waits up to timeout for the next event.
func (s *Source) Read(timeout time.Duration) (Event, error) {
	var e Event
	s.rd.SetDeadline(time.Now().Add(timeout))
	if err := s.rd.ReadInto(&s.rec); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return e, ErrTimeout
		}
		return e, err
	}
	if err := binary.Read(bytes.NewReader(s.rec.RawSample), binary.NativeEndian, &e); err != nil {
		return e, fmt.Errorf("process event: %w", err)
	}
	return e, nil
}

// PendingRenames returns the processes whose renames the programs held
// back (more than one per 100 ms) since the last call, and clears them:
// the caller looks them up as if renamed now.
func (s *Source) PendingRenames() []int {
	type state struct {
		At      uint64
		Pending uint32
		Pad     uint32
	}
	var (
		tgid uint32
		st   state
		out  []int
	)
	it := s.objs.RenameAt.Iterate()
	for it.Next(&tgid, &st) {
		if st.Pending != 0 {
			out = append(out, int(tgid))
		}
	}
	for _, pid := range out {
		st := state{}
		if s.objs.RenameAt.Lookup(uint32(pid), &st) == nil {
			st.Pending = 0
			_ = s.objs.RenameAt.Update(uint32(pid), st, ebpf.UpdateExist)
		}
	}
	return out
}

// Lost is how many events the full ring refused since Open.
func (s *Source) Lost() uint64 {
	var per []uint64
	if s.objs.Lost.Lookup(uint32(0), &per) != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// Close detaches and unloads everything.
func (s *Source) Close() error {
	var errs []error
	if s.rd != nil {
		errs = append(errs, s.rd.Close())
	}
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// Comm is the event's comm as a string (comm events only).
func Comm(e Event) string {
	b := make([]byte, 0, len(e.Comm))
	for _, c := range e.Comm {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// Probe loads and attaches the programs and removes them again (`lanes doctor`).
func Probe() error {
	s, err := Open(0)
	if err != nil {
		return err
	}
	return s.Close()
}

// inChildPidNS: /proc/self/status lists more than one pid (NSpid).
func inChildPidNS() (bool, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(rest)) > 1, nil
		}
	}
	return false, nil
}
