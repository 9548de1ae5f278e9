// qdisc.go builds, identifies, removes and reads the lanes egress qdisc tree:
//
//	1:   htb root, default class 1:12 (interactive)
//	└─ 1:1   root class, rate = ceil = R
//	   ├─ 1:11 realtime     prio 0, rate r, ceil R ── bfifo
//	   ├─ 1:12 interactive  prio 1, rate r, ceil R ── fq_codel (bfifo where absent)
//	   ├─ 1:13 background   prio 7, rate floor|r, ceil R ── bfifo
//	   └─ 1:14 ACK class    prio 1, rate = ceil = A, burst 2 ACKs ── bfifo
//	                        (unset: rate r, ceil R; see ackclass.go)
//	filter: bpf direct-action, parent 1:, classid 1:0, name "lanes:<instance>"
//
// R is far above the line rate in device-bottleneck mode and just below the
// uplink in shaped mode; r is a token rate (100 B/s), so practically all of a
// leaf's service is borrowed from 1:1, and HTB lends to borrowing leaves
// strictly in prio order (lowest prio value first, see htb_dequeue: levels
// from 0 upward, prios by ffz of the row mask). docs/datapath.md explains
// why that is strict priority in both modes.
//
// The interactive lane holds every application's ordinary traffic, so one
// app's bulk upload and another's request/response flow share its leaf:
// fq_codel gives each flow its own queue and keeps the bulk flow's standing
// queue near 5 ms (docs/datapath.md, "The interactive lane's leaf"). The
// realtime lane's datagrams are released by lanes-rtd's EDF and must not be
// dropped for sojourn time, and the background lane's queue is kept short
// by LEDBAT++ and the yield, while its sojourn under strict priority is
// starvation by design, which CoDel would read as a standing queue: both
// stay bfifo.
//
// Note: tc_classid from cls_bpf is only 16 bits (qdisc_skb_cb), so the
// filter carries classid 1:0 and cls_bpf ORs its major in.
// Note: a socket whose SO_PRIORITY equals a leaf classid (1:11 ...) is put in
// that class by HTB itself before any filter runs (htb_classify).
package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/lane"
)

const (
	rootHandle    = lane.RootMajor << 16 // 1:
	rootClass     = rootHandle | 1       // 1:1
	tokenRate     = 100                  // bytes/s assured to a leaf without a floor
	wireMTU       = 1514                 // bytes of one full Ethernet frame
	bottleneckBps = 100_000_000_000      // device-bottleneck root rate, bit/s: far above any line rate
	shapeFactor   = 0.95                 // shaped: root rate = uplink * shapeFactor (ShapedRate)
	filterPrefix  = "lanes:"
)

// treeParams are the numbers the tree is built from.
type treeParams struct {
	rootBytes  uint64 // R, bytes/s
	floorBytes uint64 // background assured rate, bytes/s (0 = token rate)
	limits     [lane.Background + 1]uint32
	ackBytes   uint64 // the ACK class's rate = ceil, bytes/s (0: r, ceil R: unrestricted)
	leaf       string // the interactive lane's leaf: LeafAuto or LeafBfifo
}

// The interactive lane's leaf qdisc (EgressConfig.InteractiveLeaf).
const (
	LeafAuto    = ""         // fq_codel where the kernel has it, else bfifo
	LeafBfifo   = "bfifo"    // always a bfifo (the paired measurement's baseline)
	LeafFqCodel = "fq_codel" // reported when fq_codel was installed
)

func paramsFor(cfg EgressConfig) treeParams {
	p := treeParams{leaf: cfg.InteractiveLeaf}
	if cfg.Mode == Shaped {
		p.rootBytes = uint64(float64(cfg.UplinkBps)*shapeFactor) / 8
		p.floorBytes = cfg.BackgroundFloorBps / 8
		if p.floorBytes > p.rootBytes {
			p.floorBytes = p.rootBytes
		}
		// queue limits: 200 ms of the shaped rate, at least 64 KiB
		// (realtime 50 ms, at least 16 KiB)
		q := clampU32(p.rootBytes/5, 64<<10, 4<<20)
		p.limits = [4]uint32{0, clampU32(p.rootBytes/20, 16<<10, 1<<20), q, q}
	} else {
		p.rootBytes = bottleneckBps / 8
		p.limits = [4]uint32{0, 256 << 10, 1 << 20, 1 << 20}
	}
	return p
}

func clampU32(v uint64, lo, hi uint32) uint32 {
	if v < uint64(lo) {
		return lo
	}
	if v > uint64(hi) {
		return hi
	}
	return uint32(v)
}

// burst returns a bucket size in bytes for rate: 2 ms of it, at least two frames.
func burst(rateBytes uint64) uint32 {
	return clampU32(rateBytes/500, 2*wireMTU, 1<<30)
}

