// coopbed.go: the testbed of the cooperative-control experiments (coop,
// coop-dynamics, coop-mixed, apps): N hosts behind one emulated access point
// uploading to a distant server (or, with Down, downloading from it: the
// AP's downlink is then the shared bottleneck and the server the sender),
// optionally each running lanes' datapath and cooperative controller.
//
//	host 1 ..+                                   (AP -> cloud: delay only)
//	host 2 ..+--[shared uplink: rate, buffer]--> route --[server down: RTT/2]--> server
//	host N ..+<-[shared downlink: rate, buffer]-- route <-[server up: RTT/2]---
//
// The medium's two directions are one Link each, shared by every host (the
// emulator's shared medium, Medium "fifo"), or, with Medium "dcf", an 802.11
// DCF medium (emu/dcf.go) whose contenders are each host's own uplink queue
// and the AP's downlink queue, each Buffer bytes, contending for one
// half-duplex channel with backoff and collisions; the RTT sits between the AP and the server, as
// the paper's Dummynet did, so host-to-host announcements cross only the
// medium. Traffic is generated in-process: sockets are created inside each
// host's namespace and driven by goroutines; the server counts each host's
// received bytes (goodput) and the TCP monitor samples every host's flows.
//
// "With lanes" a host runs the real `lanes daemon` in its namespace, as a user
// would (coopd.go): a policy file managing up0 with a `coop:` section
// (group key; announcements as IPv4 broadcast and/or IPv6 link-local
// multicast, which the emulator relays across the medium as an AP does, or
// to each other lanes host as on a network with client isolation), started
// through the topology, waited for until
// its API answers, stopped with SIGTERM when the bed closes. Connections that
// belong in a lane are registered with the daemon's API before they connect;
// N, caps and the capping state are read from the daemon (the API's
// component op, `lanes coop status`).
//
// This file builds and closes the bed; traffic.go drives its flows,
// record.go samples a run, stats.go summarizes the samples.
package coop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// Ports of the coop testbed's server.
const (
	coopBulkPort   = 5001
	coopStreamPort = 5002
	coopDownPort   = 5003 // the server sends to whoever connects (downloads)
	coopAnnPort    = 7431
)

// CoopBedConfig describes one coop testbed.
type CoopBedConfig struct {
	Hosts  int
	Rate   float64       // AP rate, bit/s
	RTT    time.Duration // base RTT host <-> server
	Buffer int           // AP queue per direction, bytes
	// BufferPackets also limits each of the medium's queues in packets
	// (0: bytes only), as drivers that count descriptors do: a queue of
	// TCP ACKs then holds that many, not Buffer/52 of them.
	BufferPackets int
	CC            string // hosts' congestion control
	// LanesOn says which hosts run lanes (nil: none).
	LanesOn func(i int) bool
	// Lanes is the lanes binary whose `daemon` the lanes hosts run.
	Lanes string
	// Coop is the `coop:` section of the daemons' policy (Enabled,
	// Interface, Port, key and unicast peers are filled in per host).
	Coop config.Coop
	// Announce is the daemons' transport: "ipv4" (default: one IPv4
	// broadcast per interval), "ipv6" (link-local multicast), "both", or
	// "unicast": to every other lanes host (`unicast_peers`, a network with
	// client isolation: N(N-1) datagrams per interval on the medium).
	Announce string
	// Down: the hosts' endless transfers are downloads (startFlow), and
	// the recorder reads RTT and cwnd at the server (the sender) and N,
	// caps and capping from the daemons' downlink status.
	Down bool
	// Medium is the shared medium: "fifo" (default: one rate-limited
	// queue per direction, no contention) or "dcf" (802.11 DCF, Rate being
	// one station's saturation rate), its backoff draws seeded by Seed.
	Medium string
	Seed   int64
	// ServerPacing has the server pace its downloads (TCP's internal
	// pacing, which a finite SO_MAX_PACING_RATE turns on, as the fq qdisc
	// does on a real server): without it a CUBIC sender limited by the
	// receive window sends each window as the ACKs open it, in bursts that
	// keep their shape through the AP's FIFO.
	ServerPacing bool
}

// Media of the coop testbed.
const (
	MediumFIFO = "fifo"
	MediumDCF  = "dcf"
)

// coopHost is one host of the bed.
type coopHost struct {
	idx    int
	node   *topo.Node
	lanes  bool
	daemon *topo.Proc      // `lanes daemon` in the host's namespace (lanes hosts)
	sock   string          // its API socket
	api    *client.Client  // connection to it
	mon    *tcpmon.Sampler // measurement sampler
	bytes  atomic.Int64    // received by the server from this host (bulk port)
	air    atomic.Int64    // TCP payload of its transfers leaving the shared medium (coopair.go)
}

// coopBed is a running coop testbed.
type coopBed struct {
	cfg    CoopBedConfig
	bed    *testbed.Bed
	hosts  []*coopHost
	server *topo.Node
	byAddr map[netip.Addr]*coopHost
	lns    []net.Listener
	stream *streamSink
	mu     sync.Mutex
	conns  []net.Conn
	ups    []*emu.Link     // the medium's uplink queues (fifo: one, shared)
	down   *emu.Link       // the AP's downlink queue
	dcf    *emu.DCF        // Medium dcf: the 802.11 medium both directions share
	srvMon *tcpmon.Sampler // the server's flows (Down: the senders)
	other  atomic.Int64    // non-TCP bytes the medium carried (coopair.go)
}

