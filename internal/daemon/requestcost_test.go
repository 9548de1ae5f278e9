// requestcost_test.go: what each request kind an unprivileged caller or
// an access-group member can send in a loop costs the daemon, beside a
// process holding 19,000 UDP sockets (the table in docs/api.md).
package daemon_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/lane"
)

// costKind is one request kind, sent in a loop by one caller's
// connection: do sends one (or, for events, polls until ctx ends).
type costKind struct {
	name string
	do   func(ctx context.Context, c *client.Client, n int) error
}

// TestRequestCostPerCallerClass (audit N15, the udp-flows listing): nobody
// looping udp-flows beside 19,000 UDP sockets held the daemon at
// 31.5-37.8 % of a core. Fix: requests are charged by the time their
// handling took (internal/apiserver/pace.go). The test loops each kind
// on 4 connections for 5 s, as nobody and as an access-group member (a
// uid of its own per kind, so that one kind's debt does not pace the
// next), and logs the daemon's CPU time over the last 4 s as a share of
// a core (robust on a loaded machine) and root's slowest status. It
// fails if a kind's requests fail.
func TestRequestCostPerCallerClass(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newAttackBed(t, "access:\n  group: users\n")
	pid, _ := startSocketHolder(t, b, 19000)
	cookies := make([]uint64, api.MaxCookies)
	for i := range cookies {
		cookies[i] = uint64(i + 1)
	}
	flow := func(n int) api.Flow {
		return api.Flow{Dst: b.p.AddrB.String(), DPort: 9, SPort: uint16(20000 + n%20000), Proto: "udp"}
	}
	var memberMover *client.Client // the member's moves go to interactive and back
	kinds := []costKind{
		{"status", func(_ context.Context, c *client.Client, _ int) error { _, err := c.Status(); return err }},
		{"flows", func(_ context.Context, c *client.Client, _ int) error { _, err := c.Flows(); return err }},
		{"socket-lanes (2,048 cookies)", func(_ context.Context, c *client.Client, _ int) error {
			_, err := c.SocketInfo(cookies)
			return err
		}},
		{"udp-flows (every page)", func(_ context.Context, c *client.Client, _ int) error { _, _, err := c.UDPFlows(); return err }},
		{"register/unregister", func(_ context.Context, c *client.Client, n int) error {
			c.Register(flow(n), lane.Interactive) // a refusal costs the daemon as well
			c.Unregister(flow(n))
			return nil
		}},
		{"register/unregister, background", func(_ context.Context, c *client.Client, n int) error {
			c.Register(flow(n), lane.Background) // nobody's: its owners are looked up
			c.Unregister(flow(n))
			return nil
		}},
		{"move (19,000 sockets)", func(_ context.Context, c *client.Client, n int) error {
			_, err := c.Move(pid, lane.Background, true) // a member's: every socket taken is written
			if err == nil && c == memberMover {
				_, err = c.Move(pid, lane.Interactive, true)
			}
			return err
		}},
		{"events (100 ms)", func(ctx context.Context, c *client.Client, _ int) error {
			for range c.Events(ctx, 100*time.Millisecond) {
			}
			return nil
		}},
	}
	type class struct {
		name   string
		uid    func(k int) uint32
		groups []uint32
	}
	classes := []class{
		{"unprivileged", func(k int) uint32 { return 62000 + uint32(k) }, nil},
		{"access-group member", func(k int) uint32 { return 61000 + uint32(k) }, []uint32{100}},
	}
	for _, cl := range classes {
		for k, kind := range kinds {
			uid := cl.uid(k)
			if kind.name == "move (19,000 sockets)" && cl.groups == nil {
				uid = nobody // an unprivileged user moves its own process
			}
			var clients []*client.Client
			for range 4 {
				clients = append(clients, b.client(t, uid, cl.groups))
			}
			if cl.groups != nil {
				memberMover = clients[0]
			}
			requestLoopCost(t, b, cl.name, kind, clients)
		}
	}
}

// requestLoopCost runs kind's loop on each of clients (one caller's
// connections) for 5 s and logs the daemon's CPU share over its last 4 s
// and root's slowest status.
func requestLoopCost(t *testing.T, b *attackBed, class string, kind costKind, clients []*client.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var requests atomic.Int64
	var failed atomic.Value
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				if err := kind.do(ctx, c, n); err != nil && ctx.Err() == nil {
					failed.Store(err)
					return
				}
				requests.Add(1)
			}
		}()
	}
	time.Sleep(time.Second) // past the burst
	cpu0, n0, t0 := procCPU(t, b.d.cmd.Process.Pid), requests.Load(), time.Now()
	var statusWorst time.Duration
	for time.Since(t0) < 4*time.Second {
		s0 := time.Now()
		status(t, b.sock)
		statusWorst = max(statusWorst, time.Since(s0))
		time.Sleep(100 * time.Millisecond)
	}
	elapsed, cpu, n := time.Since(t0), procCPU(t, b.d.cmd.Process.Pid)-cpu0, requests.Load()-n0
	cancel()
	wg.Wait()
	t.Logf("| %s | %s | %.1f/s | %.1f %% | %v |", class, kind.name, float64(n)/elapsed.Seconds(),
		100*cpu.Seconds()/elapsed.Seconds(), statusWorst.Round(time.Millisecond))
	if err, ok := failed.Load().(error); ok {
		t.Errorf("%s's %s: %v", class, kind.name, err)
	}
}