func htbClass(link int, handle, parent uint32, rate, ceil uint64, prio uint32) *netlink.HtbClass {
	return &netlink.HtbClass{
		ClassAttrs: netlink.ClassAttrs{LinkIndex: link, Handle: handle, Parent: parent},
		Rate:       rate,
		Ceil:       ceil,
		Buffer:     netlink.Xmittime(rate, maxU32(burst(rate), wireMTU)),
		Cbuffer:    netlink.Xmittime(ceil, burst(ceil)),
		Quantum:    wireMTU,
		Prio:       prio,
	}
}

func maxU32(a, b uint32) uint32 {
	if a > b {
		return a
	}
	return b
}

// filterName is the cls_bpf filter name that marks the tree as this instance's.
func filterName(instance string) string { return filterPrefix + instance }

// ownership says whose the root qdisc of link is.
type ownership int

const (
	rootDefault ownership = iota // kernel default (handle 0:): free to replace
	rootOurs                     // our HTB (our filter on it, or our bare class set)
	rootForeign                  // someone else's: leave it alone
)

func rootOwnership(link netlink.Link, instance string) (ownership, string, error) {
	qs, err := netlink.QdiscList(link)
	if err != nil {
		return 0, "", fmt.Errorf("list qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.Parent != netlink.HANDLE_ROOT {
			continue
		}
		desc := fmt.Sprintf("%s %s", q.Type(), netlink.HandleStr(a.Handle))
		if a.Handle == 0 || (a.Handle>>16) == 0 {
			return rootDefault, desc, nil
		}
		if q.Type() != "htb" || a.Handle != rootHandle {
			return rootForeign, desc, nil
		}
		fs, err := netlink.FilterList(link, rootHandle)
		if err != nil {
			return 0, "", fmt.Errorf("list filters of %s: %w", link.Attrs().Name, err)
		}
		if len(fs) == 0 {
			// A crash between building the tree and adding the filter
			// leaves our bare class set: recognise it by its classes.
			if bareTreeIsOurs(link) {
				return rootOurs, desc, nil
			}
			return rootForeign, desc, nil
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok && bf.Name == filterName(instance) {
				return rootOurs, desc, nil
			}
		}
		return rootForeign, desc + " (filters not ours)", nil
	}
	return rootDefault, "none", nil
}

func bareTreeIsOurs(link netlink.Link) bool {
	cs, err := netlink.ClassList(link, rootHandle)
	if err != nil {
		return false
	}
	want := map[uint32]bool{rootClass: false}
	for _, l := range lane.All {
		want[l.ClassID()] = false
	}
	for _, c := range cs {
		if h := c.Attrs().Handle; h == lane.AckClassID || h == lane.BgShapeClassID { // optional: trees before them lack them
			continue
		}
		if _, ok := want[c.Attrs().Handle]; !ok {
			return false
		}
		want[c.Attrs().Handle] = true
	}
	for _, seen := range want {
		if !seen {
			return false
		}
	}
	return true
}

// buildTree replaces the root qdisc of link with the lanes tree and attaches
// the classifier (prog fd) as its filter. With adopt, the root HTB is
// already this instance's: it is kept (HTB cannot change its own
// parameters, which are always the same) and its classes, leaves and filter
// are replaced in place, so packets never bypass the tree.
func buildTree(link netlink.Link, p treeParams, progFD int, instance string, adopt bool) (leaf string, err error) {
	idx := link.Attrs().Index
	name := link.Attrs().Name
	if !adopt {
		htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: rootHandle, Parent: netlink.HANDLE_ROOT})
		htb.Defcls = lane.Interactive.ClassID() & 0xffff
		dq := uint32(64)
		htb.DirectQlen = &dq
		if err := netlink.QdiscReplace(htb); err != nil {
			return "", fmt.Errorf("replace root qdisc of %s with htb: %w", name, err)
		}
	}
	if err := netlink.ClassReplace(htbClass(idx, rootClass, rootHandle, p.rootBytes, p.rootBytes, 0)); err != nil {
		return "", fmt.Errorf("htb root class on %s: %w", name, err)
	}
	for _, l := range lane.All {
		rate := uint64(tokenRate)
		if l == lane.Background && p.floorBytes > 0 {
			rate = p.floorBytes
		}
		if err := netlink.ClassReplace(htbClass(idx, l.ClassID(), rootClass, rate, p.rootBytes, l.HTBPrio())); err != nil {
			return "", fmt.Errorf("htb class %s for %s on %s: %w", netlink.HandleStr(l.ClassID()), l, name, err)
		}
		kind, err := replaceLeaf(idx, l, p)
		if err != nil {
			return "", fmt.Errorf("leaf qdisc for %s on %s: %w", l, name, err)
		}
		if l == lane.Interactive {
			leaf = kind
		}
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: idx,
			Parent:    rootHandle,
			Handle:    1,
			Priority:  1,
			Protocol:  unix.ETH_P_ALL,
		},
		ClassId:      rootHandle, // 1:0 -> major of every result
		Fd:           progFD,
		Name:         filterName(instance),
		DirectAction: true,
	}
	if err := netlink.FilterReplace(f); err != nil {
		return "", fmt.Errorf("attach classifier to %s: %w", name, err)
	}
	return leaf, nil
}

