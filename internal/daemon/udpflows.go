// udpflows.go: the namespace's UDP flows (QUIC included) with their lanes
// and why, for `lanes status`, `lanes monitor` and the dashboard: every
// UDP socket sock_diag reports, and the background class's flow table
// (per 5-tuple) joined to them by local address and port. The lane is
// what the classifier picks for the socket's datagrams, walked in its
// order over what the daemon applied: the socket's cookie (a registration
// or a move), its 5-tuple, its destination, its cgroup, its uid.
package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// udpPage is how many flows one udp-flows reply carries (a record is at
// most ~400 bytes); a client asks for the next page from where it is.
const udpPage = 512

// A listing of the UDP flows answers the requests that follow it for up
// to udpReuse when they page on (from > 0), and for udpFresh when they
// start over: a flood of requests costs at most 1/udpFresh dumps a second.
const (
	udpReuse = 2 * time.Second
	udpFresh = 250 * time.Millisecond
)

// udpListing is the daemon's last listing of the UDP flows.
type udpListing struct {
	mu    sync.Mutex
	at    time.Time
	flows []udpflow.Flow
}

// bgTable is what the daemon reads of the background class.
type bgTable interface {
	BackgroundFlows() ([]datapath.BgFlow, error)
	BgClassHeld(ifindex int, d datapath.Direction) bool
}

// udpByteCounts is what the daemon reads of the classifier's UDP byte
// counts, per local port.
type udpByteCounts interface {
	UDPPortBytes() (map[uint16]datapath.UDPBytes, error)
}

// UDPFlows returns the page from index from of the UDP flows of the
// daemon's namespace, with their lanes and why, and how many follow it.
func (h *apiHandlers) UDPFlows(from int) ([]udpflow.Flow, int, error) {
	h.udp.mu.Lock()
	defer h.udp.mu.Unlock()
	age := time.Since(h.udp.at)
	if h.udp.flows == nil || age >= udpReuse || from == 0 && age >= udpFresh {
		flows, err := h.listUDP()
		if err != nil {
			return nil, 0, err
		}
		h.udp.flows, h.udp.at = flows, time.Now()
	}
	all := h.udp.flows
	from = min(from, len(all))
	to := min(from+udpPage, len(all))
	return slices.Clone(all[from:to]), len(all) - to, nil
}

// listUDP lists the UDP flows with their lanes and why.
func (h *apiHandlers) listUDP() ([]udpflow.Flow, error) {
	flows, err := udpflow.Dump()
	if err != nil {
		return nil, err
	}
	udpflow.MarkDaemon(flows)
	var bg []datapath.BgFlow
	var counts map[uint16]datapath.UDPBytes
	held := map[int]bool{}
	h.kernel.mu.Lock()
	if c := h.kernel.host.roles().udpBytes; c != nil {
		counts, _ = c.UDPPortBytes()
	}
	if tab := h.kernel.host.roles().bgTable; tab != nil {
		bg, _ = tab.BackgroundFlows()
		for _, b := range bg {
			held[b.Ifindex] = tab.BgClassHeld(b.Ifindex, datapath.Upload) || tab.BgClassHeld(b.Ifindex, datapath.Download)
		}
	}
	h.kernel.mu.Unlock()
	movers := h.moves.moverInodes()
	for i := 0; i < len(flows); i += cookieChunk { // the lock per chunk, as in SocketLanes
		h.kernel.mu.Lock()
		for j := i; j < min(i+cookieChunk, len(flows)); j++ {
			h.resolveUDPLocked(&flows[j], movers)
		}
		h.kernel.mu.Unlock()
	}
	fillByteCounts(flows, counts, time.Now())
	flows = joinBackground(flows, bg, held)
	if flows == nil {
		flows = []udpflow.Flow{}
	}
	return flows, nil
}

// fillByteCounts gives each socket its local port's byte counts, read at
// now (none where counts is nil: nothing counts them); a port's counts go
// to its first socket only, so that sums over the flows count each byte
// once.
func fillByteCounts(flows []udpflow.Flow, counts map[uint16]datapath.UDPBytes, now time.Time) {
	if counts == nil {
		return
	}
	for i := range flows {
		f := &flows[i]
		src, err := netip.ParseAddrPort(f.Src)
		if err != nil || f.Cookie == 0 {
			continue
		}
		f.CountedAt = now.UnixNano()
		if c, ok := counts[src.Port()]; ok {
			f.Sent, f.Received = c.Sent, c.Received
			delete(counts, src.Port())
		}
	}
}