// newCoopBed builds and starts the testbed (server sinks listening, the
// lanes hosts' daemons running). Close it when done.
func newCoopBed(ctx context.Context, env *testbed.Env, c CoopBedConfig) (_ *coopBed, err error) {
	if c.CC == "" {
		c.CC = "cubic"
	}
	bed, err := testbed.NewBed(env, c.CC)
	if err != nil {
		return nil, err
	}
	cb := &coopBed{cfg: c, bed: bed, byAddr: map[netip.Addr]*coopHost{}}
	defer func() {
		if err != nil {
			cb.Close()
		}
	}()
	medium := emu.LinkConfig{Rate: c.Rate, QueueBytes: c.Buffer, QueuePackets: c.BufferPackets}
	switch c.Medium {
	case "", MediumFIFO:
		cb.ups = []*emu.Link{bed.Emu.NewUplink(medium)}
	case MediumDCF:
		if cb.dcf, err = emu.NewDCF(emu.DCFConfig{Rate: c.Rate, Seed: c.Seed}); err != nil {
			return nil, err
		}
		medium = emu.LinkConfig{Air: cb.dcf, QueueBytes: c.Buffer, QueuePackets: c.BufferPackets}
	default:
		return nil, fmt.Errorf("medium %q: want %s or %s", c.Medium, MediumFIFO, MediumDCF)
	}
	cb.down = bed.Emu.NewDownlink(medium)
	for i := 0; i < c.Hosts; i++ {
		var up *emu.Link
		if cb.dcf != nil { // every station its own queue on the air
			up = bed.Emu.NewUplink(medium)
			cb.ups = append(cb.ups, up)
		} else {
			up = cb.ups[0]
		}
		n, err := bed.AddHost(fmt.Sprintf("h%d", i+1), c.CC, up, cb.down, testbed.HostOpts{})
		if err != nil {
			return nil, err
		}
		h := &coopHost{idx: i, node: n, lanes: c.LanesOn != nil && c.LanesOn(i)}
		cb.hosts = append(cb.hosts, h)
		cb.byAddr[n.Addr] = h
	}
	half := emu.LinkConfig{Delay: c.RTT / 2}
	if cb.server, err = bed.AddHost("server", c.CC, bed.Emu.NewUplink(half), bed.Emu.NewDownlink(half), testbed.HostOpts{}); err != nil {
		return nil, err
	}
	cb.meterAir()
	bed.Start(ctx)
	if err := cb.listen(coopBulkPort, cb.countBulk); err != nil {
		return nil, err
	}
	cb.stream = &streamSink{}
	if err := cb.listen(coopStreamPort, cb.stream.serve); err != nil {
		return nil, err
	}
	if err := cb.listen(coopDownPort, cb.sendDown); err != nil {
		return nil, err
	}
	if c.Down {
		if cb.srvMon, err = tcpmon.New(tcpmon.Config{NetNS: cb.server.Handle, NoProcess: true, Interval: 50 * time.Millisecond}); err != nil {
			return nil, fmt.Errorf("monitor in the server: %w", err)
		}
	}
	for _, h := range cb.hosts {
		if h.mon, err = tcpmon.New(tcpmon.Config{NetNS: h.node.Handle, NoProcess: true, Interval: 50 * time.Millisecond}); err != nil {
			return nil, fmt.Errorf("monitor in %s: %w", h.node.Name, err)
		}
	}
	if err := cb.startDaemons(ctx, env); err != nil {
		return nil, err
	}
	return cb, nil
}

// listen starts a TCP server in the server namespace.
func (cb *coopBed) listen(port int, serve func(net.Conn)) error {
	var ln net.Listener
	err := cb.server.Do(func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		return fmt.Errorf("server listen :%d: %w", port, err)
	}
	cb.lns = append(cb.lns, ln)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cb.track(c)
			go serve(c)
		}
	}()
	return nil
}

func (cb *coopBed) track(c net.Conn) {
	cb.mu.Lock()
	cb.conns = append(cb.conns, c)
	cb.mu.Unlock()
}

// countBulk discards an upload, counting bytes for its host.
func (cb *coopBed) countBulk(c net.Conn) {
	defer c.Close()
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	h := cb.byAddr[ap.Addr().Unmap()]
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if h != nil {
			h.bytes.Add(int64(n))
		}
		if err != nil {
			return
		}
	}
}

// Close stops traffic, the daemons (SIGTERM: each removes what it
// installed) and the bed.
func (cb *coopBed) Close() error {
	var errs []error
	for _, ln := range cb.lns {
		ln.Close()
	}
	cb.mu.Lock()
	for _, c := range cb.conns {
		c.Close()
	}
	cb.mu.Unlock()
	errs = append(errs, cb.stopDaemons())
	for _, h := range cb.hosts {
		if h.mon != nil {
			h.mon.Close()
		}
	}
	if cb.srvMon != nil {
		cb.srvMon.Close()
	}
	errs = append(errs, cb.bed.Close())
	return errors.Join(errs...)
}

// coopControllerConfig is the daemons' coop section in the lab: the AP rate
// known (as the paper assumed), the default 120 kbit headroom.
func coopControllerConfig(rate float64) config.Coop {
	c := config.DefaultCoop()
	c.APRate = config.Rate(math.Round(rate))
	return c
}
