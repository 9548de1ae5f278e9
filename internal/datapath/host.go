// host.go is the per-network-namespace half of the datapath: one BPF
// collection (the classifier program and the maps it shares with sock_ops,
// the sock_ops program and its bpf_link at the cgroup v2 root, the
// cap-enforcing congestion control) and the lane cgroups. Every interface's
// egress tree (egress.go) runs the Host's one classifier program, so N
// interfaces cost one sock_ops program on each ACK, not N, and a map entry
// written once applies on every interface. This file: its lifecycle
// (OpenHost loads and attaches, Close detaches and unloads), its
// capabilities and the wiring of its owners, each a type with its own
// state reached as a field of Host: the lane maps (lanemaps.go), the
// trees and their ACK class (trees.go), the background class
// (bgclass.go), the yield's reads (fgyield.go), the caps (capcc.go), the
// cgroup programs (cgroupprogs.go) and the congestion controls' status
// (appcc.go); its counters are hoststats.go's.
//
// Capabilities that the kernel may lack degrade alone (Capabilities):
// without sock_ops, sockets are classified per packet only (no cgroup
// ancestors, no NOTSENT_LOWAT, no cwnd caps); without the congestion control,
// caps reach CUBIC only when it is cwnd-limited. Only the classifier is
// required: without it there is no datapath.
//
// Map setters may run concurrently with each other and with Close; after
// Close they return errClosed (guard.go).
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/execlane"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/lane"
)

// DefaultBackgroundNotsentLowat is background sockets' TCP_NOTSENT_LOWAT:
// their unsent data stays in the socket, and small, yet an application
// woken up late still finds data queued. At 16 KiB (13 ms at 10 Mbit/s) a
// background upload on a busy host ran dry between its writer's wake-ups
// (nothing sent nor unsent for 100–300 ms at a time, measured in lbe-remote
// at load 12–28 on 2 cores) and used 53–80 % of the link; 256 KiB is 200 ms
// at 10 Mbit/s and still a fraction of what send-buffer autotuning gives.
const DefaultBackgroundNotsentLowat = 256 << 10

// HostConfig describes the per-namespace part of the datapath.
type HostConfig struct {
	Instance   string // unique per daemon: names of cgroups, filters, congestion control
	CgroupRoot string // cgroup v2 mount ("" = found or mounted, see resolveCgroupRoot)
	// StateDir holds the egresses' state files, which let Cleanup undo a
	// crashed run ("" = DefaultStateDir; the daemon's <state dir>/datapath)
	StateDir string
	// BackgroundNotsentLowat is TCP_NOTSENT_LOWAT for background sockets in
	// bytes (0 = DefaultBackgroundNotsentLowat, negative = leave the
	// socket's setting alone).
	BackgroundNotsentLowat int
	// BackgroundTarget is the queuing-delay target of the background lane's
	// LEDBAT++ (bgcc.go): 0 = the default, negative = background sockets
	// keep the system congestion control.
	BackgroundTarget time.Duration
	// ReceiveTarget is rLEDBAT's target for background sockets' receive
	// windows (sock_ops rledbat.h): 0 = the default, negative = off.
	ReceiveTarget time.Duration
	// Yield: the foreground-aware yield, decided in the kernel (sock_ops
	// yielding(): the classifier's lanes_fg_active stamps, and a new
	// foreground TCP connection for half a second, lanes_fg_open).
	Yield bool
	// Experiments: the lab's and tests' switches of the background's rules
	// (the share rule's parts, the QUIC/UDP class's arrivals, the untold
	// foreground's hold); the zero value is the product's rules.
	Experiments experiments.Set
	// Off names optional capabilities not to load, with the reason shown in
	// status (what a refused probe or `lanes doctor` decided).
	Off map[Capability]string
	// StructOps is how the congestion controls are registered
	// (structops.Auto: a bpf_link on 6.4+, else a map update, which
	// outlives a SIGKILLed daemon until its next start removes it).
	StructOps structops.Mode
	// Pinned: run on the classifier another loader pinned (Android's
	// NetBpfLoad; pinned.go) instead of loading lanes' own; nil: load it.
	Pinned *Pinned
}

