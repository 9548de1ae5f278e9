// rwndcap.go: the cooperative controller's downlink caps — per-socket
// limits of the window a receiving socket advertises, which sock_ops applies
// as TCP_WINDOW_CLAMP (internal/bpf/sockops/rwndcap.h; for background
// sockets rLEDBAT applies the smaller of its window and the cap).
package datapath

import "fmt"

// SetDownlinkCaps turns the per-segment callback that applies downlink caps
// on or off: while on, sockets established (and live ones at their next RTT
// sample) ask sock_ops to look at their cap before each segment they send.
// Off, no socket pays for the callback; caps already set stay as they are
// until removed. Turning it on fails where sock_ops cannot set
// TCP_WINDOW_CLAMP (before 5.11), naming that: the kernel would refuse
// every cap (rwnd_err) while the caller believed them applied.
func (c *Caps) SetDownlinkCaps(on bool) error {
	var v uint32
	if on {
		v = 1
		if err := haveWindowClamp(); err != nil {
			return fmt.Errorf("downlink caps: %w", err)
		}
	}
	return c.guard.use(func() error {
		if c.ops == nil {
			return errNoSockops
		}
		if err := c.ops.LanesRwndOn.Put(uint32(0), v); err != nil {
			return fmt.Errorf("downlink caps on=%v: %w", on, err)
		}
		return nil
	})
}

// SetSocketRwndCap caps the window one socket advertises (bytes); 0
// removes the cap, and the socket's own window clamp comes back. A smaller
// cap takes effect as the application reads (the kernel never retracts a
// window it offered).
func (c *Caps) SetSocketRwndCap(cookie uint64, bytes uint32) error {
	return c.guard.use(func() error {
		if c.ops == nil {
			return errNoSockops
		}
		if bytes == 0 {
			return ignoreNotExist(c.ops.LanesSockRwnd.Delete(cookie), "remove socket downlink cap")
		}
		var seen uint8
		if c.ops.LanesSockSeen.Lookup(cookie, &seen) != nil {
			return fmt.Errorf("downlink cap of socket %d: %w", cookie, ErrSocketUnmanaged)
		}
		if err := c.ops.LanesSockRwnd.Put(cookie, bytes); err != nil {
			return fmt.Errorf("downlink cap of socket %d: %w", cookie, err)
		}
		return nil
	})
}

// SocketRwndCap is the cooperative controller's downlink cap of one socket
// (bytes, 0 = none): rLEDBAT applies the smaller of its window and the cap.
func (c *Caps) SocketRwndCap(cookie uint64) uint32 {
	var v uint32
	if c.guard.use(func() error {
		if c.ops == nil {
			return errNoSockops
		}
		return c.ops.LanesSockRwnd.Lookup(cookie, &v)
	}) != nil {
		return 0
	}
	return v
}
