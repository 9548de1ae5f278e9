// Package client is the Go client of the lanes daemon's control API: read
// the daemon's status and flows, put flows and processes in a lane, run a
// command in a lane, follow what changes.
//
// A Client talks to the daemon over its unix socket (DefaultSocket unless
// told otherwise), one request at a time on one connection. The zero
// Client is ready to use: it dials on the first request and, after a
// transport error (the daemon restarted), on the next one, so a
// long-running program follows a daemon that comes and goes.
//
// What a caller may do is decided by the daemon from the credentials the
// kernel gives it (docs/policy.md, "Who may move what"): anyone may put
// their own flows and processes in background; other lanes need root or
// the policy's access group.
//
// The types of the replies are the daemon's wire types, named here; the
// wire protocol itself (docs/api.md) is not part of this package's API.
package client

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/api"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = api.DefaultSocket

// Client is a connection to the daemon. Safe for concurrent use; requests
// are serialized on the one connection.
type Client struct {
	// Socket is the daemon's unix socket; DefaultSocket if empty.
	Socket string

	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
}

// ErrNoDaemon wraps a failure to reach the daemon's socket; its words are
// the realtime clients' (include/lanes_rt.h LANES_RT_MSG_NO_DAEMON).
var ErrNoDaemon = errors.New("the daemon is not running: start it (systemctl start lanes)")

// DaemonError is an error the daemon answered (the connection is fine), as
// opposed to a transport error.
type DaemonError struct{ Msg string }

func (e *DaemonError) Error() string { return "daemon: " + e.Msg }

// New returns a client of the daemon at socket (DefaultSocket if empty)
// that dials on its first request.
func New(socket string) *Client { return &Client{Socket: socket} }

// Dial connects to the daemon at socket (DefaultSocket if empty) now, so
// that a missing daemon is an error at once.
func Dial(socket string) (*Client, error) {
	c := New(socket)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.dialLocked(); err != nil {
		return nil, err
	}
	return c, nil
}

// dial opens a connection to the daemon's socket; ErrNoDaemon where none
// answers.
func (c *Client) dial() (net.Conn, error) {
	path := c.Socket
	if path == "" {
		path = DefaultSocket
	}
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w; no answer at %s: %v", ErrNoDaemon, path, err)
	}
	return conn, nil
}

func (c *Client) dialLocked() error {
	if c.conn != nil {
		return nil
	}
	conn, err := c.dial()
	if err != nil {
		return err
	}
	c.conn, c.r = conn, bufio.NewReaderSize(conn, 64<<10)
	return nil
}

// Close closes the connection; a later request dials again.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked()
}

func (c *Client) closeLocked() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn, c.r = nil, nil
	return err
}

// do sends one request and waits for its reply; a reply with an error
// becomes a *DaemonError. A transport error closes the connection, so the
// next request dials again.
func (c *Client) do(req api.Request) (*api.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.dialLocked(); err != nil {
		return nil, err
	}
	resp, err := c.roundTrip(req)
	var de *DaemonError
	if err != nil && !errors.As(err, &de) {
		_ = c.closeLocked()
	}
	return resp, err
}

func (c *Client) roundTrip(req api.Request) (*api.Response, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, werr := c.conn.Write(append(b, '\n')); werr != nil {
		// The daemon may have closed the connection with a last word
		// (too many connections): show it rather than the broken pipe.
		if resp, err := c.readReply(); resp != nil && err != nil {
			return resp, err
		}
		return nil, fmt.Errorf("api send: %w", werr)
	}
	return c.readReply()
}

func (c *Client) readReply() (*api.Response, error) {
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("api reply: %w", err)
	}
	var resp api.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("api reply: %w", err)
	}
	if !resp.OK {
		return &resp, &DaemonError{Msg: resp.Error}
	}
	return &resp, nil
}

// Ping checks that the daemon answers.
func (c *Client) Ping() error { _, err := c.do(api.Request{Op: api.OpPing}); return err }

// Status returns the daemon's state: its namespace, policy, interfaces with
// their lanes' counters, registered flows and components.
func (c *Client) Status() (*Status, error) {
	r, err := c.do(api.Request{Op: api.OpStatus})
	if err != nil {
		return nil, err
	}
	return r.Status, nil
}

// CheckSameNetns refuses a daemon that manages another network namespace
// than the caller's: its lanes, cgroups and flows would not be the caller's.
func CheckSameNetns(st *Status) error { return api.CheckSameNetns(st) }

// Component returns the status document of a running daemon component
// ("coop", "realtime"), or an *OffError for one the policy leaves off.
func (c *Client) Component(name string) (json.RawMessage, error) {
	r, err := c.do(api.Request{Op: api.OpComponent, Name: name})
	if err != nil {
		return nil, err
	}
	if r.Off != "" {
		return nil, &OffError{Name: name, Why: r.Off}
	}
	return r.Component, nil
}

// LaneCgroup returns the cgroup v2 directory of a lane.
func (c *Client) LaneCgroup(l Lane) (string, error) {
	r, err := c.do(api.Request{Op: api.OpLaneCgroup, Lane: l})
	if err != nil {
		return "", err
	}
	return r.Cgroup, nil
}