// Host is the installed per-namespace datapath: what it loaded, and its
// owners as fields.
type Host struct {
	cfg      HostConfig
	ns       *nsRef
	cls      *classifier.ClassifierObjects
	ops      *sockops.Objects // nil without CapSockops
	live     *ebpf.Program    // lanes_live_cc, nil without CapLiveCC (livecc.go)
	liveLink *link.Iter       // its link, made at load and kept
	exec     *execlane.Lanes  // nil without CapExecLane (execlane.go)
	opsLink  link.Link
	optLink  link.Link // cgroup/setsockopt, nil without CapBgCCKeep
	// ccFollow reads the allow-list optLink's program checks again at
	// each write of the sysctl (ccfollow.go), nil without optLink
	ccFollow *ccFollower
	cc       *capcc.CC  // nil when the kernel cannot run it
	bg       *ledbat.CC // background lane's LEDBAT++, nil if off
	// linkRate: the account's upload capacity (lanes_link_rate), shared by
	// sock_ops and LEDBAT++; nil without CapSockops
	linkRate *ebpf.Map
	cgIDs    map[lane.Lane]uint64
	off      map[Capability]string // capability -> why it is off

	// opsStats: the pinned sock_ops' counters, nil unless it runs (pinned.go)
	opsStats *ebpf.Map
	// ownerLink: the pinned sock_ops' socket-creation program (its
	// sockets' creators for the cgroup and uid rules), nil unless it runs
	ownerLink link.Link

	guard *guard // the lifetime lock every owner shares (guard.go)

	// Lanes is the lane maps: rules and socket lanes (lanemaps.go).
	Lanes *LaneMaps
	// Trees is the egress trees opened with the host and their ACK
	// class (trees.go, ackclass.go).
	Trees *Trees
	// Yield reads the foreground-aware yield's state (fgyield.go).
	Yield *FgYield
	// Background is the background lane's non-TCP (QUIC/UDP) class: its
	// policer, shapers and flows (bgclass.go, bgshape.go, bgifb.go,
	// bgflows.go).
	Background *BackgroundClass
	// Caps is the cwnd and downlink caps (capcc.go, rwndcap.go).
	Caps *Caps
	// Programs is the cgroup programs' live moves, exe: lanes and apps'
	// congestion controls (cgroupprogs.go).
	Programs *CgroupPrograms
	// CCs is lanes' own congestion controls, for status (appcc.go, bgcc.go).
	CCs *CongestionControls
}

func (c *HostConfig) validate() error {
	if !instanceRE.MatchString(c.Instance) {
		return fmt.Errorf("datapath: instance %q must be 1-40 of [A-Za-z0-9_.-]", c.Instance)
	}
	return nil
}

// OpenHost loads the host datapath in the calling thread's network
// namespace and attaches sock_ops at the cgroup v2 root.
func OpenHost(cfg HostConfig) (h *Host, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.CgroupRoot, err = resolveCgroupRoot(cfg.CgroupRoot); err != nil {
		return nil, err
	}
	ns, err := currentNS()
	if err != nil {
		releaseCgroupRoot(cfg.CgroupRoot)
		return nil, err
	}
	h = &Host{cfg: cfg, ns: ns, off: map[Capability]string{}, guard: &guard{}}
	defer func() {
		if err != nil {
			// not evicting: busy lane cgroups adopted from a crashed
			// run keep their processes
			err = errors.Join(err, h.teardown(false))
			h = nil
		}
	}()
	if err := rlimit.RemoveMemlock(); err != nil {
		return h, fmt.Errorf("remove memlock limit: %w", err)
	}
	if cfg.Pinned != nil {
		h.cls, err = openPinnedClassifier(*cfg.Pinned)
	} else {
		h.cls, err = classifier.Load(classifier.Config{HoldArrivals: cfg.Experiments.BgUDP.Arrivals, UntoldHeld: cfg.Experiments.UntoldHeld,
			DirectionsJoined: cfg.Experiments.DirectionsJoined, QuietFixed: cfg.Experiments.QuietFixed})
	}
	if err != nil {
		return h, err
	}
	if err := cleanupLaneCgroups(cfg.CgroupRoot, cfg.Instance); err != nil {
		slog.Warn("datapath: removing leftover lane cgroups", "instance", cfg.Instance, "err", err)
	}
	if h.cgIDs, err = acquireLaneCgroups(cfg.CgroupRoot, cfg.Instance); err != nil {
		return h, err
	}
	h.Lanes = &LaneMaps{guard: h.guard, cls: h.cls}
	h.Trees = &Trees{guard: h.guard, cls: h.cls}
	for l, id := range h.cgIDs {
		if err := h.Lanes.SetCgroupLane(id, l); err != nil {
			return h, err
		}
	}
	h.loadSockops()
	h.Yield = &FgYield{guard: h.guard, cls: h.cls, on: cfg.Yield, untoldHeld: cfg.Experiments.UntoldHeld, sockops: h.ops != nil,
		ops: h.ops}
	h.Background = &BackgroundClass{guard: h.guard, cls: h.cls, ops: h.ops, trees: h.Trees, yield: h.Yield, on: cfg.Yield,
		untoldHeld: cfg.Experiments.UntoldHeld, joined: cfg.Experiments.DirectionsJoined}
	startBgEvents(h.Background)
	h.Caps = &Caps{guard: h.guard, ops: h.ops, cc: h.cc, off: h.off, seen: h.Lanes}
	h.Programs = &CgroupPrograms{guard: h.guard, ops: h.ops, live: h.liveLink, exec: h.exec}
	h.CCs = &CongestionControls{guard: h.guard, bg: h.bg, cc: h.cc, off: h.off, sockops: h.ops != nil || h.opsLink != nil,
		bgTarget: cfg.BackgroundTarget}
	startCCFollower(h)
	return h, nil
}