// joinBackground marks the sockets whose datagrams the class's table
// holds (same local port, and address unless the socket is bound to any)
// with those remotes, and adds the entries no socket claims as per-5-tuple
// records (their socket closed, or lives in another namespace).
func joinBackground(flows []udpflow.Flow, bg []datapath.BgFlow, held map[int]bool) []udpflow.Flow {
	for _, b := range bg {
		if b.Key.Proto != 17 {
			continue
		}
		remote := netip.AddrPortFrom(b.Key.Dst.Unmap(), b.Key.DPort).String()
		claimed := false
		for i := range flows {
			f := &flows[i]
			src, err := netip.ParseAddrPort(f.Src)
			if err != nil || src.Port() != b.Key.SPort || f.Cookie == 0 ||
				!src.Addr().IsUnspecified() && src.Addr().Unmap() != b.Key.Src.Unmap() ||
				f.Connected() && f.Dst != remote {
				continue
			}
			claimed = true
			f.BgClass, f.BgHeld = true, f.BgHeld || held[b.Ifindex]
			if !f.Connected() && !slices.Contains(f.Remotes, remote) {
				f.Remotes = append(f.Remotes, remote)
			}
		}
		if !claimed {
			flows = append(flows, udpflow.Flow{Proto: udpflow.Proto, State: "class table",
				Src: netip.AddrPortFrom(b.Key.Src.Unmap(), b.Key.SPort).String(), Dst: remote,
				Lane: lane.Background, Why: "background class table (no socket of this namespace holds it: closed, or another namespace's)",
				BgClass: true, BgHeld: held[b.Ifindex]})
		}
	}
	return flows
}

// resolveUDPLocked sets one socket's lane and why (kernel.mu held): the
// classifier's order (classifier.c) over what the daemon applied. An
// unconnected socket has no destination: its datagrams' 5-tuple and
// destination rules are decided per datagram, and only its cookie,
// cgroup and uid are looked up here.
func (h *apiHandlers) resolveUDPLocked(f *udpflow.Flow, movers map[uint32]movedSock) {
	src, _ := netip.ParseAddrPort(f.Src)
	dst, _ := netip.ParseAddrPort(f.Dst)
	if h.kernel.host != nil {
		if l, ok := h.kernel.host.sockets.SocketLane(f.Cookie); ok {
			f.Lane, f.Why = l, "socket moved to "+l.String()
			if r, ok := h.regs.holding(f.Cookie); ok {
				f.Why = fmt.Sprintf("registration %s (%s)", r.Flow, r.Source)
				return
			}
			if m, ok := h.moves.socket(f.Cookie); ok {
				f.Why = m.why()
			} else if m, ok := movers[f.Inode]; ok && m.lane == l {
				f.Why = m.why() // opened after its process was moved
			}
			return
		}
	}
	if f.Connected() {
		k := datapath.FlowKey{Src: src.Addr().Unmap(), Dst: dst.Addr().Unmap(), DPort: dst.Port(), SPort: src.Port(), Proto: 17}
		for _, k := range k.Lookups() {
			if e, ok := h.kernel.applied.Flows[k]; ok {
				f.Lane, f.Why = e.Lane, "flow "+e.Source
				return
			}
		}
		if r, e, ok := bestDst(h.kernel.applied.Dsts, dst.Addr().Unmap(), dst.Port()); ok {
			f.Lane, f.Why = e.Lane, fmt.Sprintf("destination %s %s", r, e.Source)
			return
		}
	}
	if e, ok := h.kernel.applied.Cgroups[f.Cgroup]; ok {
		f.Lane, f.Why = e.Lane, "cgroup "+e.Source
		if m, ok := movers[f.Inode]; ok && m.lane == e.Lane {
			f.Why = m.why() // opened after its process was moved, in the lane's cgroup
		}
		return
	}
	if e, ok := h.kernel.applied.UIDs[f.UID]; ok {
		f.Lane, f.Why = e.Lane, fmt.Sprintf("uid %d %s", f.UID, e.Source)
		return
	}
	if why, l, ok := h.dscpLaneLocked(f.DSCP); ok {
		f.Lane, f.Why = l, why
		return
	}
	f.Lane, f.Why = lane.Interactive, "no rule: interactive"
	if !f.Connected() && (len(h.kernel.applied.Flows) > 0 || len(h.kernel.applied.Dsts) > 0) {
		f.Why = "no socket rule: interactive, unless a flow or destination rule matches a datagram's remote"
	}
}
