// host.go is the per-network-namespace half of the datapath: one BPF
// collection (the classifier program and the maps it shares with sock_ops,
// the sock_ops program and its bpf_link at the cgroup v2 root, the
// cap-enforcing congestion control) and the lane cgroups. Every interface's
// egress tree (egress.go) runs the Host's one classifier program, so N
// interfaces cost one sock_ops program on each ACK, not N, and a map entry
// written once applies on every interface.
//
// Capabilities that the kernel may lack degrade alone (Capabilities):
// without sock_ops, sockets are classified per packet only (no cgroup
// ancestors, no NOTSENT_LOWAT, no cwnd caps); without the congestion control,
// caps reach CUBIC only when it is cwnd-limited. Only the classifier is
// required: without it there is no datapath.
//
// Map setters may run concurrently with each other and with Close; after
// Close they return errClosed.
package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/execlane"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/structops"
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

// Capability is an optional part of the host datapath.
type Capability string

const (
	CapSockops Capability = "sock_ops" // per-socket lanes, cgroup ancestors, NOTSENT_LOWAT, cwnd caps
	CapCapCC   Capability = "cap_cc"   // congestion control enforcing cwnd caps on CUBIC sockets
	// CapBackgroundCC: LEDBAT++ for background sockets (yield at a remote bottleneck)
	CapBackgroundCC Capability = "background_cc"
	// CapBgClamp: without CapBackgroundCC (no struct_ops), LEDBAT++'s
	// window as background sockets' cwnd clamp from sock_ops (bgclamp.h)
	CapBgClamp Capability = "background_clamp"
	// CapRLEDBAT: rLEDBAT on background sockets' receive windows (sock_ops
	// bpf_setsockopt TCP_WINDOW_CLAMP, Linux 5.11+)
	CapRLEDBAT Capability = "rledbat"
	// CapBgCCKeep: an app's setsockopt(TCP_CONGESTION) on a background
	// socket is skipped, the socket keeps LEDBAT++ (cgroup/setsockopt)
	CapBgCCKeep Capability = "background_cc_keep"
	// CapLiveCC: a live move's congestion control and TCP_NOTSENT_LOWAT
	// applied at once by an iter/tcp program (Linux 5.14+), not at the
	// socket's next ACK
	CapLiveCC Capability = "live_cc"
	// CapExecLane: an exe: rule's lane from a process's first socket on,
	// decided at exec in the kernel (tp_btf, cgroup/sock_create: execlane.go)
	CapExecLane Capability = "exec_lane"
)

// Host is the installed per-namespace datapath.
type Host struct {
	cfg     HostConfig
	ns      *nsRef
	cls     *classifier.ClassifierObjects
	ops     *sockops.Objects // nil without CapSockops
	live    *ebpf.Program    // lanes_live_cc, nil without CapLiveCC (livecc.go)
	exec    *execlane.Lanes  // nil without CapExecLane (execlane.go)
	opsLink link.Link
	optLink link.Link  // cgroup/setsockopt, nil without CapBgCCKeep
	cc      *capcc.CC  // nil when the kernel cannot run it
	bg      *ledbat.CC // background lane's LEDBAT++, nil if off
	cgIDs   map[lane.Lane]uint64
	off     map[Capability]string // capability -> why it is off
	shapes  tupleShapes           // lanes_tuple's keys per shape (tupleshapes.go)

	// opsStats: the pinned sock_ops' counters, nil unless it runs (pinned.go)
	opsStats *ebpf.Map

	ackMu    sync.Mutex       // the ACK class's (ackclass.go); before an Egress's mu
	egresses map[*Egress]bool // the trees opened with this host
	ackBytes uint64           // the ACK class's rate, bytes/s (0: off)

	mu     sync.RWMutex // read: map operations; write: Close
	closed bool
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
	h = &Host{cfg: cfg, ns: ns, off: map[Capability]string{}}
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
		h.cls, err = classifier.Load(classifier.Config{})
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
	for l, id := range h.cgIDs {
		if err := h.SetCgroupLane(id, l); err != nil {
			return h, err
		}
	}
	h.loadSockops()
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
		BgClampTargetUS: h.loadBgClamp(), RLEDBATTargetUS: h.loadRLEDBAT(), Yield: h.cfg.Yield}
	ops, err := sockops.Load(opsCfg, h.cls.Shared())
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
	h.attachSetsockopt()
	h.loadLive(opsCfg)
	h.loadExecLane(cookie)
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

