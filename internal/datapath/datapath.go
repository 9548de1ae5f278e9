// Package datapath installs and runs the lanes kernel datapath on one
// interface of the current network namespace: the egress HTB tree that
// serves realtime > interactive > background (qdisc.go), the cls_bpf
// classifier that puts each packet in its lane (internal/bpf/classifier),
// the cgroup-v2 sock_ops program that resolves each TCP socket's lane once
// and applies per-socket settings (internal/bpf/sockops), the lanes TCP
// congestion control that enforces cwnd caps on CUBIC sockets
// (internal/bpf/capcc, optional: see CapCCStatus), a short device
// queue (devqueue.go) and one cgroup per lane (cgroups.go).
//
// One Datapath per (network namespace, interface). Everything it creates is
// named after Config.Instance, so daemons in different namespaces never
// touch each other's objects. docs/datapath.md has the design and why.
//
// Lifecycle:
//   - Open: removes this instance's own leftovers, then installs; it
//     refuses to replace a root qdisc that is not the kernel default or ours.
//   - Close: removes everything and restores the device queue.
//   - After SIGKILL the qdisc tree and classifier stay (the kernel owns them)
//     and keep classifying from the last map contents; the sock_ops
//     bpf_link is not pinned and goes away with the process. Traffic flows.
//     Cleanup (or the next Open) removes the leftovers.
package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/lane"
)

// Mode is how the egress tree finds the bottleneck.
type Mode int

const (
	// DeviceBottleneck: no rate known. Classes never rate-limit; the device
	// queue is kept short so the queue forms in the qdisc.
	DeviceBottleneck Mode = iota
	// Shaped: the root shapes just below Config.UplinkBps, so the queue
	// forms here and not in the modem or access point upstream.
	Shaped
)

func (m Mode) String() string {
	if m == Shaped {
		return "shaped"
	}
	return "device-bottleneck"
}

// Config describes one datapath.
type Config struct {
	Interface          string
	Mode               Mode
	UplinkBps          uint64 // Shaped: link rate in bit/s; the root rate is set just below it
	BackgroundFloorBps uint64 // Shaped: guaranteed background rate, 0 = strictly below best effort
	DeviceQueueBytes   int    // BQL limit_max where the driver has BQL (default: one frame)
	TxQueueLen         int    // txqueuelen where there is no BQL (default: DeviceQueueBytes in frames, at least 2; TUN/TAP: unchanged)
	Instance           string // unique per daemon: names of cgroups, filters and state files
	CgroupRoot         string // cgroup v2 mount (default: /sys/fs/cgroup/unified, /sys/fs/cgroup, any cgroup2 mount, or one lanes mounts at /run/lanes/cgroup2)
	// BackgroundNotsentLowat is TCP_NOTSENT_LOWAT for background sockets in
	// bytes (0 = 16 KiB, negative = leave the socket's setting alone).
	BackgroundNotsentLowat int
	// BackgroundTarget is the queuing-delay target of the background lane's
	// LEDBAT++ (bgcc.go): 0 = the default, negative = background sockets
	// keep the system congestion control.
	BackgroundTarget time.Duration
}

var errClosed = errors.New("datapath: closed")

var instanceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)

func (c *Config) validate() error {
	if c.Interface == "" {
		return errors.New("datapath: no interface")
	}
	if !instanceRE.MatchString(c.Instance) {
		return fmt.Errorf("datapath: instance %q must be 1-40 of [A-Za-z0-9_.-]", c.Instance)
	}
	switch c.Mode {
	case DeviceBottleneck:
	case Shaped:
		if c.UplinkBps < 100_000 {
			return fmt.Errorf("datapath: shaped mode needs an uplink rate of at least 100 kbit/s, got %d bit/s", c.UplinkBps)
		}
	default:
		return fmt.Errorf("datapath: unknown mode %d", c.Mode)
	}
	return nil
}

// FlowKey is the paper's 3-tuple as the sender sees it, plus an optional
// protocol (0 = any).
type FlowKey struct {
	Dst   netip.Addr `json:"dst"`
	DPort uint16     `json:"dport"`
	SPort uint16     `json:"sport"`
	Proto uint8      `json:"proto,omitempty"`
}

