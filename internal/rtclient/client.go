// Package rtclient is the realtime lane's client for lanes' own realtime
// threads (the lab's deadline clients): the public client (package rt)
// plus one trick that belongs to a locked SCHED_FIFO goroutine, a yield
// after a reply when the goroutine has not yielded for schedtick.Every.
// Applications use package rt.
package rtclient

import (
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/lanes-net/lanes/internal/schedtick"
	"github.com/lanes-net/lanes/rt"
)

// Client is an rt.Client whose datagram sends keep the caller's
// schedtick fresh (tickStale).
type Client struct {
	*rt.Client
	ticked atomic.Int64 // the last yield (rt.Monotonic ns)
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

// yield passes a send's result through, yielding first if tickStale.
func (c *Client) yield(res rt.Result, err error) (rt.Result, error) {
	if c.tickStale() {
		runtime.Gosched() // after the reply, off the path
	}
	return res, err
}

// tickStale reports whether the calling goroutine should yield after a
// reply, the last yield being schedtick.Every or more ago, and if so counts
// the yield as done now. A realtime client is typically a locked goroutine
// that only ever blocks in system calls (its sleep, Send), so its P's
// schedtick never moves, and once it has not moved for 10 ms Go's sysmon
// takes the P at each pass that finds the goroutine in a system call,
// sleeps deeply, and is woken again by the client's next return from one;
// it then runs at normal priority on another CPU, often the one where the
// daemon's reader is to be woken by the client's next request, which then
// needs a reschedule IPI instead of finding an idle CPU (measured in
// docs/results/realtime.md). A yield moves the tick; on a locked
// goroutine it is a hand-off through another thread, done here after the
// reply, not before the request.
func (c *Client) tickStale() bool {
	now := rt.Monotonic()
	last := c.ticked.Load()
	return now-last >= int64(schedtick.Every) && c.ticked.CompareAndSwap(last, now)
}