// capCCName and bgCCName name this host's congestion controls, one each
// per instance and namespace (id: netns cookie, or inode where sock_ops
// matches by inode): names are global to the kernel.
func capCCName(instance string, id uint64) string { return structops.Name(instance, fmt.Sprint(id)) }

func bgCCName(instance string, id uint64) string {
	return structops.Name(instance, fmt.Sprint(id), "background")
}

// adoptCCs removes the congestion controls a killed run of this instance
// in this namespace left registered by map update (kernels before 6.4, or
// StructOps Update), so that this run can register its own under the same
// names. A registration through a bpf_link died with its process.
func (h *Host) adoptCCs(id uint64) {
	done, err := structops.Remove(capCCName(h.cfg.Instance, id), bgCCName(h.cfg.Instance, id))
	if len(done) > 0 {
		slog.Info("datapath: removed congestion controls a killed run left registered", "instance", h.cfg.Instance, "names", done)
	}
	if err != nil {
		slog.Warn("datapath: removing left-over congestion controls", "instance", h.cfg.Instance, "err", err)
	}
}

// RemoveLeftoverCCs unregisters what a killed daemon of instance left
// registered by map update, in the calling thread's namespace (cookie and
// inode; `lanes reset`) or, for a vanished namespace, under its recorded
// cookie and inode. It returns the names removed.
func RemoveLeftoverCCs(instance string, ids ...uint64) ([]string, error) {
	if len(ids) == 0 {
		ns, err := currentNS()
		if err != nil {
			return nil, err
		}
		defer ns.close()
		if c, err := ns.netnsCookie(); err == nil {
			ids = append(ids, c)
		}
		if ino, err := ns.netnsInode(); err == nil {
			ids = append(ids, uint64(ino))
		}
	}
	var names []string
	for _, id := range ids {
		if id != 0 {
			names = append(names, capCCName(instance, id), bgCCName(instance, id))
		}
	}
	return structops.Remove(names...)
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
	for _, c := range []Capability{CapCapCC, CapBackgroundCC, CapBgClamp, CapRLEDBAT, CapBgCCKeep, CapLiveCC, CapExecLane} {
		if _, off := h.off[c]; !off {
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
	for _, c := range []Capability{CapSockops, CapCapCC, CapBackgroundCC, CapBgClamp, CapRLEDBAT, CapBgCCKeep, CapLiveCC, CapExecLane} {
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
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	return h.teardown(evict)
}

func (h *Host) teardown(evict bool) error {
	var errs []error
	if h.optLink != nil {
		errs = append(errs, h.optLink.Close())
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
		errs = append(errs, h.live.Close())
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
	if h.cls != nil {
		errs = append(errs, h.cls.Close())
	}
	h.ns.close()
	releaseCgroupRoot(h.cfg.CgroupRoot)
	return errors.Join(errs...)
}

// use runs fn under the read lock unless the host is closed.
func (h *Host) use(fn func() error) error {
	if h == nil {
		return errClosed
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return errClosed
	}
	return fn()
}

func laneValue(l lane.Lane) (uint32, error) {
	if l < lane.Realtime || l > lane.Background {
		return 0, fmt.Errorf("datapath: invalid lane %d", l)
	}
	return uint32(l), nil
}

// SetFlowLane puts a 5-tuple in a lane (replacing any earlier lane).
func (h *Host) SetFlowLane(f FlowKey, l lane.Lane) error {
	k, err := f.key()
	if err != nil {
		return err
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.shapes.put(h.cls.LanesTuple, h.cls.LanesTupleShapes, k, v); err != nil {
			return fmt.Errorf("register flow %s: %w", f, err)
		}
		return nil
	})
}

// DeleteFlow removes a registered 5-tuple; a missing one is not an error.
func (h *Host) DeleteFlow(f FlowKey) error {
	k, err := f.key()
	if err != nil {
		return err
	}
	return h.use(func() error {
		return ignoreNotExist(h.shapes.del(h.cls.LanesTuple, h.cls.LanesTupleShapes, k), "unregister flow "+f.String())
	})
}

// Flows lists the registered 5-tuples.
func (h *Host) Flows() ([]FlowEntry, error) {
	var out []FlowEntry
	err := h.use(func() error {
		var k abi.FlowKey
		var v uint32
		it := h.cls.LanesTuple.Iterate()
		for it.Next(&k, &v) {
			out = append(out, FlowEntry{FlowKey: FlowKey{Src: k.Src(), Dst: k.Addr(), DPort: k.Dport, SPort: k.Sport, Proto: k.Proto}, Lane: lane.Lane(v)})
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("list flows: %w", err)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b FlowEntry) int {
		return cmp.Or(a.Dst.Compare(b.Dst), cmp.Compare(a.DPort, b.DPort), cmp.Compare(a.SPort, b.SPort), a.Src.Compare(b.Src), cmp.Compare(a.Proto, b.Proto))
	})
	return out, err
}

// DstRule is a destination prefix and port (0 = any port).
type DstRule struct {
	Prefix netip.Prefix `json:"prefix"`
	DPort  uint16       `json:"dport,omitempty"`
}

func (r DstRule) String() string {
	if r.DPort == 0 {
		return r.Prefix.String()
	}
	return fmt.Sprintf("%s port %d", r.Prefix, r.DPort)
}

// SetDstLane puts the traffic to a destination prefix (and port) in a
// lane. Longest prefix wins; a rule with the packet's port beats one for
// any port.
func (h *Host) SetDstLane(r DstRule, l lane.Lane) error {
	if !r.Prefix.IsValid() {
		return errors.New("datapath: destination rule without a prefix")
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.cls.LanesDst.Put(abi.NewDstKey(r.Prefix, r.DPort), v); err != nil {
			return fmt.Errorf("destination %s -> %s: %w", r, l, err)
		}
		return nil
	})
}

// DeleteDst removes a destination rule; a missing one is not an error.
func (h *Host) DeleteDst(r DstRule) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesDst.Delete(abi.NewDstKey(r.Prefix, r.DPort)), "delete destination "+r.String())
	})
}

