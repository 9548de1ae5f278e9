// bgcc.go loads the background lane's congestion control (LEDBAT++,
// internal/bpf/ledbat) for one host datapath and reports it. sock_ops switches
// every background TCP socket to it, so a background upload yields at a
// bottleneck that is not lanes' own queue (a router's or base station's
// buffer). Without it (no struct_ops) background sockets keep the system's
// congestion control and the datapath says so.
package datapath

import (
	"cmp"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	model "github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/yield"
)

// BackgroundCCStatus says whether background sockets run LEDBAT++, under
// which name and target, and if not why.
type BackgroundCCStatus struct {
	Active     bool          `json:"active"`
	Name       string        `json:"name,omitempty"`       // kernel congestion control name
	Target     time.Duration `json:"target,omitempty"`     // queuing delay target
	Registered string        `json:"registered,omitempty"` // "bpf_link" or "map update" (structops)
	Reason     string        `json:"reason,omitempty"`     // why it is not active
}

// loadBackgroundCC registers this host's LEDBAT++ (target from cfg: 0 =
// the default, negative = off). A failure turns CapBackgroundCC off.
func (h *Host) loadBackgroundCC(cookie uint64) {
	if _, off := h.off[CapBackgroundCC]; off {
		return
	}
	target := h.cfg.BackgroundTarget
	if target < 0 {
		h.off[CapBackgroundCC] = "off by policy"
		return
	}
	if target == 0 {
		target = model.DefaultTargetUS * time.Microsecond
	}
	var err error
	if h.bg, err = ledbat.Load(bgCCName(h.cfg.Instance, cookie), target, h.cfg.StructOps); err != nil {
		h.disable(CapBackgroundCC, fmt.Errorf("no LEDBAT++ for background sockets: they keep the system congestion control and yield only at lanes' own queue: %w", err))
	}
}

// bgCCName is the name sock_ops switches background sockets to ("" = none).
func (h *Host) bgCCName() string {
	if h.bg == nil {
		return ""
	}
	return h.bg.Name
}

// BackgroundCC reports the background lane's congestion control.
func (h *Host) BackgroundCC() BackgroundCCStatus {
	var s BackgroundCCStatus
	err := h.use(func() error {
		if h.bg == nil {
			s.Reason = cmp.Or(h.off[CapBackgroundCC], "not loaded")
			return nil
		}
		s = BackgroundCCStatus{Active: true, Name: h.bg.Name, Target: h.bg.Target, Registered: h.bg.Mode.String()}
		return nil
	})
	if err != nil {
		return BackgroundCCStatus{Reason: err.Error()}
	}
	return s
}

// loadRLEDBAT decides whether sock_ops runs rLEDBAT and returns its target
// in µs (0 = off, CapRLEDBAT says why): off by policy, or where the kernel's
// bpf_setsockopt refuses TCP_WINDOW_CLAMP (before 5.11). Background
// downloads then get the daemon's rLEDBAT (internal/rledbat) where it can run; the sock_ops program
// still stops at a socket's first refusal (rwnd_err) should the kernel
// refuse what its BTF promised.
func (h *Host) loadRLEDBAT() uint32 {
	if _, off := h.off[CapRLEDBAT]; off {
		return 0
	}
	t := h.rledbatTargetUS()
	if t == 0 {
		h.off[CapRLEDBAT] = "off by policy"
		return 0
	}
	if err := haveWindowClamp(); err != nil {
		h.disable(CapRLEDBAT, fmt.Errorf("no rLEDBAT in sock_ops (the daemon runs it where it can: see background downloads in lanes status): %w", err))
		return 0
	}
	return t
}

// haveWindowClamp: a test simulates an older kernel by replacing it.
var haveWindowClamp = sockops.HaveWindowClamp

// rledbatTargetUS is rLEDBAT's target for sock_ops in µs, 0 = off.
func (h *Host) rledbatTargetUS() uint32 {
	switch t := h.cfg.ReceiveTarget; {
	case t < 0:
		return 0
	case t == 0:
		return model.DefaultTargetUS
	default:
		return uint32(t / time.Microsecond)
	}
}

// FgOpenHold is lanes_maps.h's FG_OPEN_HOLD_NS: a new foreground connection
// makes background on its interface yield this long, and stops the
// background non-TCP class's egress (bgclass.h's bg_opened).
const FgOpenHold = 500 * time.Millisecond

// monotonicNS is bpf_ktime_get_ns's clock now.
func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// ForegroundWindows are the classifier's foreground windows by ifindex
// (lanes_fg_active; key 0: any interface), and the monotonic clock when
// they were read: the yield's state, for status.
func (h *Host) ForegroundWindows() (map[int]yield.Window, uint64, error) {
	out := map[int]yield.Window{}
	err := h.use(func() error {
		var idx uint32
		var w yield.Window
		it := h.cls.LanesFgActive.Iterate()
		for it.Next(&idx, &w) {
			out[int(idx)] = w
		}
		return it.Err()
	})
	return out, monotonicNS(), err
}

// BackgroundYielding says whether sock_ops' rule (yielding() in sockops.c)
// holds a background socket whose packets leave by ifindex (0: not known)
// at the minimum window now: the daemon's own rLEDBAT (internal/rledbat)
// follows the same yield as the BPF one.
func (h *Host) BackgroundYielding(ifindex int) bool {
	if !h.cfg.Yield {
		return false
	}
	var on bool
	_ = h.use(func() error {
		on = h.ops != nil && h.fgYield(uint32(max(ifindex, 0)), monotonicNS())
		return nil
	})
	return on
}

// fgYield is lanes_maps.h's fg_yield: the foreground of interface idx (0:
// not known) is active, or a foreground connection opened there (or
// somewhere not known) within FgOpenHold (h.mu held, maps open).
func (h *Host) fgYield(idx uint32, now uint64) bool {
	held := func(i uint32) bool {
		var w yield.Window
		return h.cls.LanesFgActive.Lookup(i, &w) == nil && w.Held(now, yield.KernelRule)
	}
	opened := func(i uint32) bool {
		var t uint64
		return h.cls.LanesFgOpen.Lookup(i, &t) == nil && t != 0 && now-t < uint64(FgOpenHold)
	}
	return held(idx) || opened(idx) || (idx != 0 && opened(0))
}

// SocketRwndCap is the cooperative controller's downlink cap of one socket
// (bytes, 0 = none): rLEDBAT applies the smaller of its window and the cap.
func (h *Host) SocketRwndCap(cookie uint64) uint32 {
	var v uint32
	if h.use(func() error {
		if h.ops == nil {
			return errNoSockops
		}
		return h.ops.LanesSockRwnd.Lookup(cookie, &v)
	}) != nil {
		return 0
	}
	return v
}
