// Package datapath installs and runs the lanes kernel datapath in the
// current network namespace, in two parts:
//
//   - Host (host.go), one per namespace: one BPF collection (the cls_bpf
//     classifier that puts each packet in its lane, internal/bpf/classifier;
//     the cgroup-v2 sock_ops program that resolves each TCP socket's lane once
//     and applies per-socket settings, internal/bpf/sockops; the lanes TCP
//     congestion control that enforces cwnd caps, internal/bpf/capcc) with
//     their shared maps, the sock_ops link and one cgroup per lane
//     (cgroups.go).
//   - Egress (egress.go), one per managed interface: the HTB tree that
//     serves realtime > interactive > background (qdisc.go) with the Host's
//     classifier as its filter, and a short device queue (devqueue.go).
//
// Datapath (this file) is one Host with one Egress, for callers that manage
// a single interface (the lab, component tests); the daemon holds one Host
// and an Egress per interface.
//
// Everything is named after the instance, so daemons in different
// namespaces never touch each other's objects. docs/datapath.md has the
// design and why.
//
// After SIGKILL the qdisc tree and classifier stay (the kernel owns them)
// and keep classifying from the last map contents; the sock_ops bpf_link is
// not pinned and goes away with the process. Traffic flows. The next
// OpenEgress of the same instance adopts the tree in place; Cleanup removes
// it.
package datapath

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lanes-net/lanes/internal/bpf/abi"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/structops"
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
	InteractiveLeaf    string // the interactive lane's leaf qdisc: LeafAuto or LeafBfifo (qdisc.go)
	Instance           string // unique per daemon: names of cgroups, filters and state files
	StateDir           string // the state files' directory (HostConfig.StateDir)
	CgroupRoot         string // cgroup v2 mount (default: /sys/fs/cgroup/unified, /sys/fs/cgroup, any cgroup2 mount, or one lanes mounts at /run/lanes/cgroup2)
	// BackgroundNotsentLowat is TCP_NOTSENT_LOWAT for background sockets in
	// bytes (0 = 16 KiB, negative = leave the socket's setting alone).
	BackgroundNotsentLowat int
	// BackgroundTarget is the queuing-delay target of the background lane's
	// LEDBAT++ (bgcc.go): 0 = the default, negative = background sockets
	// keep the system congestion control.
	BackgroundTarget time.Duration
	// ReceiveTarget is rLEDBAT's target (HostConfig.ReceiveTarget).
	ReceiveTarget time.Duration
	// Yield: the foreground-aware yield (HostConfig.Yield).
	Yield bool
	// StructOps is how congestion controls are registered (HostConfig.StructOps).
	StructOps structops.Mode
	// Pinned: the classifier another loader pinned (HostConfig.Pinned).
	Pinned *Pinned
}

var errClosed = errors.New("datapath: closed")

var instanceRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)

func (c *Config) validate() error {
	if !instanceRE.MatchString(c.Instance) {
		return fmt.Errorf("datapath: instance %q must be 1-40 of [A-Za-z0-9_.-]", c.Instance)
	}
	e := c.egress()
	return e.validate()
}

// FlowKey is the full 5-tuple as the sender sees it: the paper's 3-tuple
// (destination address and port, source port), the local address (Src;
// the zero Addr = any) and the protocol (0 = any). The datapath's
// precedence between the wildcards is lanes_abi.h's (flow_lookup).
type FlowKey struct {
	Src   netip.Addr `json:"src,omitzero"`
	Dst   netip.Addr `json:"dst"`
	DPort uint16     `json:"dport"`
	SPort uint16     `json:"sport"`
	Proto uint8      `json:"proto,omitempty"`
}

func (f FlowKey) String() string {
	s := fmt.Sprintf("%s sport %d", netip.AddrPortFrom(f.Dst.Unmap(), f.DPort), f.SPort)
	if f.Src.IsValid() {
		s += " src " + f.Src.Unmap().String()
	}
	if f.Proto != 0 {
		s += fmt.Sprintf(" proto %d", f.Proto)
	}
	return s
}

func (f FlowKey) key() (abi.FlowKey, error) {
	if !f.Dst.IsValid() {
		return abi.FlowKey{}, errors.New("flow: no destination address")
	}
	if f.Src.IsValid() && f.Src.Unmap().Is4() != f.Dst.Unmap().Is4() {
		return abi.FlowKey{}, fmt.Errorf("flow %s: local and destination address of different families", f)
	}
	return classifier.FlowKey(f.Src.Unmap(), f.Dst.Unmap(), f.DPort, f.SPort, f.Proto), nil
}

// Lookups returns the keys the datapath tries for a socket or packet with
// this (concrete) 5-tuple, first match wins: flow_lookup's precedence of
// lanes_abi.h, (proto, src), (proto, any), (any, src), (any, any).
func (f FlowKey) Lookups() [4]FlowKey {
	var out [4]FlowKey
	for i := range out {
		k := f
		if i >= 2 {
			k.Proto = 0
		}
		if i&1 == 1 {
			k.Src = netip.Addr{}
		}
		out[i] = k
	}
	return out
}