// SetCgroupLane puts every socket of the cgroup v2 with this id in a lane.
func (h *Host) SetCgroupLane(cgroupID uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.cls.LanesCgroup.Put(cgroupID, v); err != nil {
			return fmt.Errorf("cgroup %d -> %s: %w", cgroupID, l, err)
		}
		return nil
	})
}

// DeleteCgroup forgets a cgroup's lane.
func (h *Host) DeleteCgroup(cgroupID uint64) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesCgroup.Delete(cgroupID), fmt.Sprintf("delete cgroup %d", cgroupID))
	})
}

// SetUIDLane puts every socket owned by uid in a lane.
func (h *Host) SetUIDLane(uid uint32, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		if err := h.cls.LanesUid.Put(uid, v); err != nil {
			return fmt.Errorf("uid %d -> %s: %w", uid, l, err)
		}
		return nil
	})
}

// DeleteUID forgets a uid's lane.
func (h *Host) DeleteUID(uid uint32) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesUid.Delete(uid), fmt.Sprintf("delete uid %d", uid))
	})
}

// SetDSCPLane maps a DSCP code point to a lane; lane.Unset removes the
// mapping. A new host maps none.
func (h *Host) SetDSCPLane(dscp uint8, l lane.Lane) error {
	if dscp > 63 {
		return fmt.Errorf("datapath: DSCP %d out of range", dscp)
	}
	v := uint32(0)
	if l != lane.Unset {
		var err error
		if v, err = laneValue(l); err != nil {
			return err
		}
	}
	return h.use(func() error {
		if err := h.cls.LanesDscp.Put(uint32(dscp), v); err != nil {
			return fmt.Errorf("dscp %d -> %s: %w", dscp, l, err)
		}
		return nil
	})
}

// LaneCgroup returns the cgroup v2 directory of a lane and its id.
func (h *Host) LaneCgroup(l lane.Lane) (path string, id uint64, err error) {
	id, ok := h.cgIDs[l]
	if !ok {
		return "", 0, fmt.Errorf("datapath: no cgroup for lane %s", l)
	}
	return laneCgroupBase(h.cfg.CgroupRoot, h.cfg.Instance) + "/" + l.String(), id, nil
}

