// Integration test (root): three controllers in three network namespaces on
// one bridge find each other over real UDP broadcast, agree on N, and cap the
// real TCP uploads they see through the TCP monitor.
//
//	ns h1 --veth--+
//	ns h2 --veth--+-- br0 (ns sw, 10.k.0.100 = upload sink)
//	ns h3 --veth--+
package coop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/testutil"
)

// recordCaps records caps (the datapath's setter stands here when the test
// has no sock_ops program attached).
type recordCaps struct {
	mu sync.Mutex
	m  map[uint64]uint32
}

// SetLaneCwndCap records nothing: the tests read the sockets' caps.
func (r *recordCaps) SetLaneCwndCap(lane.Lane, uint32) error { return nil }

func (r *recordCaps) SetSocketCwndCap(ck uint64, segs uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[ck] = segs
	return nil
}

type lan struct {
	sw    *testutil.NetNS
	hosts []*testutil.NetNS
	sink  netip.Addr
}

// newLAN builds n host namespaces bridged in a switch namespace.
func newLAN(t *testing.T, n int) *lan {
	l := testutil.NewLAN(t, n)
	return &lan{sw: l.Switch, hosts: l.Hosts, sink: netip.MustParseAddr(l.Server.String())}
}

// sinkServer accepts uploads in the switch namespace and discards them.
func (l *lan) sinkServer(t *testing.T, port int) {
	var ln net.Listener
	l.sw.Do(t, func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf("%v:%d", l.sink, port))
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
}

