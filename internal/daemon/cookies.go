// cookies.go: the API's per-socket lookups in the host datapath, by
// socket cookie: the lane of each socket (lanes socket-lanes, the
// monitor) and the congestion control an app asked for on a background
// socket. The kernel state's lock is taken per cookieChunk cookies, so a
// long request does not hold root's status behind it.
package daemon

import (
	"github.com/lanes-net/lanes/internal/lane"
)

// cookieChunk is how many cookies of a socket-lanes request are looked up
// under one hold of the kernel state's lock.
const cookieChunk = 128

// appCCs are the apps' congestion controls the host datapath kept apart
// (datapath appcc.go), and the names of lanes' own.
type appCCs interface {
	SocketAppCC(cookie uint64) (string, bool)
	OwnCCs() map[string]string
}

// SocketLanes looks sockets up in the datapath's socket map (sock_ops fills it
// at connect/accept).
func (h *apiHandlers) SocketLanes(cookies []uint64) (map[uint64]lane.Lane, error) {
	out := lookupCookies(h.kernel, cookies, func(h *datapathHost, c uint64) (lane.Lane, bool) { return h.sockets.SocketLane(c) })
	h.addDSCPLanes(cookies, out)
	return out, nil
}

// lookupCookies answers get for each cookie found, taking the kernel
// state's lock per cookieChunk cookies.
func lookupCookies[V any](ks *kernelState, cookies []uint64, get func(*datapathHost, uint64) (V, bool)) map[uint64]V {
	out := map[uint64]V{}
	for len(cookies) > 0 {
		n := min(len(cookies), cookieChunk)
		ks.mu.Lock()
		if ks.host == nil {
			ks.mu.Unlock()
			break
		}
		for _, c := range cookies[:n] {
			if v, ok := get(ks.host, c); ok {
				out[c] = v
			}
		}
		ks.mu.Unlock()
		cookies = cookies[n:]
	}
	return out
}

// SocketAppCCs returns, for the background sockets among cookies whose app
// asked for a congestion control of its own (and kept LEDBAT++), the name it
// asked for; looked up as SocketLanes is.
func (h *apiHandlers) SocketAppCCs(cookies []uint64) map[uint64]string {
	return lookupCookies(h.kernel, cookies, func(h *datapathHost, c uint64) (string, bool) {
		if a := h.roles().appCCs; a != nil {
			return a.SocketAppCC(c)
		}
		return "", false
	})
}

// OwnCCs maps the kernel names of lanes' congestion controls to what they
// are ("ledbat", "capcc").
func (h *apiHandlers) OwnCCs() map[string]string {
	h.kernel.mu.Lock()
	defer h.kernel.mu.Unlock()
	if a := h.kernel.host.roles().appCCs; a != nil {
		return a.OwnCCs()
	}
	return nil
}
