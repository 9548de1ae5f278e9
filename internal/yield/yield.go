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
	Gap, QuietNS                   uint32 // ns: its stamps' gap, how long after a stamp it is quiet
}

// Held says whether the window holds background at now (CLOCK_MONOTONIC
// ns), as sock_ops' fg_held does.
func (w Window) Held(now uint64, r Rule) bool {
	return w.Active != 0 && now-w.Active < uint64(r.Hold)
}

// Quiet and Recent are lanes_fg.h's FG_QUIET_NS and FG_RECENT_NS: a
// foreground whose last stamp is its quiet (to a download six gaps between
// its stamps, at most Quiet; to an upload Quiet) to Recent old sent
// recently and sends nothing now (a video between its segments, between
// page loads).
const (
	Quiet  = 150 * time.Millisecond
	Recent = 10 * time.Second
)

// Quiet says whether the window's foreground is quiet at now to
// background in direction dir (Up, Down), as the kernel's fg_quiet: the
// link between its bursts, which background takes back at once. Up it is
// Quiet after the last stamp (an upload's last packet leaves ahead of its
// queue at the bottleneck), down the measured QuietNS.
func (w Window) Quiet(now uint64, dir int) bool {
	after := uint64(w.QuietNS)
	if after == 0 || dir == Up {
		after = uint64(Quiet)
	}
	return w.Active != 0 && now-w.Active >= after && now-w.Active < uint64(Recent)
}

// HarmHold is lanes_maps.h's FG_HARM_HOLD_NS: background stays held this
// long after a foreground socket's last harmed RTT sample.
const HarmHold = 100 * time.Millisecond

// HarmQueue is FG_HARM_QD_US: a foreground socket whose smoothed RTT is
// above its minimum by more than this is harmed.
const HarmQueue = 10 * time.Millisecond

// ShareDiv is FG_SHARE_TARGET's divisor (lanes_fg.h): beside a present,
// unharmed foreground, background keeps target/ShareDiv of queue (at
// least ShareMin).
const (
	ShareDiv = 4
	ShareMin = time.Millisecond
)

// ShareTarget is FG_SHARE_TARGET(target).
func ShareTarget(target time.Duration) time.Duration {
	if target/ShareDiv > ShareMin {
		return target / ShareDiv
	}
	return min(target, ShareMin)
}

// Harm is one interface's struct fg_harm (lanes_maps.h): when a foreground
// TCP socket by it last read harm, in either direction and per direction,
// or a background socket's own delay beside a foreground no TCP sample
// speaks for did (CLOCK_MONOTONIC ns).
type Harm struct {
	At, Since, Samples uint64
	QueueUS            uint32
	Kind               uint32    // Harm* (FG_HARM_KIND_*): what the last harmed sample read
	Seen               uint64    // the last foreground TCP RTT sample, harmed or not
	DirUntil           [2]uint64 // each direction's hold ends (Up, Down): HarmHold or 2 RTTs after its last harmed sample
	// each direction's queue as foreground sockets with TCP timestamps
	// read it, harmed or not: the largest reading of the 100 ms slot
	// (FG_DIRQ_SLOT_NS) of the last one (DirQueueAt, 0: never) and of the
	// slot before
	DirQueueUS     [2]uint32
	DirQueuePrevUS [2]uint32
	DirQueueAt     [2]uint64
}

// The directions of a harm (lanes_maps.h's FG_DIR_*): the queue of the
// device's packets (it holds background uploads) and the queue toward the
// device (it holds background downloads).
const (
	Up   = 0
	Down = 1
)

// What a harmed sample read (lanes_maps.h's FG_HARM_KIND_*).
const (
	HarmDelay   = 0 // a foreground TCP socket's RTT HarmQueue above its minimum
	HarmLimited = 1 // a foreground TCP socket cwnd-limited
	HarmOwn     = 2 // the QUIC/UDP class's own queuing delay above HarmQueue, the foreground untold
)

// DirQueue is direction dir's (Up, Down) queue as foreground sockets'
// TCP timestamps read it, the largest reading of the last two slots, the
// last within fresh before now; false: none read then.
func (h Harm) DirQueue(now uint64, dir int, fresh time.Duration) (time.Duration, bool) {
	at := h.DirQueueAt[dir&1]
	if at == 0 || at > now || now-at > uint64(fresh) {
		return 0, false
	}
	us := max(h.DirQueueUS[dir&1], h.DirQueuePrevUS[dir&1])
	return time.Duration(us) * time.Microsecond, true
}