func (f FlowKey) String() string {
	s := fmt.Sprintf("%s sport %d", netip.AddrPortFrom(f.Dst.Unmap(), f.DPort), f.SPort)
	if f.Proto != 0 {
		s += fmt.Sprintf(" proto %d", f.Proto)
	}
	return s
}

func (f FlowKey) key() (abi.FlowKey, error) {
	if !f.Dst.IsValid() {
		return abi.FlowKey{}, errors.New("flow: no destination address")
	}
	return classifier.FlowKey(f.Dst.Unmap(), f.DPort, f.SPort, f.Proto), nil
}

// FlowEntry is a registered flow and its lane.
type FlowEntry struct {
	FlowKey
	Lane lane.Lane `json:"lane"`
}

// Datapath is the installed datapath of one interface.
type Datapath struct {
	cfg     Config
	ns      *nsRef
	link    netlink.Link
	cls     *classifier.ClassifierObjects
	ops     *sockops.SockopsObjects
	opsLink link.Link
	cc      *capcc.CC // nil when the kernel cannot run it (ccErr says why)
	ccName  string
	ccErr   error
	bg      *ledbat.CC // background lane's LEDBAT++, nil if off (bgErr says why)
	bgErr   error
	cgIDs   map[lane.Lane]uint64
	devq    *devQueueState

	mu     sync.Mutex
	closed atomic.Bool
}