// replaceLeaf puts lane l's leaf qdisc under its class and says which kind
// it is: fq_codel for the interactive lane where the kernel has it (its
// memory limit the lane's byte limit), else a bfifo of the lane's limit.
// The two kinds have different handles: the kernel replaces a leaf by one
// of another kind only under a new handle (under the same handle it is a
// change of parameters, refused with EINVAL), so a kernel without fq_codel
// answers ENOENT and keeps the bfifo, and either kind replaces the other.
func replaceLeaf(ifindex int, l lane.Lane, p treeParams) (string, error) {
	if l == lane.Interactive && p.leaf != LeafBfifo {
		fq := netlink.NewFqCodel(netlink.QdiscAttrs{LinkIndex: ifindex, Handle: fqCodelHandle(l), Parent: l.ClassID()})
		fq.MemoryLimit = p.limits[l]
		err := netlink.QdiscReplace(fq)
		if err == nil {
			return LeafFqCodel, nil
		}
		if !errors.Is(err, unix.ENOENT) {
			return "", fmt.Errorf("fq_codel: %w", err)
		}
		// "Specified qdisc kind is unknown": the kernel has no fq_codel
	}
	return LeafBfifo, replaceBfifo(ifindex, leafHandle(l), l.ClassID(), p.limits[l])
}

// leafHandle is the handle of lane l's leaf qdisc: <minor of its class>:.
func leafHandle(l lane.Lane) uint32 { return (l.ClassID() & 0xffff) << 16 }

// fqCodelHandle is the handle of lane l's leaf when it is an fq_codel:
// 1<minor>: (112: for the interactive lane).
func fqCodelHandle(l lane.Lane) uint32 { return leafHandle(l) | 0x100<<16 }

// replaceBfifo creates (or replaces) a bfifo with limit bytes under parent.
// The netlink library has no fifo type with options, hence the raw message:
// tcmsg + TCA_KIND "bfifo" + TCA_OPTIONS struct tc_fifo_qopt { __u32 limit }.
func replaceBfifo(ifindex int, handle, parent, limit uint32) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(ifindex), Handle: handle, Parent: parent})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("bfifo")))
	req.AddData(nl.NewRtAttr(nl.TCA_OPTIONS, nl.Uint32Attr(limit)))
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// deleteTree removes the root qdisc (and with it classes, leaves, filter);
// the kernel puts its default root qdisc back.
func deleteTree(link netlink.Link) error {
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: rootHandle, Parent: netlink.HANDLE_ROOT})
	if err := netlink.QdiscDel(htb); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("delete root qdisc of %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// LaneStats is one lane's share of the egress tree.
type LaneStats struct {
	Lane           lane.Lane `json:"lane"`
	ClassID        string    `json:"classid"`
	Packets        uint64    `json:"packets"`
	Bytes          uint64    `json:"bytes"`
	Drops          uint64    `json:"drops"`
	Overlimits     uint64    `json:"overlimits"`
	BacklogBytes   uint64    `json:"backlog_bytes"`
	BacklogPackets uint64    `json:"backlog_packets"`
	Classified     uint64    `json:"classified"` // packets the classifier sent to this lane
}

func classStats(link netlink.Link) (map[uint32]*netlink.ClassStatistics, error) {
	cs, err := netlink.ClassList(link, rootHandle)
	if err != nil {
		return nil, fmt.Errorf("list classes of %s: %w", link.Attrs().Name, err)
	}
	out := map[uint32]*netlink.ClassStatistics{}
	for _, c := range cs {
		if s := c.Attrs().Statistics; s != nil {
			out[c.Attrs().Handle] = s
		}
	}
	return out, nil
}

func isNotFound(err error) bool {
	return err != nil && (errors.Is(err, unix.ENOENT) || strings.Contains(err.Error(), "not found"))
}

// ShapedRate is the rate the root class of a shaped tree actually sends at,
// for an uplink of uplinkBps: what a component computing transmit times
// (the realtime lane) must use.
func ShapedRate(uplinkBps uint64) uint64 { return uint64(float64(uplinkBps) * shapeFactor) }