// loadSockops loads and attaches sock_ops and the congestion control; a
// failure turns the capability off (named in Capabilities), not the host.
func (h *Host) loadSockops() {
	for c, why := range h.cfg.Off {
		h.off[c] = why
	}
	if _, off := h.off[CapSockops]; off {
		h.needsSockops()
		return
	}
	if h.cfg.Pinned != nil && h.attachPinnedSockops() {
		return
	}
	cookie, ino, err := h.netnsID()
	if err != nil {
		h.disable(CapSockops, err)
		h.needsSockops()
		return
	}
	id := cookie // names this host's congestion controls
	if id == 0 {
		id = uint64(ino)
	}
	if h.linkRate, err = sockops.NewLinkRate(); err != nil {
		h.disable(CapSockops, err)
		h.needsSockops()
		return
	}
	h.adoptCCs(id)
	h.loadBackgroundCC(id)
	ccName := ""
	if _, off := h.off[CapCapCC]; !off {
		if h.cc, err = capcc.Load(capCCName(h.cfg.Instance, id), h.cfg.StructOps); err != nil {
			h.disable(CapCapCC, err)
		} else {
			ccName = h.cc.Name
		}
	}
	opsCfg := sockops.Config{NetnsCookie: cookie, NetnsInode: ino, NotsentLowat: h.notsentLowat(), CCName: ccName, BgCCName: h.bgCCName(),
		BgClampTargetUS: h.loadBgClamp(), RLEDBATTargetUS: h.loadRLEDBAT(), Yield: h.cfg.Yield, UntoldHeld: h.cfg.Experiments.UntoldHeld,
		DirectionsJoined: h.cfg.Experiments.DirectionsJoined, RateByACKs: h.cfg.Experiments.RateByACKs,
		RLShare:      rlShare(h.cfg.Experiments.Share),
		BgClampShare: ledbatShare(h.cfg.Experiments.Share)}
	shared := h.cls.Shared()
	shared[sockops.SockopsMapLanesLinkRate] = h.linkRate
	ops, err := sockops.Load(opsCfg, shared)
	if err == nil {
		// bpf_link (multi-attach): other daemons' programs at the same
		// root stay attached beside ours. Not pinned: it dies with us.
		h.opsLink, err = link.AttachCgroup(link.CgroupOptions{
			Path: h.cfg.CgroupRoot, Attach: ebpf.AttachCGroupSockOps, Program: ops.LanesSockops,
		})
		if err != nil {
			ops.Close()
			err = fmt.Errorf("attach sock_ops at %s: %w", h.cfg.CgroupRoot, err)
		}
	}
	if err != nil {
		h.disable(CapSockops, err)
		if h.cc != nil {
			h.cc.Close()
			h.cc = nil
		}
		if h.bg != nil {
			h.bg.Close()
			h.bg = nil
		}
		h.off[CapBgClamp] = "needs sock_ops"
		h.needsSockops()
		return
	}
	h.ops = ops
	h.Lanes.ops = ops
	h.attachSetsockopt()
	h.loadLive(opsCfg)
	h.loadExecLane(cookie, ino)
}

// attachSetsockopt attaches the program that keeps background sockets on
// LEDBAT++ when their app sets a congestion control; a failure turns off
// that capability only.
func (h *Host) attachSetsockopt() {
	if _, off := h.off[CapBgCCKeep]; off {
		return
	}
	l, err := link.AttachCgroup(link.CgroupOptions{
		Path: h.cfg.CgroupRoot, Attach: ebpf.AttachCGroupSetsockopt, Program: h.ops.LanesSetsockopt,
	})
	if err != nil {
		h.disable(CapBgCCKeep, fmt.Errorf("attach cgroup/setsockopt at %s: %w", h.cfg.CgroupRoot, err))
		return
	}
	h.optLink = l
}