// SocketLane returns the lane sock_ops (or SetSocketLane) stored for a
// socket cookie; false when the socket has none (it is then classified per
// packet, by default interactive).
func (h *Host) SocketLane(cookie uint64) (lane.Lane, bool) {
	var v uint32
	if h.use(func() error { return h.cls.LanesCookie.Lookup(cookie, &v) }) != nil || v < 1 || v > 3 {
		return lane.Unset, false
	}
	return lane.Lane(v), true
}

// CookieMap is the socket cookie -> lane map itself, for a reader that
// resolves lanes in the kernel (the monitor's BPF iterator); it stays valid
// for the reader after the datapath closes (the kernel holds a reference).
func (h *Host) CookieMap() *ebpf.Map { return h.cls.LanesCookie }

// SetSocketLane puts one socket (by cookie) in a lane; it beats every other rule.
// A socket sock_ops knew that closes meanwhile keeps no entry: its close
// removed its entries before or after the write, and a write after it is
// undone (lanes_sock_seen is gone by then).
func (h *Host) SetSocketLane(cookie uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		managed := h.sockSeen(cookie)
		if err := h.cls.LanesCookie.Put(cookie, v); err != nil {
			return fmt.Errorf("socket %d -> %s: %w", cookie, l, err)
		}
		if managed && !h.sockSeen(cookie) {
			return ignoreNotExist(h.cls.LanesCookie.Delete(cookie), fmt.Sprintf("socket %d closed", cookie))
		}
		return nil
	})
}

// RestoreSocketLane gives a socket back a lane only while it still has an
// entry: the entry of a socket that closed is gone (sock_ops removed it)
// and no restore brings it back.
func (h *Host) RestoreSocketLane(cookie uint64, l lane.Lane) error {
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesCookie.Update(cookie, v, ebpf.UpdateExist), fmt.Sprintf("socket %d -> %s", cookie, l))
	})
}

// sockSeen: sock_ops has seen the socket and it has not closed.
func (h *Host) sockSeen(cookie uint64) bool {
	var seen uint8
	return h.ops != nil && h.ops.LanesSockSeen.Lookup(cookie, &seen) == nil
}

// ClearSocketLane forgets a socket's lane (by cookie): its packets are then
// classified by 3-tuple, cgroup, uid or marking again. A socket never seen is
// not an error.
func (h *Host) ClearSocketLane(cookie uint64) error {
	return h.use(func() error {
		return ignoreNotExist(h.cls.LanesCookie.Delete(cookie), fmt.Sprintf("socket %d", cookie))
	})
}

var errNoSockops = errors.New("datapath: sock_ops is off: no cwnd caps")

// ErrSocketUnmanaged is a cwnd cap refused for a socket that sock_ops has
// seen no callback of (it was established before lanes attached and never
// asked for RTT callbacks), so the cap could never be applied.
var ErrSocketUnmanaged = errors.New("datapath: socket predates sock_ops (no callbacks): cap not applicable")

// SetLaneCwndCap caps the congestion window (segments) of every TCP socket
// of a lane; 0 removes the cap. sock_ops applies it at establishment and on
// the next RTT sample of live sockets; a capped CUBIC socket is moved to the
// lanes congestion control, which brings cwnd under the cap on its next ACK.
func (h *Host) SetLaneCwndCap(l lane.Lane, segs uint32) error {
	if _, err := laneValue(l); err != nil {
		return err
	}
	return h.use(func() error {
		if h.ops == nil {
			return errNoSockops
		}
		if err := h.ops.LanesLaneCap.Put(uint32(l), segs); err != nil {
			return fmt.Errorf("cwnd cap of %s: %w", l, err)
		}
		return nil
	})
}

// SetSocketCwndCap caps one socket's congestion window (segments); 0 removes
// the socket's own cap, so its lane's cap (if any) applies again.
func (h *Host) SetSocketCwndCap(cookie uint64, segs uint32) error {
	return h.use(func() error {
		if h.ops == nil {
			return errNoSockops
		}
		if segs == 0 {
			return ignoreNotExist(h.ops.LanesSockCap.Delete(cookie), "remove socket cwnd cap")
		}
		if !h.sockSeen(cookie) {
			return fmt.Errorf("cwnd cap of socket %d: %w", cookie, ErrSocketUnmanaged)
		}
		if err := h.ops.LanesSockCap.Put(cookie, segs); err != nil {
			return fmt.Errorf("cwnd cap of socket %d: %w", cookie, err)
		}
		if !h.sockSeen(cookie) { // closed since the check: its close ran before the write
			return ignoreNotExist(h.ops.LanesSockCap.Delete(cookie), "remove a closed socket's cwnd cap")
		}
		return nil
	})
}

