// bgcc.go loads the background lane's congestion control (LEDBAT++,
// internal/bpf/ledbat) for one host datapath and reports it. sock_ops switches
// every background TCP socket to it, so a background upload yields at a
// bottleneck that is not lanes' own queue (a router's or base station's
// buffer). Without it (no struct_ops) background sockets keep the system's
// congestion control and sock_ops clamps their cwnd to LEDBAT++'s window
// (CapBgClamp, internal/bpf/sockops bgclamp.h); the datapath says which.
package datapath

import (
	"cmp"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	model "github.com/lanes-net/lanes/internal/ledbat"
)

// BackgroundCCStatus says whether background sockets run LEDBAT++, under
// which name and target, and if not why.
type BackgroundCCStatus struct {
	Active     bool          `json:"active"`
	Name       string        `json:"name,omitempty"`       // kernel congestion control name
	Target     time.Duration `json:"target,omitempty"`     // queuing delay target
	Registered string        `json:"registered,omitempty"` // "bpf_link" or "map update" (structops)
	Reason     string        `json:"reason,omitempty"`     // why it is not active
	// Clamp: not active, LEDBAT++'s window is the background sockets'
	// cwnd clamp from sock_ops instead (Target is its target).
	Clamp bool `json:"clamp,omitempty"`
	// ClampReason: why the clamp is off too (not active, not Clamp).
	ClampReason string `json:"clamp_reason,omitempty"`
}

// Mode says how background uploads are held: LEDBAT++ as their congestion
// control, its window as their cwnd clamp (no struct_ops), or neither.
func (s BackgroundCCStatus) Mode() string {
	switch {
	case s.Active:
		return "congestion control"
	case s.Clamp:
		return "cwnd clamp"
	}
	return "none"
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
	var account map[string]*ebpf.Map // beside a present foreground, a quarter of the target (lanes_fg.h); a quiet link's window
	if h.cfg.Yield {
		account = map[string]*ebpf.Map{ledbat.LedbatMapLanesFgActive: h.cls.LanesFgActive, ledbat.LedbatMapLanesLinkRate: h.linkRate}
	}
	share := ledbatShare(h.cfg.Experiments.Share)
	if h.cfg.Experiments.DirectionsJoined {
		share |= ledbat.RTTDelay
	}
	if h.cfg.Experiments.RateUnkept {
		share |= ledbat.RateUnkept
	}
	if h.cfg.Experiments.NoUndo {
		share |= ledbat.NoUndo
	}
	var err error
	if h.bg, err = ledbat.Load(bgCCName(h.cfg.Instance, cookie), target, share, h.cfg.StructOps, account); err != nil {
		h.disable(CapBackgroundCC, fmt.Errorf("no LEDBAT++ for background sockets: they keep the system congestion control and yield only at lanes' own queue: %w", err))
	}
}

// bgTargetUS is LEDBAT++'s target (µs) for the background lane, 0 = off by policy.
func (h *Host) bgTargetUS() uint32 { return targetUS(h.cfg.BackgroundTarget) }

// targetUS is a policy's queuing-delay target in µs: below 0 off (0), 0
// the default.
func targetUS(t time.Duration) uint32 {
	switch {
	case t < 0:
		return 0
	case t == 0:
		return model.DefaultTargetUS
	default:
		return uint32(t / time.Microsecond)
	}
}

// loadBgClamp returns the target (µs) of LEDBAT++ as the background
// sockets' cwnd clamp (sock_ops, bgclamp.h): on where LEDBAT++ cannot be
// their congestion control (no struct_ops, or background_cc off), unless
// CapBgClamp is off too; 0 = off.
func (h *Host) loadBgClamp() uint32 {
	if h.bg != nil {
		h.off[CapBgClamp] = "LEDBAT++ is the background congestion control"
		return 0
	}
	if _, off := h.off[CapBgClamp]; off {
		return 0
	}
	t := h.bgTargetUS()
	if t == 0 {
		h.off[CapBgClamp] = "off by policy"
	}
	return t
}

// bgCCName is the name sock_ops switches background sockets to ("" = none).
func (h *Host) bgCCName() string {
	if h.bg == nil {
		return ""
	}
	return h.bg.Name
}

// BackgroundCC reports the background lane's congestion control.
func (c *CongestionControls) BackgroundCC() BackgroundCCStatus {
	var s BackgroundCCStatus
	err := c.guard.use(func() error {
		if c.bg == nil {
			s.Reason = cmp.Or(c.off[CapBackgroundCC], "not loaded")
			why, off := c.off[CapBgClamp]
			if !c.sockops && !off { // the pinned sock_ops: opsLink alone
				why, off = "needs sock_ops", true
			}
			s.Clamp, s.ClampReason = !off, why
			if s.Clamp {
				s.Target = time.Duration(targetUS(c.bgTarget)) * time.Microsecond
			}
			return nil
		}
		s = BackgroundCCStatus{Active: true, Name: c.bg.Name, Target: c.bg.Target, Registered: c.bg.Mode.String()}
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
func (h *Host) rledbatTargetUS() uint32 { return targetUS(h.cfg.ReceiveTarget) }

// FgOpenHold is lanes_maps.h's FG_OPEN_HOLD_NS: a new foreground connection
// makes background on its interface yield, and stops the background
// non-TCP class's egress (bgclass.h's bg_opened), until its handshake ends
// and then for FgOpenRTTs of the handshake's RTT or its first flight's time
// at the interface's upload capacity (lanes_link_rate), the longer, at most
// this long.
const FgOpenHold = 500 * time.Millisecond

// FgOpenRTTs is FG_OPEN_RTTS.
const FgOpenRTTs = 2

// monotonicNS is bpf_ktime_get_ns's clock now.
func monotonicNS() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
