// gate.go: the host-side gate that turns the emulated device queue into
// real back-pressure on the host's qdisc.
//
// Linux 6.18's TUN driver drops a packet when its ring is full instead of
// stopping the queue (measured; see docs/lab.md), so a slow emulator cannot
// make the host's qdisc back up. The gate is an HTB root with one class of
// rate R (the link's rate) and burst = cburst = Q (the device-queue size):
//
//	qdisc htb 1: default 1 -> class 1:1 rate R burst Q -> leaf 10: (pfifo 1000 | pfifo_fast)
//
// A token bucket of depth Q filled at R admits a packet exactly when a
// device queue of Q bytes drained at R would have room for it (occupancy =
// Q - tokens while the link is busy), so the packets beyond Q wait in the
// leaf qdisc, in the host, as on a phone whose driver stops its queue.
// For a trace-driven link SetRate follows the trace in steps; the emulator's
// own queue absorbs the residual.
package topo

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Gate is an installed host-side gate.
type Gate struct {
	node  *Node
	dev   string
	burst int
	mu    sync.Mutex
	h     *netlink.Handle
	link  netlink.Link
	rate  float64

	Changes, Errors int    // rate changes made and refused
	LastErr         string // the last refusal
}

// InstallGate installs the gate on dev with a leaf qdisc: "pfifo" (limit
// packets, like a txqueuelen of that size) or "pfifo_fast" (bands chosen by
// the socket's SO_PRIORITY).
func (n *Node) InstallGate(dev string, rate float64, burst int, leaf string, limit int) (*Gate, error) {
	r := strconv.FormatUint(uint64(rate), 10)
	b := strconv.Itoa(burst) + "b"
	if _, err := n.Run("tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"); err != nil {
		return nil, err
	}
	if _, err := n.Run("tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
		"rate", r+"bit", "ceil", r+"bit", "burst", b, "cburst", b, "quantum", "1514"); err != nil {
		return nil, err
	}
	args := []string{"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:"}
	switch leaf {
	case "pfifo", "":
		args = append(args, "pfifo", "limit", strconv.Itoa(limit))
	case "pfifo_fast":
		args = append(args, "pfifo_fast")
	default:
		return nil, fmt.Errorf("unknown gate leaf %q", leaf)
	}
	if _, err := n.Run("tc", args...); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(n.Handle, unix.NETLINK_ROUTE) // rtnetlink only: xfrm and nfnetlink may be modules not loaded
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", n.Name, err)
	}
	l, err := h.LinkByName(dev)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Gate{node: n, dev: dev, burst: burst, h: h, link: l, rate: rate}, nil
}

// AdoptGate drives an HTB root class 1:1 someone else installed (the lanes
// daemon's tree) as a gate with the given burst.
func (n *Node) AdoptGate(dev string, burst int) (*Gate, error) {
	h, err := netlink.NewHandleAt(n.Handle, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", n.Name, err)
	}
	l, err := h.LinkByName(dev)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Gate{node: n, dev: dev, burst: burst, h: h, link: l}, nil
}

// SetRate changes the gate's rate (bits/s) without touching queued packets.
func (g *Gate) SetRate(rate float64) error {
	if rate < 8000 {
		rate = 8000
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if rate == g.rate {
		return nil
	}
	c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: g.link.Attrs().Index,
		Parent: netlink.MakeHandle(1, 0), Handle: netlink.MakeHandle(1, 1)},
		netlink.HtbClassAttrs{Rate: uint64(rate), Ceil: uint64(rate), Buffer: uint32(g.burst), Cbuffer: uint32(g.burst), Quantum: 1514})
	if err := g.h.ClassChange(c); err != nil {
		g.Errors++
		g.LastErr = err.Error()
		return fmt.Errorf("gate rate on %s: %w", g.node.Name, err)
	}
	g.Changes++
	g.rate = rate
	return nil
}

// Stats returns how many rate changes were made and refused.
func (g *Gate) Stats() (changes, errors int, last string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.Changes, g.Errors, g.LastErr
}

// Close releases the netlink handle (the qdisc goes with the namespace).
func (g *Gate) Close() { g.h.Close() }