// Open installs the datapath on cfg.Interface in the calling thread's
// network namespace.
func Open(cfg Config) (d *Datapath, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.CgroupRoot, err = resolveCgroupRoot(cfg.CgroupRoot); err != nil {
		return nil, err
	}
	ns, err := currentNS()
	if err != nil {
		return nil, err
	}
	d = &Datapath{cfg: cfg, ns: ns}
	defer func() {
		if err != nil {
			// not evicting: busy lane cgroups adopted from a crashed
			// run keep their processes
			err = errors.Join(err, d.teardown(false))
			d = nil
		}
	}()
	if err := ns.do(func() error {
		l, err := netlink.LinkByName(cfg.Interface)
		if err != nil {
			return fmt.Errorf("interface %s: %w", cfg.Interface, err)
		}
		d.link = l
		return nil
	}); err != nil {
		return d, err
	}
	// Our own leftovers from a crashed run go first (and only ours).
	if err := cleanup(ns, d.link, cfg.Instance, cfg.CgroupRoot); err != nil {
		return d, err
	}
	if err := ns.do(func() (err error) { d.link, err = netlink.LinkByName(cfg.Interface); return }); err != nil {
		return d, fmt.Errorf("interface %s: %w", cfg.Interface, err)
	}
	var owner ownership
	var desc string
	if err := ns.do(func() (err error) { owner, desc, err = rootOwnership(d.link, cfg.Instance); return }); err != nil {
		return d, err
	}
	if owner == rootForeign {
		return d, fmt.Errorf("datapath: root qdisc %s on %s is not lanes' (instance %s): remove it first", desc, cfg.Interface, cfg.Instance)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return d, fmt.Errorf("remove memlock limit: %w", err)
	}
	l2 := uint32(0)
	if t := d.link.Attrs().EncapType; t == "ether" || t == "loopback" {
		l2 = 14
	}
	if d.cls, err = classifier.Load(classifier.Config{L2Len: l2}); err != nil {
		return d, err
	}
	if err := d.SetDSCPLane(lane.DSCPLowerEffort, lane.Background); err != nil {
		return d, err
	}
	cookie, err := ns.netnsCookie()
	if err != nil {
		return d, err
	}
	lowat := cfg.BackgroundNotsentLowat
	if lowat == 0 {
		lowat = 16 << 10
	} else if lowat < 0 {
		lowat = 0
	}
	// The cap-enforcing congestion control, one name per datapath (names
	// are global to the kernel). Without it caps still apply through the
	// clamp, but only as fast as CUBIC applies it (see docs/datapath.md).
	d.ccName = capcc.Name(cfg.Instance, cfg.Interface, fmt.Sprint(cookie))
	if d.cc, d.ccErr = capcc.Load(d.ccName); d.ccErr != nil {
		slog.Warn("datapath: no lanes congestion control: cwnd caps reach CUBIC sockets only when they are cwnd-limited",
			"interface", cfg.Interface, "instance", cfg.Instance, "err", d.ccErr)
	}
	ccName := ""
	if d.cc != nil {
		ccName = d.cc.Name
	}
	d.loadBackgroundCC(cookie)
	if d.ops, err = sockops.Load(sockops.Config{NetnsCookie: cookie, NotsentLowat: uint32(lowat), CCName: ccName, BgCCName: d.bgCCName()}, sockops.Shared{
		Cookie: d.cls.LanesCookie, Tuple: d.cls.LanesTuple, Cgroup: d.cls.LanesCgroup, UID: d.cls.LanesUid,
	}); err != nil {
		return d, err
	}
	if d.cgIDs, err = acquireLaneCgroups(cfg.CgroupRoot, cfg.Instance); err != nil {
		return d, err
	}
	for l, id := range d.cgIDs {
		if err := d.SetCgroupLane(id, l); err != nil {
			return d, err
		}
	}

	mtu := d.link.Attrs().MTU
	if mtu <= 0 {
		mtu = 1500
	}
	qbytes := cfg.DeviceQueueBytes
	if qbytes <= 0 {
		qbytes = mtu + 14
	}
	txq := cfg.TxQueueLen
	if txq <= 0 {
		txq = max(2, (qbytes+mtu-1)/mtu)
		if d.link.Type() == "tuntap" {
			// TUN/TAP drops when its ring is full instead of stopping the
			// queue, so a short ring only adds loss: leave it alone.
			txq = 0
		}
	}
	if d.link.Type() == "tuntap" && cfg.Mode == DeviceBottleneck {
		slog.Warn("datapath: TUN/TAP has no transmit backpressure, so no queue forms in the lanes qdisc in device-bottleneck mode; use shaped mode",
			"interface", cfg.Interface)
	}
	gsoSegs := 0
	if cfg.Mode == Shaped {
		// one GSO packet ~ 1 ms at the shaped rate, at least 2 segments
		gsoSegs = min(64, max(2, int(paramsFor(cfg).rootBytes/1000)/(mtu-40)))
	}
	if d.devq, err = shortenDeviceQueue(ns, d.link, qbytes, txq, gsoSegs); err != nil {
		return d, err
	}
	if err := writeState(stateFile(cfg.Interface, cfg.Instance), d.devq); err != nil {
		return d, fmt.Errorf("write state file: %w", err)
	}
	if err := ns.do(func() error {
		return buildTree(d.link, paramsFor(cfg), d.cls.LanesClassify.FD(), cfg.Instance)
	}); err != nil {
		return d, err
	}
	// bpf_link (multi-attach): other daemons' programs at the same root
	// stay attached beside ours. Not pinned: it dies with this process.
	if d.opsLink, err = link.AttachCgroup(link.CgroupOptions{
		Path: cfg.CgroupRoot, Attach: ebpf.AttachCGroupSockOps, Program: d.ops.LanesSockops,
	}); err != nil {
		return d, fmt.Errorf("attach sock_ops at %s: %w", cfg.CgroupRoot, err)
	}
	return d, nil
}

// Close removes everything Open installed and restores the device queue.
func (d *Datapath) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Swap(true) {
		return nil
	}
	return d.teardown(true)
}

// teardown undoes whatever of Open happened; evict moves processes out of
// the lane cgroups so they can be removed.
func (d *Datapath) teardown(evict bool) error {
	var errs []error
	if d.opsLink != nil {
		errs = append(errs, d.opsLink.Close())
	}
	if d.link != nil {
		errs = append(errs, d.ns.do(func() error {
			owner, _, err := rootOwnership(d.link, d.cfg.Instance)
			if err != nil || owner != rootOurs {
				return err
			}
			return deleteTree(d.link)
		}))
		if d.devq != nil {
			errs = append(errs, restoreDeviceQueue(d.ns, d.link, d.devq))
		}
		if err := removeFile(stateFile(d.cfg.Interface, d.cfg.Instance)); err != nil {
			errs = append(errs, err)
		}
	}
	if d.cgIDs != nil {
		errs = append(errs, releaseLaneCgroups(d.cfg.CgroupRoot, d.cfg.Instance, evict))
	}
	if d.ops != nil {
		errs = append(errs, d.ops.Close())
	}
	if d.cc != nil {
		errs = append(errs, d.cc.Close())
	}
	if d.bg != nil {
		errs = append(errs, d.bg.Close())
	}
	if d.cls != nil {
		errs = append(errs, d.cls.Close())
	}
	d.ns.close()
	return errors.Join(errs...)
}