// FlowEntry is a registered flow and its lane.
type FlowEntry struct {
	FlowKey
	Lane lane.Lane `json:"lane"`
}

// Datapath is a Host with the Egress of one interface.
type Datapath struct {
	*Host
	egress *Egress
	cfg    Config
}

// Open installs the host datapath and the egress tree of cfg.Interface in
// the calling thread's network namespace. As the lanes default, DSCP LE (1)
// goes to background; SetDSCPLane(lane.DSCPLowerEffort, lane.Unset) undoes it.
func Open(cfg Config) (*Datapath, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	h, err := OpenHost(HostConfig{Instance: cfg.Instance, StateDir: cfg.StateDir, CgroupRoot: cfg.CgroupRoot, BackgroundNotsentLowat: cfg.BackgroundNotsentLowat,
		BackgroundTarget: cfg.BackgroundTarget, ReceiveTarget: cfg.ReceiveTarget, StructOps: cfg.StructOps, Yield: cfg.Yield,
		Pinned: cfg.Pinned})
	if err != nil {
		return nil, err
	}
	cfg.CgroupRoot = h.cfg.CgroupRoot
	e, err := OpenEgress(h, cfg.egress())
	if err == nil {
		err = h.Lanes.SetDSCPLane(lane.DSCPLowerEffort, lane.Background)
	}
	if err != nil {
		if e != nil {
			err = errors.Join(err, e.Close())
		}
		return nil, errors.Join(err, h.Close())
	}
	return &Datapath{Host: h, egress: e, cfg: cfg}, nil
}

func (c Config) egress() EgressConfig {
	return EgressConfig{Interface: c.Interface, Mode: c.Mode, UplinkBps: c.UplinkBps, BackgroundFloorBps: c.BackgroundFloorBps,
		DeviceQueueBytes: c.DeviceQueueBytes, TxQueueLen: c.TxQueueLen, InteractiveLeaf: c.InteractiveLeaf}
}

// Egress is the interface's tree.
func (d *Datapath) Egress() *Egress { return d.egress }

// Close removes everything Open installed and restores the device queue.
func (d *Datapath) Close() error {
	return errors.Join(d.egress.Close(), d.Host.Close())
}

// Cleanup removes what a previous run of instance left on iface in the
// calling thread's network namespace (after SIGKILL): its qdisc tree and
// classifier, its device queue settings (restored from the state file) and
// its empty lane cgroups. Busy lane cgroups are kept for the next Open to
// adopt. Other instances' objects are not touched. stateDir is the run's
// HostConfig.StateDir.
func Cleanup(iface, instance, stateDir string) error {
	return CleanupAt(iface, instance, "", stateDir)
}

// CleanupAt is Cleanup with a cgroup v2 root other than the default.
func CleanupAt(iface, instance, cgroupRoot, stateDir string) error {
	if !instanceRE.MatchString(instance) {
		return fmt.Errorf("datapath: bad instance %q", instance)
	}
	cgroupRoot, err := resolveCgroupRoot(cgroupRoot)
	if err != nil {
		return err
	}
	defer releaseCgroupRoot(cgroupRoot)
	ns, err := currentNS()
	if err != nil {
		return err
	}
	defer ns.close()
	var l netlink.Link
	if err := ns.do(func() (err error) { l, err = netlink.LinkByName(iface); return }); err != nil {
		return fmt.Errorf("interface %s: %w", iface, err)
	}
	return errors.Join(CleanupEgress(ns, l, instance, stateDir), cleanupLaneCgroups(cgroupRoot, instance))
}

// CleanupEgress removes instance's tree, its ingress policer (which
// would otherwise go on policing at the rates a dead controller left) and
// its arrivals' IFB device from l and restores its device queue (its state
// file in stateDir).
func CleanupEgress(ns *nsRef, l netlink.Link, instance, stateDir string) error {
	return errors.Join(ns.do(func() error {
		owner, _, err := rootOwnership(l, instance)
		if err != nil || owner != rootOurs {
			return err
		}
		return deleteTree(l)
	}), ns.do(func() error { return ignoreGone(detachIngress(l, instance)) }),
		ns.do(func() error { return deleteIfb(BgIfbName(l.Attrs().Index)) }), restoreFromStateFile(ns, l, instance, stateDir))
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

// Stats reads the HTB class counters and the BPF counters.
func (d *Datapath) Stats() (Stats, error) {
	s := Stats{Interface: d.cfg.Interface, Mode: d.cfg.Mode.String()}
	hs, err := d.Host.Stats()
	if err != nil {
		return s, err
	}
	s.Classifier, s.Sockops, s.CapCC, s.Background = hs.ByKind(), hs.Sockops, hs.CapCC, hs.Background
	if s.Lanes, err = d.egress.Stats(); err != nil {
		return s, err
	}
	for l, ls := range s.Lanes {
		for _, m := range hs.Classified {
			ls.Classified += m[l]
		}
		s.Lanes[l] = ls
	}
	return s, nil
}
