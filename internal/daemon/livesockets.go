// livesockets.go: registrations that reach sockets already connected. The
// LW-LBE API registers a flow's 3-tuple after connect() (the source port is
// known only then), when sock_ops has already resolved the socket's lane. The
// classifier would still steer the packets by 3-tuple, but everything keyed
// by socket cookie — the classifier's first lookup, the lane caps and
// TCP_NOTSENT_LOWAT applied by sock_ops on the next RTT sample, the coop
// controller's and the monitor's view of the lane — would not see it. So a
// TCP registration also sets the lane of the live sockets with that 3-tuple,
// found with sock_diag, and unregistering restores what they had.
package daemon

import (
	"net/netip"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// socketLanes is the host datapath's socket map: the lane of a socket by
// cookie (also livemove.go, explain.go, udpflows.go, cookies.go).
type socketLanes interface {
	SocketLane(cookie uint64) (lane.Lane, bool)
	SetSocketLane(cookie uint64, l lane.Lane) error
	// RestoreSocketLane changes only a socket that still has an entry.
	RestoreSocketLane(cookie uint64, l lane.Lane) error
	ClearSocketLane(cookie uint64) error
}

// liveSocket is a connected socket a registration moved, and the lane its
// cookie had before (Unset: none).
type liveSocket struct {
	cookie uint64
	prev   lane.Lane
}

// liveSocketsOf returns the cookies of the connected TCP sockets of a flow
// in the daemon's network namespace (of its local address, if it names
// one); uid >= 0 keeps only that uid's sockets.
func liveSocketsOf(f api.Flow, uid int64) ([]uint64, error) {
	if f.Proto != "" && f.Proto != "tcp" {
		return nil, nil
	}
	dst, err := netip.ParseAddr(f.Dst)
	if err != nil {
		return nil, err
	}
	dst = dst.Unmap()
	filter := tcpmon.Filter{Remote: netip.PrefixFrom(dst, dst.BitLen()), RemotePort: f.DPort, LocalPort: f.SPort}
	if src, err := netip.ParseAddr(f.Src); err == nil {
		src = src.Unmap()
		filter.Local = netip.PrefixFrom(src, src.BitLen())
	}
	// sock_diag: one filtered dump; the BPF iterator would load a program per registration.
	s, err := tcpmon.New(tcpmon.Config{NoProcess: true, Filter: filter, Backend: tcpmon.BackendDiag})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	flows, err := s.Sample()
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, fl := range flows {
		if fl.Cookie != 0 && (uid < 0 || int64(fl.UID) == uid) {
			out = append(out, fl.Cookie)
		}
	}
	return out, nil
}

// moveLiveSocketsLocked puts the flow's connected sockets in lane l and
// remembers what they had (kernel.mu held). An unprivileged caller's
// registration moves only the caller's own sockets.
func (h *apiHandlers) moveLiveSocketsLocked(c apiserver.Cred, f api.Flow, l lane.Lane) {
	uid := int64(-1)
	if !c.Privileged {
		uid = int64(c.UID)
	}
	cookies, err := h.env.liveSockets(f, uid)
	if err != nil {
		h.log.Warn("registered flow: live sockets not found; its packets are steered by 3-tuple only", "flow", f.String(), "err", err)
		return
	}
	if h.kernel.host == nil {
		return
	}
	moved := h.regs.moved(f)
	for _, c := range cookies {
		if findLive(moved, c) == nil { // registered twice: keep the first "before"
			prev := lane.Unset
			if p, ok := h.kernel.host.sockets.SocketLane(c); ok {
				prev = p
			}
			moved = append(moved, liveSocket{cookie: c, prev: prev})
		}
		if err := h.kernel.host.sockets.SetSocketLane(c, l); err != nil {
			h.log.Warn("registered flow: socket lane", "flow", f.String(), "cookie", c, "err", err)
		}
	}
	if len(moved) > 0 {
		h.regs.setMoved(f, moved)
	}
}

// restoreLiveSocketsLocked gives the sockets registration f moved back the
// lane they had before it was registered, with that lane's congestion control at
// once where the datapath can (kernel.mu held): `lanes unregister` left a
// socket registered background on LEDBAT++.
func (ks *kernelState) restoreLiveSocketsLocked(f api.Flow, moved []liveSocket) {
	if ks.host == nil {
		return
	}
	back := map[uint64]lane.Lane{}
	defer func() {
		if a := ks.host.roles().liveCC; a != nil && len(back) > 0 {
			if _, err := a.ApplyLive(back); err != nil {
				ks.log.Warn("unregistered flow: congestion control left to its next ACK", "flow", f.String(), "err", err)
			}
		}
	}()
	for _, s := range moved {
		back[s.cookie] = s.prev
		var err error
		if s.prev == lane.Unset {
			err = ks.host.sockets.ClearSocketLane(s.cookie)
		} else { // only while it is open: a closed socket's entry stays gone
			err = ks.host.sockets.RestoreSocketLane(s.cookie, s.prev)
		}
		if err != nil {
			ks.log.Debug("unregistered flow: socket lane", "flow", f.String(), "cookie", s.cookie, "err", err)
		}
	}
}

func findLive(ls []liveSocket, cookie uint64) *liveSocket {
	for i := range ls {
		if ls[i].cookie == cookie {
			return &ls[i]
		}
	}
	return nil
}