// Cleanup removes what a previous run of instance left on iface in the
// calling thread's network namespace (after SIGKILL): its qdisc tree and
// classifier, its device queue settings (restored from the state file) and
// its empty lane cgroups. Busy lane cgroups are kept for the next Open to
// adopt. Other instances' objects are not touched.
func Cleanup(iface, instance string) error {
	return CleanupAt(iface, instance, "")
}

// CleanupAt is Cleanup with a cgroup v2 root other than the default.
func CleanupAt(iface, instance, cgroupRoot string) error {
	if !instanceRE.MatchString(instance) {
		return fmt.Errorf("datapath: bad instance %q", instance)
	}
	cgroupRoot, err := resolveCgroupRoot(cgroupRoot)
	if err != nil {
		return err
	}
	ns, err := currentNS()
	if err != nil {
		return err
	}
	defer ns.close()
	var l netlink.Link
	if err := ns.do(func() (err error) { l, err = netlink.LinkByName(iface); return }); err != nil {
		return fmt.Errorf("interface %s: %w", iface, err)
	}
	return cleanup(ns, l, instance, cgroupRoot)
}

func cleanup(ns *nsRef, l netlink.Link, instance, cgroupRoot string) error {
	var errs []error
	errs = append(errs, ns.do(func() error {
		owner, _, err := rootOwnership(l, instance)
		if err != nil || owner != rootOurs {
			return err
		}
		return deleteTree(l)
	}))
	sf := stateFile(l.Attrs().Name, instance)
	if st, err := readState(sf); err == nil {
		errs = append(errs, restoreDeviceQueue(ns, l, st), removeFile(sf))
	} else if !errors.Is(err, errNotExist) {
		errs = append(errs, err)
	}
	errs = append(errs, cleanupLaneCgroups(cgroupRoot, instance))
	return errors.Join(errs...)
}

func (d *Datapath) check() error {
	if d == nil || d.closed.Load() {
		return errClosed
	}
	return nil
}

func laneValue(l lane.Lane) (uint32, error) {
	if l < lane.Realtime || l > lane.Background {
		return 0, fmt.Errorf("datapath: invalid lane %d", l)
	}
	return uint32(l), nil
}

