// flows.go: flows in lanes: the registrations (Register, Unregister,
// Flows), the lanes of TCP sockets by cookie (SocketInfo) and the UDP
// flows (UDPFlows).
package client

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strconv"

	"github.com/lanes-net/lanes/internal/api"
)

// Flows lists the registered flows (TCP and UDP), the API's and the
// policy's, with their lanes.
func (c *Client) Flows() ([]FlowInfo, error) {
	r, err := c.do(api.Request{Op: api.OpFlows})
	if err != nil {
		return nil, err
	}
	return r.Flows, nil
}

// Register puts a flow in a lane: every packet of the flow's sockets, from
// now on, and the sockets' congestion control where the lane has its own.
func (c *Client) Register(f Flow, l Lane) error {
	_, err := c.do(api.Request{Op: api.OpRegister, Flow: &f, Lane: l})
	return err
}

// Unregister removes a flow registration.
func (c *Client) Unregister(f Flow) error {
	_, err := c.do(api.Request{Op: api.OpUnregister, Flow: &f})
	return err
}

// RegisterConn registers a connected TCP or UDP socket by its 5-tuple,
// read from the connection itself, and returns the flow it registered.
func (c *Client) RegisterConn(conn net.Conn, l Lane) (Flow, error) {
	f, err := FlowOf(conn)
	if err != nil {
		return f, err
	}
	return f, c.Register(f, l)
}

// FlowOf returns the 5-tuple of a connected TCP or UDP socket.
func FlowOf(conn net.Conn) (Flow, error) {
	la, err1 := netip.ParseAddrPort(conn.LocalAddr().String())
	ra, err2 := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err1 != nil || err2 != nil {
		return Flow{}, fmt.Errorf("not an IP connection: %s -> %s", conn.LocalAddr(), conn.RemoteAddr())
	}
	proto := "tcp"
	if _, ok := conn.(*net.UDPConn); ok {
		proto = "udp"
	}
	return Flow{Dst: ra.Addr().Unmap().String(), DPort: ra.Port(), SPort: la.Port(), Proto: proto,
		Src: la.Addr().Unmap().String()}, nil
}

// SocketInfo is the daemon's answer about TCP sockets by cookie.
type SocketInfo struct {
	Lanes map[uint64]Lane   // the sockets the daemon has seen
	Why   map[uint64]string // what decided the lane, where known
	// AppCC: the congestion control a background socket's app asked for
	// and did not get (it keeps LEDBAT++); CCNames: the kernel names of
	// lanes' own congestion controls -> "ledbat" or "capcc".
	AppCC   map[uint64]string
	CCNames map[string]string
}

// SocketLanes returns the lanes of the sockets with these cookies
// (SO_COOKIE, sock_diag's idiag_cookie): those the daemon has seen.
func (c *Client) SocketLanes(cookies []uint64) (map[uint64]Lane, error) {
	si, err := c.SocketInfo(cookies)
	return si.Lanes, err
}

// SocketInfo asks the daemon about TCP sockets by cookie: their lanes, what
// decided them and their congestion control. Long lists take several
// requests.
func (c *Client) SocketInfo(cookies []uint64) (SocketInfo, error) {
	si := SocketInfo{Lanes: make(map[uint64]Lane, len(cookies)), Why: map[uint64]string{},
		AppCC: map[uint64]string{}, CCNames: map[string]string{}}
	for len(cookies) > 0 {
		n := min(len(cookies), api.MaxCookies)
		r, err := c.do(api.Request{Op: api.OpSockLanes, Cookies: cookies[:n]})
		if err != nil {
			return SocketInfo{}, err
		}
		if err := si.add(r); err != nil {
			return SocketInfo{}, err
		}
		cookies = cookies[n:]
	}
	return si, nil
}

// add merges one socket-lanes reply.
func (si *SocketInfo) add(r *api.Response) error {
	for k, l := range r.SocketLanes {
		v, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return fmt.Errorf("socket-lanes reply: bad cookie %q", k)
		}
		si.Lanes[v] = l
	}
	for k, w := range r.SocketWhy {
		if v, err := strconv.ParseUint(k, 10, 64); err == nil {
			si.Why[v] = w
		}
	}
	for k, name := range r.SocketAppCC {
		if v, err := strconv.ParseUint(k, 10, 64); err == nil {
			si.AppCC[v] = name
		}
	}
	maps.Copy(si.CCNames, r.CCNames)
	return nil
}

// MaxUDPPages bounds how many pages of UDP flows UDPFlows asks for.
const MaxUDPPages = 64

// UDPFlows returns the UDP flows (QUIC included) of the daemon's namespace
// with their lanes and why, page after page (at most MaxUDPPages), and how
// many it left out.
func (c *Client) UDPFlows() ([]UDPFlow, int, error) {
	var out []UDPFlow
	more := 0
	for range MaxUDPPages {
		r, err := c.do(api.Request{Op: api.OpUDPFlows, From: len(out)})
		if err != nil {
			return nil, 0, err
		}
		out, more = append(out, r.UDPFlows...), r.UDPMore
		if more == 0 || len(r.UDPFlows) == 0 {
			break
		}
	}
	return out, more, nil
}
