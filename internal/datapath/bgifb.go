// bgifb.go: the background non-TCP class's arrivals shaped on the device.
// Every egress tree gets an IFB device (lanes-ifb<ifindex>, in the same
// namespace) holding an HTB class and a bfifo. Where the controller
// (internal/bgudp) shapes the class's arrivals, the ingress program
// redirects the packets of the class's flows, and only those, to the IFB
// (lanes_bg_ctl's shaped of the ingress entry holds the IFB's ifindex,
// bgclass.h); the class's ceil is the controller's rate and its queue
// holds 100 ms of it (BgShapeQueueLimit), as the upload's shaper (1:15)
// does. The IFB hands each packet back to the interface's receive path
// past its ingress hook. A loss-based sender (quic-go's CUBIC) then meets
// no drop at each lowering of the rate, only at that queue's limit, where
// the ingress policer dropped every packet over the rate and each drop
// cut its window by 0.3 (docs/background.md, "Background QUIC and UDP").
//
// A kernel without IFB (CONFIG_IFB off, no module) keeps the policer:
// the tree records why (BgArrivalShapeError) and SetBgShape fails for
// downloads, so the controller polices the arrivals as before.
package datapath

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/classifier"
)

const (
	// bgIfbRoot is the IFB's root HTB qdisc (1:), bgIfbClass its one class
	// (1:1, the default: every packet redirected there is the class's),
	// bgIfbLeaf the class's bfifo (10:).
	bgIfbRoot  = 1 << 16
	bgIfbClass = 1<<16 | 1
	bgIfbLeaf  = 0x10 << 16
	// bgIfbOpen is the class's rate while the arrivals are not shaped
	// (none are redirected then): 10 Gbit/s, bytes/s.
	bgIfbOpen = 1_250_000_000
)

// BgIfbName is the name of the IFB device the arrivals of interface
// ifindex's class are shaped on.
func BgIfbName(ifindex int) string { return fmt.Sprintf("%s%d", bgIfbPrefix, ifindex) }

const bgIfbPrefix = "lanes-ifb"

// IsBgIfb says whether name is such a device's: it has no tree of its
// own and goes with its interface's.
func IsBgIfb(name string) bool { return strings.HasPrefix(name, bgIfbPrefix) }

// buildBgIfb creates the tree's IFB device with its class at the open
// rate (removing one a killed run left); a failure is recorded
// (bgIfbErr), not returned. Called with the tree built.
func (e *Egress) buildBgIfb() {
	e.bgIfbBytes, e.bgIfbDropped, e.bgIfbSent = 0, 0, 0
	name := BgIfbName(e.link.Attrs().Index)
	e.bgIfbErr = e.ns.do(func() error {
		if err := deleteIfb(name); err != nil {
			return err
		}
		l := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name, TxQLen: 32}}
		if err := netlink.LinkAdd(l); err != nil {
			return fmt.Errorf("add ifb %s (CONFIG_IFB): %w", name, err)
		}
		link, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		e.bgIfb = link
		silenceIPv6(name)
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
		return replaceIfbTree(link.Attrs().Index, 0)
	})
	if e.bgIfbErr != nil {
		slog.Warn("datapath: background non-TCP arrivals policed, not shaped, on this interface (no IFB)",
			"interface", e.cfg.Interface, "err", e.bgIfbErr)
		_ = e.ns.do(func() error { return deleteIfb(name) })
		e.bgIfb = nil
	}
}

// replaceIfbTree creates (or changes) the IFB's HTB root, its class at
// bytes/s (0: the open rate) and the class's bfifo.
func replaceIfbTree(idx int, bytes uint64) error {
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: bgIfbRoot, Parent: netlink.HANDLE_ROOT})
	htb.Defcls = bgIfbClass & 0xffff
	if err := netlink.QdiscReplace(htb); err != nil {
		return fmt.Errorf("htb on the ifb: %w", err)
	}
	if err := replaceIfbClass(idx, bytes); err != nil {
		return err
	}
	return replaceBfifo(idx, bgIfbLeaf, bgIfbClass, BgShapeQueueLimit(bytes))
}

// replaceIfbClass sets the IFB class's rate and ceil (bytes/s, 0: open).
func replaceIfbClass(idx int, bytes uint64) error {
	if bytes == 0 {
		bytes = bgIfbOpen
	}
	if err := netlink.ClassReplace(htbClass(idx, bgIfbClass, bgIfbRoot, bytes, bytes, 0)); err != nil {
		return fmt.Errorf("htb class of the ifb: %w", err)
	}
	return nil
}

// deleteIfb removes the IFB device name if there is one (its qdiscs go
// with it).
func deleteIfb(name string) error {
	l, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Type() != "ifb" {
		return fmt.Errorf("%s is a %s, not lanes' ifb: remove or rename it", name, l.Type())
	}
	if err := netlink.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// closeBgIfb removes the tree's IFB device.
func (e *Egress) closeBgIfb() error {
	if e.link == nil {
		return nil
	}
	return e.ns.do(func() error { return deleteIfb(BgIfbName(e.link.Attrs().Index)) })
}

// setBgIfbRate changes the IFB class's rate (bytes/s, 0: open) and its
// queue's limit; it returns the IFB's ifindex.
func (e *Egress) setBgIfbRate(bytes uint64) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, errClosed
	}
	if e.bgIfbErr != nil {
		return 0, fmt.Errorf("%s: %w", e.cfg.Interface, e.bgIfbErr)
	}
	idx := e.bgIfb.Attrs().Index
	if bytes == e.bgIfbBytes {
		return idx, nil
	}
	err := e.ns.do(func() error {
		if err := replaceIfbClass(idx, bytes); err != nil {
			return err
		}
		if BgShapeQueueLimit(bytes) == BgShapeQueueLimit(e.bgIfbBytes) {
			return nil
		}
		return replaceBfifo(idx, bgIfbLeaf, bgIfbClass, BgShapeQueueLimit(bytes))
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", e.cfg.Interface, err)
	}
	e.bgIfbBytes = bytes
	return idx, nil
}

