// Package rtclient is the realtime lane's client for lanes' own realtime
// threads (the lab's deadline clients): the public client (package rt)
// plus one trick that belongs to a locked SCHED_FIFO goroutine, a yield
// after a reply when it has not yielded for schedtick.Every. Applications
// use package rt.
package rtclient

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/lanes-net/lanes/internal/schedtick"
	"github.com/lanes-net/lanes/rt"
)

// Client is an rt.Client whose datagram sends keep the caller's
// schedtick fresh.
type Client struct {
	*rt.Client
	ticked atomic.Int64 // the last yield (CLOCK_MONOTONIC ns)
}

// Dial connects to the daemon's realtime socket.
func Dial(path string) (*Client, error) {
	c, err := rt.Dial(path)
	if err != nil {
		return nil, err
	}
	return &Client{Client: c}, nil
}

// Send is rt.Client.Send, then a yield if one is due.
func (c *Client) Send(flow uint32, dst netip.AddrPort, deadline int64, payload []byte) (rt.Result, error) {
	return c.yield(c.Client.Send(flow, dst, deadline, payload))
}

// SendOn is rt.Client.SendOn, then a yield if one is due.
func (c *Client) SendOn(s rt.Sock, flow uint32, dst netip.AddrPort, deadline int64, payload []byte) (rt.Result, error) {
	return c.yield(c.Client.SendOn(s, flow, dst, deadline, payload))
}

// SendWithin is rt.Client.SendWithin, then a yield if one is due.
func (c *Client) SendWithin(flow uint32, dst netip.AddrPort, d time.Duration, payload []byte) (rt.Result, error) {
	return c.yield(c.Client.SendWithin(flow, dst, d, payload))
}

// SendRelative is rt.Client.SendRelative, then a yield if one is due.
func (c *Client) SendRelative(flow uint32, dst netip.AddrPort, us uint64, payload []byte) (rt.Result, error) {
	return c.yield(c.Client.SendRelative(flow, dst, us, payload))
}

// yield passes a send's result through, after a yield if the last was
// schedtick.Every or more ago (schedtick: a locked goroutine that only
// blocks in system calls would otherwise have its P taken by sysmon at
// every one of them). Done after the reply, not before the request.
func (c *Client) yield(res rt.Result, err error) (rt.Result, error) {
	c.ticked.Store(schedtick.Fresh(c.ticked.Load()))
	return res, err
}