// CapCCStatus says whether the lanes congestion control (CUBIC with an
// enforced cwnd clamp) is registered, under which name, and if not why.
type CapCCStatus struct {
	Active     bool   `json:"active"`
	Name       string `json:"name,omitempty"`       // kernel congestion control name
	Registered string `json:"registered,omitempty"` // "bpf_link" or "map update" (structops)
	Reason     string `json:"reason,omitempty"`     // why it is not active
}

// CapCC reports the state of the lanes congestion control of this host.
func (h *Host) CapCC() CapCCStatus {
	var s CapCCStatus
	err := h.use(func() error {
		if h.cc == nil {
			s.Reason = cmp.Or(h.off[CapCapCC], "not loaded")
			return nil
		}
		s = CapCCStatus{Active: true, Name: h.cc.Name, Registered: h.cc.Mode.String()}
		return nil
	})
	if err != nil {
		return CapCCStatus{Reason: err.Error()}
	}
	return s
}

// HostStats are the host's BPF counters.
type HostStats struct {
	// Classified[kind][lane]: packets the classifier put in each lane, by
	// how it found the lane (all interfaces together).
	Classified   map[string]map[lane.Lane]uint64 `json:"classified"`
	Sockops      map[string]uint64               `json:"sockops"` // sock_ops events (empty without sock_ops)
	CapCC        CapCCStatus                     `json:"cap_cc"`
	Background   BackgroundCCStatus              `json:"background_cc"`
	Capabilities map[Capability]string           `json:"capabilities"`
}

// Stats reads the host's counters.
func (h *Host) Stats() (HostStats, error) {
	s := HostStats{Classified: map[string]map[lane.Lane]uint64{}, CapCC: h.CapCC(), Background: h.BackgroundCC(), Capabilities: h.Capabilities()}
	err := h.use(func() error {
		cls, err := classifier.ReadStats(h.cls.LanesClsStats)
		if err != nil {
			return err
		}
		for k := classifier.Kind(0); int(k) < classifier.NumKinds; k++ {
			m := map[lane.Lane]uint64{}
			for _, l := range lane.All {
				m[l] = cls[classifier.StatsIndex(k, l)].Packets
			}
			s.Classified[k.String()] = m
		}
		if h.ops == nil {
			return h.pinnedOpsCounters(&s) // the pinned sock_ops' (pinned.go)
		}
		s.Sockops, err = sockops.ReadCounters(h.ops.LanesOpsStats)
		return err
	})
	return s, err
}

// ByKind sums the classified packets per match kind.
func (s HostStats) ByKind() map[string]uint64 {
	out := map[string]uint64{}
	for k, m := range s.Classified {
		for _, n := range m {
			out[k] += n
		}
	}
	return out
}

// TryClassify runs the host's classifier on one Ethernet frame with
// BPF_PROG_TEST_RUN (the kernel's dummy socket: uid 0, the caller's cgroup)
// and returns the lane and match kind it chose, read from the classifier's
// counters: traffic through this host's trees at the same moment can blur
// the answer, so it is meant for tests and diagnostics on an idle host.
func (h *Host) TryClassify(frame []byte) (lane.Lane, classifier.Kind, error) {
	var l lane.Lane
	var k classifier.Kind
	err := h.use(func() error {
		before, err := classifier.ReadStats(h.cls.LanesClsStats)
		if err != nil {
			return err
		}
		if _, err := h.cls.LanesClassify.Run(&ebpf.RunOptions{Data: frame}); err != nil {
			return fmt.Errorf("classifier test run: %w", err)
		}
		after, err := classifier.ReadStats(h.cls.LanesClsStats)
		if err != nil {
			return err
		}
		for i := range after {
			if after[i].Packets != before[i].Packets {
				k, l = classifier.Kind(i/abi.LaneSlots), lane.Lane(i%abi.LaneSlots)
				return nil
			}
		}
		return errors.New("classifier counted nothing")
	})
	return l, k, err
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