// bgIfbStats reads the IFB class's counters.
func (e *Egress) bgIfbStats() (LaneStats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return LaneStats{}, errClosed
	}
	if e.bgIfbErr != nil {
		return LaneStats{}, e.bgIfbErr
	}
	ls := LaneStats{ClassID: netlink.HandleStr(bgIfbClass)}
	return ls, e.ns.do(func() error {
		c, err := classStatsOf(e.bgIfb, bgIfbClass)
		ls.add(c)
		if err != nil {
			return err
		}
		return e.checkIfbDelivers(ls.Packets)
	})
}

// silenceIPv6 turns IPv6 off on the IFB before it comes up (where the
// kernel has IPv6): its own router solicitations and MLD reports would
// cross its class, counted as the class's, and be dropped by ifb_xmit as
// never redirected, read as a refusal (checkIfbDelivers). Called in the
// tree's namespace (/proc/sys/net is the calling thread's).
func silenceIPv6(name string) {
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0)
}

// ErrIfbRefuses: the kernel drops what the ingress program redirects to
// the IFB, so its arrivals cannot be shaped there (they are policed).
var ErrIfbRefuses = errors.New("the IFB drops the redirected arrivals: this kernel's bpf_redirect does not mark a packet redirected, which the IFB requires")

// checkIfbDelivers records ErrIfbRefuses (bgIfbErr) once the IFB has
// dropped at least half of what its class sent since the last read, as
// ifb_xmit drops a packet not marked redirected (its rx_dropped): Linux
// 5.10's bpf_redirect left that mark to tc's mirred action, and every
// shaped arrival was lost there (scripts/kernel-vm.sh,
// TestBackgroundArrivalsIfb). Called with e.mu held, in e's namespace.
func (e *Egress) checkIfbDelivers(sent uint64) error {
	l, err := netlink.LinkByIndex(e.bgIfb.Attrs().Index)
	if err != nil || l.Attrs().Statistics == nil {
		return err
	}
	dropped := l.Attrs().Statistics.RxDropped
	lost, passed := dropped-min(dropped, e.bgIfbDropped), sent-min(sent, e.bgIfbSent)
	e.bgIfbDropped, e.bgIfbSent = dropped, sent
	if lost < ifbRefusedMin || lost*2 < passed {
		return nil
	}
	e.bgIfbErr = ErrIfbRefuses
	slog.Warn("datapath: background non-TCP arrivals policed, not shaped, on this interface", "interface", e.cfg.Interface, "err", e.bgIfbErr)
	return e.bgIfbErr
}

// ifbRefusedMin: the IFB's drops that tell a kernel refusing its redirects.
const ifbRefusedMin = 8

// BgArrivalShapeError says why the interface's background non-TCP
// arrivals are policed, not shaped (nil: they can be shaped).
func (e *Egress) BgArrivalShapeError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bgIfbErr
}

// putBgIfb sets the ingress control value's shaped field: the IFB's
// ifindex and flags (0: the arrivals pass where they came, not shaped).
func (b *BackgroundClass) putBgIfb(ifindex int, ifb uint64) error {
	return b.setCtl(ifindex, Download, func(c *classifier.ClassifierBgCtl) *uint64 { return &c.Shaped }, ifb)
}

// setBgArrivalShape shapes the class's arrivals on ifindex at bytes/s
// through the IFB, or stops (0: not redirected, the class open).
func (b *BackgroundClass) setBgArrivalShape(e *Egress, ifindex int, bytes uint64) error {
	if bytes == 0 { // off first: no packet enters a class being opened
		err := b.putBgIfb(ifindex, 0)
		_, err2 := e.setBgIfbRate(0)
		return errors.Join(err, err2)
	}
	ifb, err := e.setBgIfbRate(bytes)
	if err != nil {
		return err
	}
	shaped := uint64(ifb)
	if !carriesLinkHeader(e.link.Attrs().EncapType) {
		shaped |= bgIfbPushMac
	}
	return b.putBgIfb(ifindex, shaped)
}

// bgIfbPushMac is BG_IFB_PUSH_MAC (bgclass.h) in the ingress entry's
// shaped field: the program pushes a link-layer header before the
// redirect.
const bgIfbPushMac = 1 << 32

// carriesLinkHeader says whether an interface of this link type (netlink's
// name of its ARPHRD) hands arrivals to its ingress hook with a
// link-layer header: all but the types the kernel's dev_is_mac_header_xmit
// names (a TUN and WireGuard, a modem's raw-IP device, IP tunnels, PPP).
// Redirected to the IFB without one, every packet was dropped: a QUIC
// download over the lab's TUN kept 0-8 % of a cellular trace.
func carriesLinkHeader(encap string) bool {
	switch encap {
	case "none", "void", "ipip", "tunnel6", "sit", "gre", "pimreg", "ppp",
		arphrdName(unix.ARPHRD_RAWIP), arphrdName(unix.ARPHRD_IP6GRE):
		return false
	}
	return true
}

// arphrdName is netlink's name of a link type it has no name for.
func arphrdName(t int) string { return fmt.Sprintf("unknown%d", t) }