// upload starts a bulk TCP upload from host i until ctx ends.
func (l *lan) upload(t *testing.T, ctx context.Context, i, port int) {
	var c net.Conn
	l.hosts[i].Do(t, func() (err error) {
		c, err = net.Dial("tcp4", fmt.Sprintf("%v:%d", l.sink, port))
		return err
	})
	go func() {
		buf := make([]byte, 64<<10)
		for ctx.Err() == nil {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { c.Close() })
}

// ihost is one controller of an integration test.
type ihost struct {
	c      *Controller
	caps   *recordCaps
	smp    *tcpmon.Sampler
	done   chan error
	cancel context.CancelFunc
}

func integrationConfig() config.Coop {
	cfg := config.DefaultCoop()
	cfg.Enabled = true
	cfg.Interface = "lan0"
	cfg.Port = 17431
	cfg.Interval = config.Duration(100 * time.Millisecond)
	cfg.Key = "000102030405060708090a0b0c0d0e0f"
	cfg.APRate = config.Rate(10e9) // veth RTTs are tens of µs: a large rate makes caps non-trivial
	cfg.Headroom = 0
	cfg.Safety.Enabled = false
	return cfg
}

// startControllers runs one controller per host namespace; setters(i)
// are host i's setters (nil: record the upload caps only). Each host's
// announcement socket is opened just before its controller is built, as
// the daemon's New opens its own: a controller refuses, in its first
// clock-skew window, announcements stamped more than epochGrace before it
// began (recordings, for all it knows), and a socket opened while the
// samplers and setters load (seconds in qemu without KVM) would hold such
// announcements of the peers already running.
func startControllers(t *testing.T, ctx context.Context, l *lan, cfg config.Coop, setters func(i int) Options) []*ihost {
	var hs []*ihost
	for i, ns := range l.hosts {
		smp, err := tcpmon.New(tcpmon.Config{NetNS: ns.Handle, NoProcess: true, Interval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { smp.Close() })
		smp2, err := tcpmon.New(tcpmon.Config{NetNS: ns.Handle, NoProcess: true, Interval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { smp2.Close() })
		h := &ihost{caps: &recordCaps{m: map[uint64]uint32{}}, done: make(chan error, 1), smp: smp2}
		o := Options{Up: h.caps}
		if setters != nil {
			o = setters(i)
		}
		var tr *UDPTransport
		var id uint64
		ns.Do(t, func() (err error) {
			tr, err = ListenUDP("lan0", cfg.Port)
			id = DeriveHostID("lan0")
			return err
		})
		o.Config, o.Transport, o.HostID = cfg, tr, id
		o.Flows = &MonitorSource{S: smp, Local: netip.PrefixFrom(l.sink, 24).Masked()}
		o.Logger = slog.New(slog.DiscardHandler).With("host", i)
		h.c, err = New(o)
		if err != nil {
			tr.Close()
			t.Fatal(err)
		}
		hctx, hcancel := context.WithCancel(ctx)
		h.cancel = hcancel
		go func() { h.done <- h.c.Run(hctx) }()
		hs = append(hs, h)
	}
	all := append([]*ihost(nil), hs...)
	t.Cleanup(func() {
		for _, h := range all {
			h.cancel()
			if err := <-h.done; err != nil {
				t.Errorf("controller stop: %v", err)
			}
		}
	})
	return hs
}

// waitFor polls ok until it holds or d passes (then logs the hosts' state
// and fails).
func waitFor(t *testing.T, hs []*ihost, what string, d time.Duration, ok func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ok() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, h := range hs {
		st := h.c.Status()
		t.Logf("host %d: N=%d peers=%d capping=%v reason=%q flows=%+v counters=%+v", i, st.N, len(st.Peers), st.Capping, st.Reason, st.Flows, st.Counters)
	}
	t.Fatalf("timeout waiting for %s", what)
}

func TestIntegrationThreeHostsAgree(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("integration test")
	}
	l := newLAN(t, 3)
	l.sinkServer(t, 5001)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cfg := integrationConfig()
	hs := startControllers(t, ctx, l, cfg, nil)
	// idle hosts know each other but nobody is an active sender
	waitFor(t, hs, "peers", 3*time.Second, func() bool {
		for _, h := range hs {
			if len(h.c.Status().Peers) != 2 {
				return false
			}
		}
		return true
	})
	for i := range l.hosts {
		l.upload(t, ctx, i, 5001)
	}
	start := time.Now()
	waitFor(t, hs, "N=3 with caps", 5*time.Second, func() bool {
		for _, h := range hs {
			st := h.c.Status()
			if st.N != 3 || !st.Capping || len(st.Flows) == 0 || st.Flows[0].Cap == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("all three agree on N=3 %v after the uploads started", time.Since(start).Round(time.Millisecond))
	for i, h := range hs {
		st := h.c.Status()
		for _, f := range st.Flows {
			if !f.Active {
				continue
			}
			want := max(IdealCwnd(uint64(cfg.APRate), time.Duration(f.MinRTT*1e6), 0, f.MSS, 3), cfg.MinSegments)
			// shares move with the measured min RTTs of the others: allow 1/3 either way
			if f.Cap < want*2/3 || f.Cap > want*4/3+1 {
				t.Errorf("host %d flow %d: cap %d, formula with its own min RTT %.3f ms gives %d", i, f.Cookie, f.Cap, f.MinRTT, want)
			}
			h.caps.mu.Lock()
			got := h.caps.m[f.Cookie]
			h.caps.mu.Unlock()
			if got == 0 {
				t.Errorf("host %d flow %d: cap not handed to the datapath", i, f.Cookie)
			}
		}
		if c := st.Counters; c.Dropped() != 0 || c.Accepted == 0 || !st.Authenticated {
			t.Errorf("host %d counters %+v", i, c)
		}
	}
	// host 3 stops its daemon: it says goodbye, the others drop to N=2
	leftAt := time.Now()
	hs[2].cancel()
	hs = hs[:2]
	waitFor(t, hs, "N=2 after leave", 2*time.Second, func() bool {
		for _, h := range hs {
			if h.c.Status().N != 2 {
				return false
			}
		}
		return true
	})
	t.Logf("leave noticed after %v", time.Since(leftAt).Round(time.Millisecond))
}