// notsentLowat is background sockets' TCP_NOTSENT_LOWAT (0: leave it).
func (h *Host) notsentLowat() uint32 {
	switch {
	case h.cfg.BackgroundNotsentLowat == 0:
		return DefaultBackgroundNotsentLowat
	case h.cfg.BackgroundNotsentLowat < 0:
		return 0
	}
	return uint32(h.cfg.BackgroundNotsentLowat)
}

// needsSockops turns off what only sock_ops can switch sockets to.
func (h *Host) needsSockops() {
	for _, c := range CapabilityNames() {
		if _, off := h.off[c]; !off && c != CapSockops {
			h.off[c] = "needs sock_ops"
		}
	}
}

func (h *Host) disable(c Capability, err error) {
	h.off[c] = err.Error()
	slog.Warn("datapath: capability off", "capability", c, "instance", h.cfg.Instance, "err", err)
}

// Capabilities says which optional capabilities run (true) and why the
// others are off.
func (h *Host) Capabilities() map[Capability]string {
	out := map[Capability]string{}
	for _, c := range CapabilityNames() {
		if why, off := h.off[c]; off {
			out[c] = "off: " + why
		} else {
			out[c] = "on"
		}
	}
	return out
}

// ClassifierFD is the classifier program every egress filter runs.
func (h *Host) ClassifierFD() int { return h.cls.LanesClassify.FD() }

// Close detaches and unloads everything and removes the lane cgroups,
// moving any process left in them to the root cgroup.
func (h *Host) Close() error {
	return h.close(true)
}

// CloseKeepingCgroups is Close that leaves the lane cgroups and their
// processes in place, for a successor host of the same instance (reload).
func (h *Host) CloseKeepingCgroups() error {
	return h.close(false)
}

func (h *Host) close(evict bool) error {
	return h.guard.close(func() error { return h.teardown(evict) })
}

func (h *Host) teardown(evict bool) error {
	var errs []error
	if h.Background != nil && h.Background.events != nil {
		errs = append(errs, h.Background.events.close())
	}
	if h.ccFollow != nil {
		errs = append(errs, h.ccFollow.close())
	}
	if h.optLink != nil {
		errs = append(errs, h.optLink.Close())
	}
	if h.ownerLink != nil {
		errs = append(errs, h.ownerLink.Close())
	}
	if h.opsLink != nil {
		errs = append(errs, h.opsLink.Close(), h.opsStats.Close())
	}
	if h.cgIDs != nil {
		if evict {
			errs = append(errs, releaseLaneCgroups(h.cfg.CgroupRoot, h.cfg.Instance, true))
		} else {
			dropLaneCgroupUser(h.cfg.CgroupRoot, h.cfg.Instance)
		}
	}
	if h.live != nil {
		errs = append(errs, h.liveLink.Close(), h.live.Close())
	}
	if h.exec != nil {
		errs = append(errs, h.exec.Close())
	}
	if h.ops != nil {
		errs = append(errs, h.ops.Close())
	}
	if h.cc != nil {
		errs = append(errs, h.cc.Close())
	}
	if h.bg != nil {
		errs = append(errs, h.bg.Close())
	}
	if h.linkRate != nil {
		errs = append(errs, h.linkRate.Close())
	}
	if h.cls != nil {
		errs = append(errs, h.cls.Close())
	}
	h.ns.close()
	releaseCgroupRoot(h.cfg.CgroupRoot)
	return errors.Join(errs...)
}

// LaneCgroup returns the cgroup v2 directory of a lane and its id.
func (h *Host) LaneCgroup(l lane.Lane) (path string, id uint64, err error) {
	id, ok := h.cgIDs[l]
	if !ok {
		return "", 0, fmt.Errorf("datapath: no cgroup for lane %s", l)
	}
	return laneCgroupBase(h.cfg.CgroupRoot, h.cfg.Instance) + "/" + l.String(), id, nil
}

// useNetnsCookie says whether sock_ops can tell its namespace by cookie
// (bpf_get_netns_cookie in sock_ops, 5.15+); tests turn it off to run the
// inode fallback of older kernels.
var useNetnsCookie = sockops.HaveNetnsCookie

// netnsID returns how the sock_ops program recognises this host's network
// namespace: its cookie (SO_NETNS_COOKIE, 5.14+), or 0 where the cookie
// cannot be used, and its inode number.
func (h *Host) netnsID() (cookie uint64, ino uint32, err error) {
	ino, ierr := h.ns.netnsInode()
	if useNetnsCookie() {
		if cookie, err = h.ns.netnsCookie(); err == nil {
			return cookie, ino, nil
		}
	}
	if ierr != nil {
		return 0, 0, errors.Join(err, ierr)
	}
	return 0, ino, nil
}