// TCPSeen says whether a foreground TCP socket's RTT samples tell the
// foreground's harm at now, as fg_tcp_seen does: without them (a call, a
// probe: UDP) the foreground is untold, and a background socket's own
// queuing delay tells its harm (yield.h's bg_own_delay).
func (h Harm) TCPSeen(now uint64) bool {
	return h.Seen != 0 && now-h.Seen < uint64(KernelRule.Hold)
}

// Harmed says whether h holds background at now, as fg_harmed does.
func (h Harm) Harmed(now uint64) bool {
	return h.At != 0 && now-h.At < uint64(HarmHold)
}

// HarmedDir says whether h holds background in direction dir (Up, Down)
// at now, as fg_harmed_dir does.
func (h Harm) HarmedDir(now uint64, dir int) bool {
	return now < h.DirUntil[dir&1]
}

// State is one interface's kernel state: its foreground window, its
// foreground's last harm, and when the hold of the last foreground
// connection's opening by it ends (lanes_fg_open, CLOCK_MONOTONIC ns, 0:
// never).
type State struct {
	Window  Window
	Harm    Harm
	OpenEnd uint64
	// UntoldHeld: the experiment that holds background beside an untold
	// foreground is on (experiments.Set.UntoldHeld)
	UntoldHeld bool
}

// Untold says whether a foreground is present at now with no foreground TCP
// RTT sample to tell its harm (lanes_maps.h's fg_untold: a call, a probe):
// background shares beside it by its own queuing delay, which tells its
// harm.
func (st State) Untold(now uint64) bool {
	return st.Window.Held(now, KernelRule) && !st.Harm.TCPSeen(now)
}

// Opening says whether a foreground connection's opening holds the
// interface at now (lanes_fg_open).
func (st State) Opening(now uint64) bool {
	return st.OpenEnd != 0 && now < st.OpenEnd
}

// Holds says whether background by the interface is held at the minimum at
// now, as lanes_maps.h's fg_yield: harmed (a foreground TCP socket, or a
// background socket's own delay beside an untold foreground), an opening
// there, or, anyOpening, one by an interface not known (key 0); with
// UntoldHeld (the lab switch) also beside any untold foreground.
func (st State) Holds(now uint64, anyOpening bool) bool {
	return st.Harm.Harmed(now) || st.Opening(now) || anyOpening || st.UntoldHeld && st.Untold(now)
}

// HoldsDir is Holds for background in direction dir (Up, Down) alone, as
// lanes_maps.h's fg_yield_dir: only that direction's harm holds it.
func (st State) HoldsDir(now uint64, anyOpening bool, dir int) bool {
	return st.Harm.HarmedDir(now, dir) || st.Opening(now) || anyOpening || st.UntoldHeld && st.Untold(now)
}

// OpenHold is lanes_maps.h's FG_OPEN_HOLD_NS, the longest an opening
// holds: until its handshake ends, then OpenRTTs of its RTT.
const (
	OpenHold = 500 * time.Millisecond
	OpenRTTs = 2
)

// Modes of an interface's background (IfaceStatus.Mode).
const (
	ModeFree    = "free"    // no foreground: the background's own target
	ModeSharing = "sharing" // a foreground present, not harmed: the share target
	ModeHeld    = "held"    // harmed, or a connection just opened: the minimum
)

// Causes of a hold (IfaceStatus.Cause): what holds the background at the
// minimum.
const (
	CauseHarm    = "harm"    // a foreground TCP socket reads harm
	CauseOpening = "opening" // a foreground connection just opened
	CauseUntold  = "untold"  // a foreground without TCP RTT samples (UDP), with the experiment UntoldHeld on
)

// IfaceStatus is one interface's state in Status.
type IfaceStatus struct {
	Yielding bool      `json:"yielding"`       // held at the minimum
	Since    time.Time `json:"since,omitzero"` // when its hold started
	Mode     string    `json:"mode"`
	Cause    string    `json:"cause,omitempty"` // held: why (Cause*)
	// Harmed: the directions a harm holds (DirNames: "up" holds
	// background uploads, "down" downloads), the other's runs
	Harmed []string `json:"harmed,omitempty"`
	// Signal is what steers the background there now, in words.
	Signal string `json:"signal"`
}

// Status is the background component's document (api component op,
// metrics).
type Status struct {
	Yielding   bool                   `json:"yielding"` // held on some interface
	Since      time.Time              `json:"since,omitzero"`
	Yields     uint64                 `json:"yields"` // foreground episodes, all interfaces
	Rule       string                 `json:"rule"`
	Interfaces map[string]IfaceStatus `json:"interfaces"`
}

