// Package yield is the foreground-aware yield of the background lane: while
// an interface's foreground lanes (interactive and realtime) carry traffic,
// the background sockets whose packets leave by that interface are held at
// the minimum window (2 segments of cwnd, 2 segments of receive window), so
// the foreground finds the bottleneck's queue empty wherever it is; when
// the foreground goes idle, they return to LEDBAT++/rLEDBAT. Per interface:
// foreground on one interface does not hold background on another.
//
// The kernel decides it (lanes_maps.h, lanes_fg_active): the classifier
// stamps an interface at every foreground packet of an active window, and
// sock_ops holds its background sockets while the stamp is younger than
// the hold, from their next ACK. Nothing samples: the daemon sleeps, and
// the yield starts at the packet that makes the foreground active instead
// of at the next 100 ms sample. This package states the rule, as the BPF
// code applies it, and reads its state for status.
package yield

import (
	"fmt"
	"time"
)

// Rule is the BPF rule's parameters (lanes_maps.h: FG_WINDOW_NS,
// FG_MIN_PACKETS, FG_MIN_BYTES, FG_HOLD_NS).
type Rule struct {
	Window     time.Duration // a window opens at a foreground packet
	MinPackets uint32        // foreground packets in a window that make it active
	MinBytes   uint32        // or bytes
	Hold       time.Duration // background held this long after the last stamp
}

// KernelRule is the rule the BPF programs apply.
var KernelRule = Rule{Window: 100 * time.Millisecond, MinPackets: 5, MinBytes: 6000, Hold: 500 * time.Millisecond}

func (r Rule) String() string {
	return fmt.Sprintf("foreground >= %d packets or %d bytes within %v, held %v (in the kernel)", r.MinPackets, r.MinBytes, r.Window, r.Hold)
}

// Window is one interface's struct fg_window (lanes_maps.h); times are
// bpf_ktime_get_ns (CLOCK_MONOTONIC).
type Window struct {
	Start, Active, Since, Episodes uint64
	Packets, Bytes                 uint32
}

// Held says whether the window holds background at now (CLOCK_MONOTONIC
// ns), as sock_ops' fg_held does.
func (w Window) Held(now uint64, r Rule) bool {
	return w.Active != 0 && now-w.Active < uint64(r.Hold)
}

// IfaceStatus is one interface's state in Status.
type IfaceStatus struct {
	Yielding bool      `json:"yielding"`
	Since    time.Time `json:"since,omitzero"` // when its yield started
}

// Status is the background component's document (api component op,
// metrics).
type Status struct {
	Yielding   bool                   `json:"yielding"` // on some interface
	Since      time.Time              `json:"since,omitzero"`
	Yields     uint64                 `json:"yields"` // yields started, all interfaces
	Rule       string                 `json:"rule"`
	Interfaces map[string]IfaceStatus `json:"interfaces"`
}

// StatusOf is the status of the interfaces' windows (by name: the
// interfaces whose foreground the classifier has seen) at now, the
// monotonic clock in ns, with wall the wall clock at the same instant.
func StatusOf(windows map[string]Window, now uint64, wall time.Time) Status {
	s := Status{Rule: KernelRule.String(), Interfaces: map[string]IfaceStatus{}}
	for name, w := range windows {
		var is IfaceStatus
		s.Yields += w.Episodes
		if w.Held(now, KernelRule) {
			is.Yielding, is.Since = true, wall.Add(-time.Duration(now-w.Since))
			if !s.Yielding || is.Since.Before(s.Since) {
				s.Yielding, s.Since = true, is.Since
			}
		}
		s.Interfaces[name] = is
	}
	return s
}