// SetFlowLane puts a 3-tuple in a lane (replacing any earlier lane).
func (d *Datapath) SetFlowLane(f FlowKey, l lane.Lane) error {
	if err := d.check(); err != nil {
		return err
	}
	k, err := f.key()
	if err != nil {
		return err
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	if err := d.cls.LanesTuple.Put(k, v); err != nil {
		return fmt.Errorf("register flow %s: %w", f, err)
	}
	return nil
}

// DeleteFlow removes a registered 3-tuple; a missing one is not an error.
func (d *Datapath) DeleteFlow(f FlowKey) error {
	if err := d.check(); err != nil {
		return err
	}
	k, err := f.key()
	if err != nil {
		return err
	}
	return ignoreNotExist(d.cls.LanesTuple.Delete(k), "unregister flow "+f.String())
}

// Flows lists the registered 3-tuples.
func (d *Datapath) Flows() ([]FlowEntry, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	var out []FlowEntry
	var k abi.FlowKey
	var v uint32
	it := d.cls.LanesTuple.Iterate()
	for it.Next(&k, &v) {
		out = append(out, FlowEntry{FlowKey: FlowKey{Dst: k.Addr(), DPort: k.Dport, SPort: k.Sport, Proto: k.Proto}, Lane: lane.Lane(v)})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list flows: %w", err)
	}
	slices.SortFunc(out, func(a, b FlowEntry) int {
		return cmp.Or(a.Dst.Compare(b.Dst), cmp.Compare(a.DPort, b.DPort), cmp.Compare(a.SPort, b.SPort), cmp.Compare(a.Proto, b.Proto))
	})
	return out, nil
}

// SetCgroupLane puts every socket of the cgroup v2 with this id in a lane.
func (d *Datapath) SetCgroupLane(cgroupID uint64, l lane.Lane) error {
	if err := d.check(); err != nil {
		return err
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	if err := d.cls.LanesCgroup.Put(cgroupID, v); err != nil {
		return fmt.Errorf("cgroup %d -> %s: %w", cgroupID, l, err)
	}
	return nil
}

// DeleteCgroup forgets a cgroup's lane.
func (d *Datapath) DeleteCgroup(cgroupID uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	return ignoreNotExist(d.cls.LanesCgroup.Delete(cgroupID), fmt.Sprintf("delete cgroup %d", cgroupID))
}

// SetUIDLane puts every socket owned by uid in a lane.
func (d *Datapath) SetUIDLane(uid uint32, l lane.Lane) error {
	if err := d.check(); err != nil {
		return err
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	if err := d.cls.LanesUid.Put(uid, v); err != nil {
		return fmt.Errorf("uid %d -> %s: %w", uid, l, err)
	}
	return nil
}

// DeleteUID forgets a uid's lane.
func (d *Datapath) DeleteUID(uid uint32) error {
	if err := d.check(); err != nil {
		return err
	}
	return ignoreNotExist(d.cls.LanesUid.Delete(uid), fmt.Sprintf("delete uid %d", uid))
}

// SetDSCPLane maps a DSCP code point to a lane; lane.Unset removes the mapping.
// Open maps LE (1) to background; EF goes to realtime only if the caller says so.
func (d *Datapath) SetDSCPLane(dscp uint8, l lane.Lane) error {
	if err := d.check(); err != nil {
		return err
	}
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
	if err := d.cls.LanesDscp.Put(uint32(dscp), v); err != nil {
		return fmt.Errorf("dscp %d -> %s: %w", dscp, l, err)
	}
	return nil
}

// LaneCgroup returns the cgroup v2 directory of a lane and its id.
func (d *Datapath) LaneCgroup(l lane.Lane) (path string, id uint64, err error) {
	id, ok := d.cgIDs[l]
	if !ok {
		return "", 0, fmt.Errorf("datapath: no cgroup for lane %s", l)
	}
	return laneCgroupBase(d.cfg.CgroupRoot, d.cfg.Instance) + "/" + l.String(), id, nil
}

// SocketLane returns the lane sock_ops (or SetSocketLane) stored for a
// socket cookie; false when the socket has none (it is then classified per
// packet, by default interactive).
func (d *Datapath) SocketLane(cookie uint64) (lane.Lane, bool) {
	if d.check() != nil {
		return lane.Unset, false
	}
	var v uint32
	if d.cls.LanesCookie.Lookup(cookie, &v) != nil || v < 1 || v > 3 {
		return lane.Unset, false
	}
	return lane.Lane(v), true
}

// SetSocketLane puts one socket (by cookie) in a lane; it beats every other rule.
func (d *Datapath) SetSocketLane(cookie uint64, l lane.Lane) error {
	if err := d.check(); err != nil {
		return err
	}
	v, err := laneValue(l)
	if err != nil {
		return err
	}
	if err := d.cls.LanesCookie.Put(cookie, v); err != nil {
		return fmt.Errorf("socket %d -> %s: %w", cookie, l, err)
	}
	return nil
}

// ClearSocketLane forgets a socket's lane (by cookie): its packets are then
// classified by 3-tuple, cgroup, uid or marking again. A socket never seen is
// not an error.
func (d *Datapath) ClearSocketLane(cookie uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	if err := d.cls.LanesCookie.Delete(cookie); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("socket %d: %w", cookie, err)
	}
	return nil
}

// SetLaneCwndCap caps the congestion window (segments) of every TCP socket
// of a lane; 0 removes the cap. sock_ops applies it at establishment and on
// the next RTT sample of live sockets; a capped CUBIC socket is moved to the
// lanes congestion control, which brings cwnd under the cap on its next ACK.
func (d *Datapath) SetLaneCwndCap(l lane.Lane, segs uint32) error {
	if err := d.check(); err != nil {
		return err
	}
	if _, err := laneValue(l); err != nil {
		return err
	}
	if err := d.ops.LanesLaneCap.Put(uint32(l), segs); err != nil {
		return fmt.Errorf("cwnd cap of %s: %w", l, err)
	}
	return nil
}

// SetSocketCwndCap caps one socket's congestion window (segments); 0 removes
// the socket's own cap, so its lane's cap (if any) applies again.
func (d *Datapath) SetSocketCwndCap(cookie uint64, segs uint32) error {
	if err := d.check(); err != nil {
		return err
	}
	if segs == 0 {
		return ignoreNotExist(d.ops.LanesSockCap.Delete(cookie), "remove socket cwnd cap")
	}
	if err := d.ops.LanesSockCap.Put(cookie, segs); err != nil {
		return fmt.Errorf("cwnd cap of socket %d: %w", cookie, err)
	}
	return nil
}

// Stats is a snapshot of the datapath's counters.
type Stats struct {
	Interface  string                  `json:"interface"`
	Mode       string                  `json:"mode"`
	Lanes      map[lane.Lane]LaneStats `json:"lanes"`      // by lane
	Classifier map[string]uint64       `json:"classifier"` // classifier packets by match kind
	Sockops    map[string]uint64       `json:"sockops"`    // sock_ops events
	CapCC      CapCCStatus             `json:"cap_cc"`     // the cap-enforcing congestion control
	Background BackgroundCCStatus      `json:"background_cc"`
}

// CapCCStatus says whether the lanes congestion control (CUBIC with an
// enforced cwnd clamp) is registered, under which name, and if not why.
type CapCCStatus struct {
	Active bool   `json:"active"`
	Name   string `json:"name,omitempty"`   // kernel congestion control name
	Reason string `json:"reason,omitempty"` // why it is not active
}

// CapCC reports the state of the lanes congestion control of this datapath.
func (d *Datapath) CapCC() CapCCStatus {
	if d.check() != nil {
		return CapCCStatus{Reason: errClosed.Error()}
	}
	if d.cc == nil {
		r := "not loaded"
		if d.ccErr != nil {
			r = d.ccErr.Error()
		}
		return CapCCStatus{Reason: r}
	}
	return CapCCStatus{Active: true, Name: d.cc.Name}
}

// Stats reads the HTB class counters and the BPF counters.
func (d *Datapath) Stats() (Stats, error) {
	if err := d.check(); err != nil {
		return Stats{}, err
	}
	s := Stats{Interface: d.cfg.Interface, Mode: d.cfg.Mode.String(), Lanes: map[lane.Lane]LaneStats{}, Classifier: map[string]uint64{}, CapCC: d.CapCC(), Background: d.BackgroundCC()}
	cls, err := classifier.ReadStats(d.cls.LanesClsStats)
	if err != nil {
		return s, err
	}
	var hs map[uint32]*netlink.ClassStatistics
	if err := d.ns.do(func() (err error) { hs, err = classStats(d.link); return }); err != nil {
		return s, err
	}
	for _, l := range lane.All {
		ls := LaneStats{Lane: l, ClassID: netlink.HandleStr(l.ClassID())}
		if st := hs[l.ClassID()]; st != nil {
			if st.Basic != nil {
				ls.Packets, ls.Bytes = uint64(st.Basic.Packets), st.Basic.Bytes
			}
			if st.Queue != nil {
				ls.Drops, ls.Overlimits = uint64(st.Queue.Drops), uint64(st.Queue.Overlimits)
				ls.BacklogBytes, ls.BacklogPackets = uint64(st.Queue.Backlog), uint64(st.Queue.Qlen)
			}
		}
		for k := classifier.Kind(0); int(k) < classifier.NumKinds; k++ {
			ls.Classified += cls[classifier.StatsIndex(k, l)].Packets
		}
		s.Lanes[l] = ls
	}
	for k := classifier.Kind(0); int(k) < classifier.NumKinds; k++ {
		var n uint64
		for _, l := range lane.All {
			n += cls[classifier.StatsIndex(k, l)].Packets
		}
		s.Classifier[k.String()] = n
	}
	if s.Sockops, err = sockops.ReadCounters(d.ops.LanesOpsStats); err != nil {
		return s, err
	}
	return s, nil
}