// Rule is how the background yields, in words, for a background target.
func RuleText(target time.Duration) string {
	return fmt.Sprintf("beside a present foreground (%s; a foreground's UDP arrivals count) background TCP and QUIC/UDP, uploads and downloads, keep %v of queue instead of %v; TCP held at the minimum in one direction while a foreground TCP socket is cwnd-limited (uploads) or that direction's queue (TCP timestamps: one-way delay above its minimum; without them the RTT, both directions) stands %v, or, beside a foreground without TCP RTT samples (UDP), while its own queuing delay is %v above its base (and %v after; each TCP socket by its own, the QUIC/UDP class by its own), and from a foreground connection's opening to %d of its RTTs or its first flight's time at the upload capacity, the longer, after its handshake (at most %v)",
		KernelRule, ShareTarget(target), target, HarmQueue, HarmQueue, HarmHold, OpenRTTs, OpenHold)
}

// StatusOf is the status of the interfaces' states (by name: the
// interfaces whose foreground the kernel has seen) at now, the monotonic
// clock in ns, with wall the wall clock at the same instant; target is the
// background's queuing-delay target.
func StatusOf(states map[string]State, now uint64, wall time.Time, target time.Duration) Status {
	s := Status{Rule: RuleText(target), Interfaces: map[string]IfaceStatus{}}
	for name, st := range states {
		s.Yields += st.Window.Episodes
		is := ifaceStatus(st, now, wall, target)
		if is.Yielding && (!s.Yielding || is.Since.Before(s.Since)) {
			s.Yielding, s.Since = true, is.Since
		}
		s.Interfaces[name] = is
	}
	return s
}

// DirNames are the directions' names (Up, Down) in status.
var DirNames = [2]string{"up", "down"}

// harmedDirs are the directions h holds at now.
func (h Harm) harmedDirs(now uint64) []string {
	var out []string
	for d, name := range DirNames {
		if h.HarmedDir(now, d) {
			out = append(out, name)
		}
	}
	return out
}

// ifaceStatus is one interface's mode and signal.
func ifaceStatus(st State, now uint64, wall time.Time, target time.Duration) IfaceStatus {
	ago := func(t uint64) time.Time { return wall.Add(-time.Duration(now - t)) }
	switch {
	case st.Harm.Harmed(now) || len(st.Harm.harmedDirs(now)) > 0:
		qd := time.Duration(st.Harm.QueueUS) * time.Microsecond
		who := fmt.Sprintf("a foreground TCP socket is harmed (a direction's queue %v above its minimum)", qd)
		switch st.Harm.Kind {
		case HarmLimited:
			who = "a foreground TCP socket is harmed (cwnd-limited)"
		case HarmOwn:
			who = fmt.Sprintf("a foreground without TCP RTT samples (UDP) is harmed: the QUIC/UDP class's own queuing delay %v above its base (the class held; TCP sockets by their own)", qd)
		}
		dirs := st.Harm.harmedDirs(now)
		return IfaceStatus{Yielding: true, Since: ago(st.Harm.Since), Mode: ModeHeld, Cause: CauseHarm, Harmed: dirs,
			Signal: fmt.Sprintf("held at the minimum in the harmed directions %v (TCP; QUIC/UDP at the yield's rate): %s", dirs, who)}
	case st.Opening(now):
		return IfaceStatus{Yielding: true, Since: wall, Mode: ModeHeld, Cause: CauseOpening,
			Signal: "held at the minimum (QUIC/UDP egress stopped): a foreground connection opened"}
	case st.Untold(now) && st.UntoldHeld:
		return IfaceStatus{Yielding: true, Since: wall, Mode: ModeHeld, Cause: CauseUntold,
			Signal: "held at the minimum (QUIC/UDP at the yield's rate): a foreground present (classifier) without TCP RTT samples to tell its harm (UDP; experiment untold-held)"}
	case st.Untold(now):
		return IfaceStatus{Mode: ModeSharing,
			Signal: fmt.Sprintf("sharing: foreground present (classifier, its UDP arrivals included) without TCP RTT samples (UDP): TCP and QUIC/UDP, uploads and downloads, keep %v of queue by their own queuing delay, held while it stands %v above its base", ShareTarget(target), HarmQueue)}
	case st.Window.Held(now, KernelRule):
		return IfaceStatus{Mode: ModeSharing,
			Signal: fmt.Sprintf("sharing: foreground present (classifier), not harmed (foreground TCP RTT samples): TCP and QUIC/UDP, uploads and downloads, keep %v of queue", ShareTarget(target))}
	}
	return IdleStatus(target)
}

// IdleStatus is an interface's status while no foreground is seen there:
// the background keeps its own target.
func IdleStatus(target time.Duration) IfaceStatus {
	return IfaceStatus{Mode: ModeFree, Signal: fmt.Sprintf("free: no foreground: TCP keeps %v of queue; QUIC/UDP by its delay controller", target)}
}
