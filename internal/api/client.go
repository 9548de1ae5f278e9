// client.go: the Go client of the daemon's API, used by the CLI and by
// applications that register their own flows (the paper's background task
// registering its upload connection).
package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/udpflow"
)

// Client is a connection to the daemon. Safe for concurrent use; requests are
// serialized on the one connection.
type Client struct {
	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

// ErrNoDaemon wraps a failure to reach the daemon's socket.
var ErrNoDaemon = errors.New("lanes daemon not reachable")

// Dial connects to the daemon at path (DefaultSocket if empty).
func Dial(path string) (*Client, error) {
	if path == "" {
		path = DefaultSocket
	}
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w at %s (is `lanes daemon` running?): %v", ErrNoDaemon, path, err)
	}
	return &Client{conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Do sends one request and waits for its reply; a reply with an error
// becomes a Go error.
func (c *Client) Do(req Request) (*Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, werr := c.conn.Write(append(b, '\n')); werr != nil {
		// The daemon may have closed the connection with a last word
		// (too many connections): show it rather than the broken pipe.
		if line, err := c.r.ReadBytes('\n'); err == nil {
			var resp Response
			if json.Unmarshal(line, &resp) == nil && !resp.OK && resp.Error != "" {
				return &resp, &DaemonError{Msg: resp.Error}
			}
		}
		return nil, fmt.Errorf("api send: %w", werr)
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("api reply: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("api reply: %w", err)
	}
	if !resp.OK {
		return &resp, &DaemonError{Msg: resp.Error}
	}
	return &resp, nil
}

// DaemonError is an error the daemon answered (the connection is fine),
// as opposed to a transport error.
type DaemonError struct{ Msg string }

func (e *DaemonError) Error() string { return "daemon: " + e.Msg }

// Ping checks that the daemon answers.
func (c *Client) Ping() error { _, err := c.Do(Request{Op: OpPing}); return err }

// Status returns the daemon's state.
func (c *Client) Status() (*Status, error) {
	r, err := c.Do(Request{Op: OpStatus})
	if err != nil {
		return nil, err
	}
	return r.Status, nil
}

// Flows lists the registered flows.
func (c *Client) Flows() ([]FlowInfo, error) {
	r, err := c.Do(Request{Op: OpFlows})
	if err != nil {
		return nil, err
	}
	return r.Flows, nil
}

// Register puts a flow in a lane.
func (c *Client) Register(f Flow, l lane.Lane) error {
	_, err := c.Do(Request{Op: OpRegister, Flow: &f, Lane: l})
	return err
}

// Unregister removes a flow registration.
func (c *Client) Unregister(f Flow) error {
	_, err := c.Do(Request{Op: OpUnregister, Flow: &f})
	return err
}

// MoveProcess puts a running process in a lane with its open sockets and,
// unless keepSched, the lane's CPU scheduling; it says what moved.
func (c *Client) MoveProcess(pid int, l lane.Lane, keepSched bool) (Moved, error) {
	r, err := c.Do(Request{Op: OpMovePID, PID: pid, Lane: l, KeepSched: keepSched})
	if err != nil || r.Moved == nil {
		return Moved{}, err
	}
	return *r.Moved, nil
}

// MovePID puts a process (and the children it starts later) in a lane with
// its open sockets, its CPU scheduling as it is (lanes run sets its own).
func (c *Client) MovePID(pid int, l lane.Lane) error {
	_, err := c.Do(Request{Op: OpMovePID, PID: pid, Lane: l, KeepSched: true})
	return err
}

// LaneCgroup returns the cgroup v2 directory of a lane.
func (c *Client) LaneCgroup(l lane.Lane) (string, error) {
	r, err := c.Do(Request{Op: OpLaneCgroup, Lane: l})
	if err != nil {
		return "", err
	}
	return r.Cgroup, nil
}

// RegisterConn registers a connected TCP or UDP socket by its 5-tuple, read
// from the connection itself (the paper's getsockname after connect).
func (c *Client) RegisterConn(conn net.Conn, l lane.Lane) (Flow, error) {
	f, err := FlowOf(conn)
	if err != nil {
		return f, err
	}
	return f, c.Register(f, l)
}

// FlowOf returns the 5-tuple of a connected socket.
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
	return Flow{Dst: ra.Addr().Unmap().String(), DPort: ra.Port(), SPort: la.Port(), Proto: proto, Src: la.Addr().Unmap().String()}, nil
}

// SocketLanes returns the lanes of the sockets with these cookies (those the
// daemon has seen); it splits long lists into several requests.
func (c *Client) SocketLanes(cookies []uint64) (map[uint64]lane.Lane, error) {
	out, _, err := c.SocketLanesWhy(cookies)
	return out, err
}

// SocketLanesWhy is SocketLanes with, per socket, what decided its lane
// (where the daemon knows it).
func (c *Client) SocketLanesWhy(cookies []uint64) (map[uint64]lane.Lane, map[uint64]string, error) {
	si, err := c.SocketInfo(cookies)
	return si.Lanes, si.Why, err
}

// SocketInfo is the daemon's answer about sockets by cookie.
type SocketInfo struct {
	Lanes map[uint64]lane.Lane // the sockets the daemon has seen
	Why   map[uint64]string    // what decided the lane, where known
	// AppCC: the congestion control a background socket's app asked for
	// and did not get (it keeps LEDBAT++); CCNames: the kernel names of
	// lanes' own congestion controls -> "ledbat" or "capcc".
	AppCC   map[uint64]string
	CCNames map[string]string
}

// SocketInfo asks the daemon about sockets by cookie (socket-lanes, split
// into several requests when long).
func (c *Client) SocketInfo(cookies []uint64) (SocketInfo, error) {
	si := SocketInfo{Lanes: make(map[uint64]lane.Lane, len(cookies)), Why: map[uint64]string{},
		AppCC: map[uint64]string{}, CCNames: map[string]string{}}
	for len(cookies) > 0 {
		n := min(len(cookies), MaxCookies)
		r, err := c.Do(Request{Op: OpSockLanes, Cookies: cookies[:n]})
		if err != nil {
			return SocketInfo{}, err
		}
		for k, l := range r.SocketLanes {
			v, err := strconv.ParseUint(k, 10, 64)
			if err != nil {
				return SocketInfo{}, fmt.Errorf("socket-lanes reply: bad cookie %q", k)
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
		cookies = cookies[n:]
	}
	return si, nil
}

// MaxUDPPages bounds how many pages of UDP flows UDPFlows asks for.
const MaxUDPPages = 64

// UDPFlows returns the daemon's UDP flows with their lanes and why, page
// after page (at most MaxUDPPages), and how many it left out.
func (c *Client) UDPFlows() ([]udpflow.Flow, int, error) {
	var out []udpflow.Flow
	more := 0
	for range MaxUDPPages {
		r, err := c.Do(Request{Op: OpUDPFlows, From: len(out)})
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

// Component returns the status document of a running daemon component
// ("coop": internal/coop's Status; "realtime": the realtime lane's stats),
// or an *OffError for one the policy leaves off.
func (c *Client) Component(name string) (json.RawMessage, error) {
	r, err := c.Do(Request{Op: OpComponent, Name: name})
	if err != nil {
		return nil, err
	}
	if r.Off != "" {
		return nil, &OffError{Name: name, Why: r.Off}
	}
	return r.Component, nil
}
