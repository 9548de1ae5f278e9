// rtd_pace_test.go: request floods against the realtime socket (N7): a
// granted client's paced by lanes-rtd, and the STATS of clients other
// than root answered from counters lanes-rtd is asked for rarely.
package rtlane

import (
	"net/netip"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/procstat"
	"github.com/lanes-net/lanes/internal/rtlane/wire"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestRtdRequestFloodPaced (audit N7): a granted client with 16 connections
// looping 1-byte SENDs got 72,000 requests/s served: lanes-rtd at 94 % of a
// CPU at SCHED_FIFO and root's reply p99 at 30.8 ms. Fix (pace.c): the
// requests of a uid not root are paced, client_requests per second (2,000; a
// connection half), a connection out of tokens not read until it has one.
// Judged: what lanes-rtd served of the flood stays within the rate. The
// figures (lanes-rtd's CPU share, root's reply p50/p99 under the flood) are
// printed.
func TestRtdRequestFloodPaced(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, grantNobody)
	pid := b.lane.rtd.cmd.Process.Pid
	dst := netip.MustParseAddrPort(b.rx.Addr.String())
	var conns []*rawClient
	for range 16 {
		c, err := dialAs(t, b.cfg.Socket, testutil.Nobody)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	root, err := dialAs(t, b.cfg.Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	rootSends := func(d time.Duration) (p50, p99 time.Duration) {
		var lat []time.Duration
		for seq, t1 := uint32(1), time.Now(); time.Since(t1) < d; seq++ {
			t0 := time.Now()
			rep, err := root.do(&wire.Request{Type: wire.TypeSend, Flags: wire.FlagRelative, Flow: 99, Seq: seq,
				Deadline: 10_000, Dst: dst, Payload: []byte("root")})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Seq == seq {
				lat = append(lat, time.Since(t0))
			}
			time.Sleep(time.Millisecond)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[len(lat)/2], lat[len(lat)*99/100]
	}
	idle50, idle99 := rootSends(time.Second)
	const dur = 4 * time.Second
	stop := make(chan struct{})
	done := make(chan struct{}, len(conns))
	st0, wall0 := procStat(t, pid), time.Now()
	for i, c := range conns {
		go func() {
			defer func() { done <- struct{}{} }()
			req := wire.AppendRequest(nil, &wire.Request{Type: wire.TypeSend, Flags: wire.FlagRelative, Flow: uint32(i),
				Seq: 1, Deadline: 10_000, Dst: dst, Payload: []byte("x")})
			buf := make([]byte, 256)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if unix.Sendmsg(c.fd, req, nil, nil, unix.MSG_NOSIGNAL) != nil {
					return
				}
				if _, _, err := unix.Recvfrom(c.fd, buf, 0); err != nil {
					return
				}
			}
		}()
	}
	p50, p99 := rootSends(dur)
	st1, wall := procStat(t, pid), time.Since(wall0)
	cpu, sys := st1.CPU()-st0.CPU(), time.Duration(st1.STime-st0.STime)*time.Second/procstat.UserHZ
	close(stop)
	for range conns {
		<-done
	}
	var served uint64
	for _, f := range b.lane.Stats().Flows {
		if f.UID == testutil.Nobody {
			served += f.Admitted + f.Rejected
		}
	}
	share := float64(cpu) / float64(wall)
	t.Logf("16 connections of one client for %v: %d requests served (%.0f/s, paced at %d/s); lanes-rtd %.1f %% of a CPU (%.1f %% in the kernel: the sends and, on this veth, the receiver's softirq); root's reply p50/p99 %v / %v (before the flood %v / %v)",
		wall.Round(time.Millisecond), served, float64(served)/wall.Seconds(), b.cfg.ClientRequests, 100*share, 100*float64(sys)/float64(wall),
		p50.Round(time.Microsecond), p99.Round(time.Microsecond), idle50.Round(time.Microsecond), idle99.Round(time.Microsecond))
	if limit := float64(b.cfg.ClientRequests)*wall.Seconds()*1.1 + 200; float64(served) > limit {
		t.Errorf("lanes-rtd served %d requests of one client in %v, above its pace (%.0f)", served, wall, limit)
	}
	// The goal is 10 % of a core (printed above; about 8 % here at load 10
	// on 2 CPUs); judged at 25 %, which an unpaced flood exceeds whatever
	// the load (94 % on an idle machine) and a loaded machine does not.
	if share > 0.25 {
		testutil.TimingErrorf(t, "lanes-rtd used %.1f %% of a CPU under one client's flood", 100*share)
	}
}

// TestStatsFloodAsksRtdRarely (audit N7): an ungranted uid sending 11,800 STATS
// requests a second cost lanes-rtd 24 % of a CPU: each one asked it for
// its counters. Fix: lanes-rtd's counters answer the STATS of clients
// other than root for statsCacheAge (stats.go, clientStats).
func TestStatsFloodAsksRtdRarely(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	b := newBed(t, 0, nil)
	c, err := dialAs(t, b.cfg.Socket, testutil.Nobody)
	if err != nil {
		t.Fatal(err)
	}
	p := b.lane.rtd
	p.askMu.Lock()
	asked0 := p.askID
	p.askMu.Unlock()
	t0 := time.Now()
	const n = 300
	for range n {
		if _, err := c.stats(); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(t0)
	p.askMu.Lock()
	asked := p.askID - asked0
	p.askMu.Unlock()
	t.Logf("%d STATS requests of an ungranted client in %v asked lanes-rtd %d times", n, elapsed, asked)
	if limit := uint32(elapsed/statsCacheAge) + 2; asked > limit {
		t.Errorf("lanes-rtd asked %d times for %d STATS in %v, want at most %d", asked, n, elapsed, limit)
	}
}

// procStat reads a process's /proc stat line.
func procStat(t *testing.T, pid int) procstat.Stat {
	t.Helper()
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
