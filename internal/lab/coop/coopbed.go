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
package coop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/lane"
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
	api    *api.Client     // connection to it
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

// upload is one in-process TCP upload from a host.
type upload struct {
	conn   net.Conn
	cookie uint64
	start  time.Time
	end    atomic.Int64 // unix ns when the last byte was written and acked (0: running)
	done   chan struct{}
}

// dialServer connects host h to the server's port. On a lanes host with a
// lane, the connection's 3-tuple is registered with the host's daemon
// between bind and connect, as an application does through the API: only a
// registration that exists at connect reaches the socket's own lane entry
// (sock_ops resolves a socket's lane once, at connect), which the coop
// controller's per-lane rules and caps read; one registered after connect
// still steers its packets (the classifier's 3-tuple lookup) but not those.
func (cb *coopBed) dialServer(ctx context.Context, h *coopHost, port int, l lane.Lane) (net.Conn, error) {
	server := netip.AddrPortFrom(cb.server.Addr, uint16(port))
	d := net.Dialer{Timeout: 10 * time.Second}
	// The host's congestion control is set on the socket: the namespace's
	// default may not take it (a namespace may default only to a CC in the
	// machine's tcp_allowed_congestion_control, e.g. "reno bbr"), and then
	// these uploads ran the machine's default (BBR, whose ProbeRTT put every
	// flow at cwnd 4 for ~0.5 s every ~10.6 s: docs/lab.md).
	d.Control = func(_, _ string, rc syscall.RawConn) error {
		return testbed.SetCC(rc, cb.cfg.CC)
	}
	if h.api != nil && l != lane.Unset {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			if err := testbed.SetCC(rc, cb.cfg.CC); err != nil {
				return err
			}
			var sport int
			var err error
			if cerr := rc.Control(func(fd uintptr) { sport, err = bindAnyPort(int(fd)) }); cerr != nil {
				return cerr
			}
			if err != nil {
				return err
			}
			f := api.Flow{Dst: server.Addr().String(), DPort: server.Port(), SPort: uint16(sport), Proto: "tcp"}
			if err := h.api.Register(f, l); err != nil {
				return fmt.Errorf("register %s in lane %s: %w", f, l, err)
			}
			return nil
		}
	}
	var c net.Conn
	err := h.node.Do(func() (err error) {
		c, err = d.DialContext(ctx, "tcp4", server.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: dial %s: %w", h.node.Name, server, err)
	}
	cb.track(c)
	return c, nil
}

// bindAnyPort binds an IPv4 socket to an ephemeral port and returns it.
func bindAnyPort(fd int) (int, error) {
	if err := unix.Bind(fd, &unix.SockaddrInet4{}); err != nil {
		return 0, fmt.Errorf("bind: %w", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, fmt.Errorf("getsockname: %w", err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return 0, fmt.Errorf("getsockname: not IPv4: %T", sa)
	}
	return in4.Port, nil
}

// startUpload dials the server's port from host i and writes size bytes
// (0 = until stopped) as fast as TCP goes, in lane l (with lanes).
func (cb *coopBed) startUpload(ctx context.Context, i int, port int, size int64, l lane.Lane) (*upload, error) {
	c, err := cb.dialServer(ctx, cb.hosts[i], port, l)
	if err != nil {
		return nil, err
	}
	u := &upload{conn: c, start: time.Now(), done: make(chan struct{})}
	u.cookie = socketCookie(c)
	go func() {
		defer close(u.done)
		buf := make([]byte, 64<<10)
		var sent int64
		for ctx.Err() == nil && (size == 0 || sent < size) {
			k := int64(len(buf))
			if size > 0 && size-sent < k {
				k = size - sent
			}
			n, err := c.Write(buf[:k])
			sent += int64(n)
			if err != nil {
				return
			}
		}
		if size > 0 && sent >= size {
			waitDrained(c)
			u.end.Store(time.Now().UnixNano())
			c.Close()
		}
	}()
	return u, nil
}

// sendDown sends to a downloading host until it goes, with the hosts'
// congestion control set on the server's socket (the sender's).
func (cb *coopBed) sendDown(c net.Conn) {
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			_ = testbed.SetCC(rc, cb.cfg.CC)
			if cb.cfg.ServerPacing {
				_ = enablePacing(rc)
			}
		}
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// startDownload has host i download from the server until stopped; the
// host counts what it receives (its goodput).
func (cb *coopBed) startDownload(ctx context.Context, i int) (*upload, error) {
	h := cb.hosts[i]
	c, err := cb.dialServer(ctx, h, coopDownPort, lane.Unset)
	if err != nil {
		return nil, err
	}
	u := &upload{conn: c, start: time.Now(), done: make(chan struct{})}
	u.cookie = socketCookie(c)
	go func() {
		defer close(u.done)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			h.bytes.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	return u, nil
}

// startFlow starts host i's endless transfer in the bed's direction.
func (cb *coopBed) startFlow(ctx context.Context, i int) (*upload, error) {
	if cb.cfg.Down {
		return cb.startDownload(ctx, i)
	}
	return cb.startUpload(ctx, i, coopBulkPort, 0, lane.Unset)
}

// startFlows starts the endless transfers of several hosts at once.
func (cb *coopBed) startFlows(ctx context.Context, hosts []int) ([]*upload, error) {
	if !cb.cfg.Down {
		return cb.startUploads(ctx, hosts, 0, lane.Unset)
	}
	ups := make([]*upload, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for k, i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ups[k], errs[k] = cb.startDownload(ctx, i)
		}()
	}
	wg.Wait()
	return ups, errors.Join(errs...)
}

// senderView is one host's bulk flows as their senders see them: the
// hosts' own sockets uploading, the server's downloading to it.
type senderView struct {
	rtt     float64 // summed srtt, ms, over k flows with data in flight
	k       int
	cwnd    uint32
	sndWnd  uint32 // largest window the receiver offers (downloads)
	retrans map[uint64]uint32
}

// serverSide samples the server's flows to the hosts (downloads) by host.
func (cb *coopBed) serverSide(fl []tcpmon.Flow) map[*coopHost]*senderView {
	out := map[*coopHost]*senderView{}
	for _, f := range fl {
		src, err := netip.ParseAddrPort(f.Src)
		if err != nil || src.Port() != coopDownPort {
			continue
		}
		dst, err := netip.ParseAddrPort(f.Dst)
		if err != nil {
			continue
		}
		h := cb.byAddr[dst.Addr().Unmap()]
		if h == nil {
			continue
		}
		v := out[h]
		if v == nil {
			v = &senderView{retrans: map[uint64]uint32{}}
			out[h] = v
		}
		v.retrans[f.Cookie] = f.TotalRetrans
		if f.State == "ESTAB" && f.SRTT > 0 && f.Unacked > 0 {
			v.rtt += float64(f.SRTT) / 1000
			v.k++
			v.cwnd = max(v.cwnd, f.Cwnd)
			v.sndWnd = max(v.sndWnd, f.SndWnd)
		}
	}
	return out
}

// startUploads starts endless (size 0) or sized uploads from several hosts
// at once (dialled in parallel, so no host gets a head start of handshakes).
func (cb *coopBed) startUploads(ctx context.Context, hosts []int, size int64, l lane.Lane) ([]*upload, error) {
	ups := make([]*upload, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for k, i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ups[k], errs[k] = cb.startUpload(ctx, i, coopBulkPort, size, l)
		}()
	}
	wg.Wait()
	return ups, errors.Join(errs...)
}

// enablePacing turns on TCP's internal pacing of a socket: any finite
// SO_MAX_PACING_RATE marks it as needing pacing (tcp_needs_internal_pacing),
// and the kernel then paces at its own rate (1.2 x cwnd / srtt in
// congestion avoidance) under this very high ceiling.
func enablePacing(rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, 1<<40)
	}); err != nil {
		return err
	}
	return serr
}

// socketCookie reads SO_COOKIE (0 if unavailable).
func socketCookie(c net.Conn) uint64 {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return 0
	}
	var ck uint64
	_ = rc.Control(func(fd uintptr) {
		v, err := unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE)
		if err == nil {
			ck = v
		}
	})
	return ck
}

// waitDrained waits until the socket has no unsent or unacknowledged data
// (SIOCOUTQ = 0), so a transfer's end is when the server has it all.
func waitDrained(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	for i := 0; i < 6000; i++ {
		q := 0
		_ = rc.Control(func(fd uintptr) { q, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
		if q == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends an endless upload (closing its socket at once).
func (u *upload) stop() {
	if tc, ok := u.conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	u.conn.Close()
	<-u.done
}

// hostSample is one measurement interval of one host.
type hostSample struct {
	Bytes   int64   `json:"bytes"`
	Air     int64   `json:"air_bytes"` // TCP payload leaving the shared medium (coopair.go)
	SRTTms  float64 `json:"srtt_ms"`   // Mean over its bulk flows (0: none)
	Cwnd    uint32  `json:"cwnd"`
	Retrans uint32  `json:"retrans"` // cumulative, its flows to the server
	N       int     `json:"n,omitempty"`
	Cap     uint32  `json:"cap,omitempty"`
	Capping bool    `json:"capping,omitempty"`
	// CapChanges: its active flows' cap changes since each was first seen
	// (the daemon's counters: cwnd caps up, downlink caps down)
	CapChanges uint64 `json:"cap_changes,omitempty"`
	// The daemon's rate for the direction, its estimator's state (rate
	// estimated) and why it is not capping: what a run's caps followed,
	// interval by interval, without a special build
	RateBits uint64               `json:"rate_bits,omitempty"`
	Estimate *coop.EstimateStatus `json:"estimate,omitempty"`
	NotWhy   string               `json:"not_capping,omitempty"`
	// Ack: the downloads' ACK class (direction down): its rate, what it
	// sent over the last RTT
	Ack *coop.AckClassStatus `json:"ack_class,omitempty"`
}

// coopSeries is the per-interval record of a run.
type coopSeries struct {
	Step    time.Duration  `json:"step_ns"`
	T       []float64      `json:"t_s"`
	Samples [][]hostSample `json:"samples"` // [interval][host]
	// The shared medium at each sample: its queue (bytes) and how long its
	// serialiser has been idle since the bed started (s, cumulative).
	MediumQueue []int     `json:"medium_queue_bytes"`
	MediumIdle  []float64 `json:"medium_idle_s"`
	// non-TCP bytes (the daemons' announcements) the medium carried in
	// the bed's direction since the bed started (cumulative)
	MediumOther []int64 `json:"medium_other_bytes"`
	// Medium dcf, cumulative at each sample: air time lost to collisions
	// (s), frames in collisions, frames delivered.
	MediumLost     []float64 `json:"medium_lost_s,omitempty"`
	MediumCollided []uint64  `json:"medium_collided,omitempty"`
	MediumFrames   []uint64  `json:"medium_frames,omitempty"`
	// What a stalled testbed would show (accuracy/stalls.go): the hosts' summed
	// retransmission timeouts and spurious ones during the run, and the
	// shared medium's late deliveries (its uplink queues summed).
	RTOs         int64         `json:"rto"`
	SpuriousRTOs int64         `json:"spurious_rto"`
	Up           emu.LinkStats `json:"medium_up"`
	Down         emu.LinkStats `json:"medium_down"`
	DCF          *emu.DCFStats `json:"dcf,omitempty"` // Medium dcf, at the end
}

// hostsTCPExt sums a TcpExt counter over the hosts.
func (cb *coopBed) hostsTCPExt(names ...string) []int64 {
	v := make([]int64, len(names))
	for _, h := range cb.hosts {
		m, err := testbed.TCPExt(h.node)
		if err != nil {
			continue
		}
		for i, n := range names {
			v[i] += m[n]
		}
	}
	return v
}

// record samples every host each step until ctx ends or dur has passed;
// it fails if a daemon stops answering.
func (cb *coopBed) record(ctx context.Context, step, dur time.Duration, tick func(time.Duration)) (*coopSeries, error) {
	s := &coopSeries{Step: step}
	prev, prevAir := make([]int64, len(cb.hosts)), make([]int64, len(cb.hosts))
	now, nowAir := make([]int64, len(cb.hosts)), make([]int64, len(cb.hosts))
	retr := make([]map[uint64]uint32, len(cb.hosts))
	for i := range retr {
		retr[i] = map[uint64]uint32{}
	}
	rto0 := cb.hostsTCPExt("TCPTimeouts", "TCPSpuriousRTOs")
	defer func() {
		rto := cb.hostsTCPExt("TCPTimeouts", "TCPSpuriousRTOs")
		s.RTOs, s.SpuriousRTOs = rto[0]-rto0[0], rto[1]-rto0[1]
		s.Up, s.Down = sumLinkStats(cb.ups), cb.down.Stats()
		if cb.dcf != nil {
			st := cb.dcf.Stats()
			s.DCF = &st
		}
	}()
	start := time.Now()
	t := time.NewTicker(step)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		// every host's counters at one instant, before the slower samples
		for i, h := range cb.hosts {
			now[i], nowAir[i] = h.bytes.Load(), h.air.Load()
		}
		el := time.Since(start)
		if tick != nil {
			tick(el)
		}
		row := make([]hostSample, len(cb.hosts))
		var srv map[*coopHost]*senderView
		if cb.cfg.Down {
			if fl, err := cb.srvMon.Sample(); err == nil {
				srv = cb.serverSide(fl)
			}
		}
		for i, h := range cb.hosts {
			row[i].Bytes, row[i].Air = now[i]-prev[i], nowAir[i]-prevAir[i]
			prev[i], prevAir[i] = now[i], nowAir[i]
			cb.senderSide(h, srv, retr[i], &row[i])
			for _, v := range retr[i] {
				row[i].Retrans += v
			}
			if h.api != nil {
				if err := cb.daemonSide(h, &row[i]); err != nil {
					return s, err
				}
			}
		}
		s.T = append(s.T, el.Seconds())
		s.Samples = append(s.Samples, row)
		cb.sampleMedium(s)
		if el >= dur {
			break
		}
	}
	return s, nil
}

// senderSide fills a host's sample from the senders' sockets: the
// server's for downloads (srv), the host's own monitor for uploads; the
// Mean srtt and largest cwnd of its flows with data in flight, and each
// flow's retransmissions into retr.
func (cb *coopBed) senderSide(h *coopHost, srv map[*coopHost]*senderView, retr map[uint64]uint32, row *hostSample) {
	if cb.cfg.Down {
		if v := srv[h]; v != nil {
			for ck, r := range v.retrans {
				retr[ck] = r
			}
			if v.k > 0 {
				row.SRTTms = v.rtt / float64(v.k)
			}
			row.Cwnd = v.cwnd
		}
		return
	}
	fl, err := h.mon.Sample()
	if err != nil {
		return
	}
	var rtt float64
	k := 0
	for _, f := range fl {
		if !isServerFlow(f.Dst, cb.server.Addr) {
			continue
		}
		retr[f.Cookie] = f.TotalRetrans
		if f.State == "ESTAB" && f.SRTT > 0 && f.Unacked > 0 {
			rtt += float64(f.SRTT) / 1000
			k++
			row.Cwnd = max(row.Cwnd, f.Cwnd)
		}
	}
	if k > 0 {
		row.SRTTms = rtt / float64(k)
	}
}

// daemonSide fills a lanes host's sample from its daemon's coop status in
// the bed's direction: N, capping (or why not), rate, estimate, cap and
// cap changes.
func (cb *coopBed) daemonSide(h *coopHost, row *hostSample) error {
	st, err := h.coopStatus()
	if err != nil {
		return err
	}
	row.N, row.Capping, row.RateBits, row.Estimate, row.NotWhy = st.N, st.Capping, st.RateBits, st.Estimate, st.Reason
	if cb.cfg.Down {
		d := st.Down
		row.N, row.Capping, row.RateBits, row.Estimate, row.NotWhy = d.N, d.Capping, d.RateBits, d.Estimate, d.Reason
		row.Ack = d.AckClass
	}
	if row.Capping {
		row.NotWhy = ""
	}
	row.Cap = flowsCap(st, cb.cfg.Down)
	row.CapChanges = flowsCapChanges(st, cb.cfg.Down)
	return nil
}

// sampleMedium appends the medium's queue, other traffic, idle time and
// (802.11) air lost, collisions and frames to the series.
func (cb *coopBed) sampleMedium(s *coopSeries) {
	s.MediumQueue = append(s.MediumQueue, cb.mediumQueue())
	s.MediumOther = append(s.MediumOther, cb.other.Load())
	if cb.dcf == nil {
		s.MediumIdle = append(s.MediumIdle, cb.mediumLinks()[0].Stats().Idle.Seconds())
		return
	}
	st := cb.dcf.Stats()
	s.MediumIdle = append(s.MediumIdle, st.Idle.Seconds())
	s.MediumLost = append(s.MediumLost, st.AirLost.Seconds())
	s.MediumCollided = append(s.MediumCollided, st.Collided)
	s.MediumFrames = append(s.MediumFrames, st.Successes)
}

// mediumLinks are the medium's queues in the bed's direction: the AP's
// downlink for downloads, else the uplink (fifo) or every station's.
func (cb *coopBed) mediumLinks() []*emu.Link {
	if cb.cfg.Down {
		return []*emu.Link{cb.down}
	}
	return cb.ups
}

// mediumQueue is what waits in the medium's queues in the bed's
// direction, bytes.
func (cb *coopBed) mediumQueue() int {
	q := 0
	for _, l := range cb.mediumLinks() {
		q += l.QueueBytes()
	}
	return q
}

// sumLinkStats adds up links' counters (the peaks and lateness: the
// largest; the stalls: all, in time order).
func sumLinkStats(ls []*emu.Link) emu.LinkStats {
	var s emu.LinkStats
	for _, l := range ls {
		x := l.Stats()
		s.EnqPackets, s.EnqBytes = s.EnqPackets+x.EnqPackets, s.EnqBytes+x.EnqBytes
		s.DropTail, s.DropLoss, s.DropRetry = s.DropTail+x.DropTail, s.DropLoss+x.DropLoss, s.DropRetry+x.DropRetry
		s.OutPackets, s.OutBytes = s.OutPackets+x.OutPackets, s.OutBytes+x.OutBytes
		s.MaxQueueBytes, s.MaxQueueP = max(s.MaxQueueBytes, x.MaxQueueBytes), max(s.MaxQueueP, x.MaxQueueP)
		s.Idle += x.Idle
		s.Opportunities, s.UsedOpportunities = s.Opportunities+x.Opportunities, s.UsedOpportunities+x.UsedOpportunities
		s.MaxLate = max(s.MaxLate, x.MaxLate)
		s.LatePackets, s.StallEvents = s.LatePackets+x.LatePackets, s.StallEvents+x.StallEvents
		s.StallsAt = append(s.StallsAt, x.StallsAt...)
	}
	sort.Slice(s.StallsAt, func(i, j int) bool { return s.StallsAt[i] < s.StallsAt[j] })
	return s
}

// flowsCap is the largest cap of a host's active flows, segments: the
// cwnd caps of uploads, or the downlink caps (receive window, bytes / MSS)
// of downloads.
func flowsCap(st *coop.Status, down bool) uint32 {
	var c uint32
	for _, f := range st.Flows {
		switch {
		case !down && f.Active:
			c = max(c, f.Cap)
		case down && f.DownActive && f.DownCap > 0:
			c = max(c, f.DownCap/max(f.MSS, 536))
		}
	}
	return c
}

// flowsCapChanges adds up the cap changes of a host's active flows (as
// flowsCap chooses them).
func flowsCapChanges(st *coop.Status, down bool) uint64 {
	var n uint64
	for _, f := range st.Flows {
		switch {
		case !down && f.Active:
			n += f.CapChanges
		case down && f.DownActive:
			n += f.DownCapChanges
		}
	}
	return n
}

func isServerFlow(dst string, server netip.Addr) bool {
	ap, err := netip.ParseAddrPort(dst)
	return err == nil && ap.Addr().Unmap() == server
}

// coopStats summarises a series over [from, to) seconds for the given hosts.
type coopStats struct {
	TotalMbit   float64   `json:"total_mbit"`
	PerHostMbit []float64 `json:"per_host_mbit"`
	JainStep    float64   `json:"jain_per_interval"`     // Mean of per-interval indices
	JainAir     float64   `json:"jain_per_interval_air"` // the same over the bytes leaving the medium
	JainRun     float64   `json:"jain_run"`
	RTTms       float64   `json:"rtt_median_ms"`
	RTTp95ms    float64   `json:"rtt_p95_ms"`
	// The shared medium: share of the time its serialiser was idle, and
	// its queue's median over the samples
	IdlePct    float64 `json:"medium_idle_pct"`
	QueueP50KB float64 `json:"medium_queue_p50_kb"`
	OtherMbit  float64 `json:"medium_other_mbit"` // non-TCP traffic on the medium (announcements)
	Retrans    uint32  `json:"retrans"`
	// The hosts' per-step pattern over their air bytes (cooppattern.go):
	// coefficient of variation, autocorrelation at 4 and 7 steps.
	HostCV float64 `json:"host_cv"`
	ACF4   float64 `json:"acf_4"`
	ACF7   float64 `json:"acf_7"`
	// Medium dcf: share of the time the air carried collisions, and of
	// the frames sent (attempts) that collided.
	AirLostPct  float64 `json:"medium_air_lost_pct,omitempty"`
	CollidedPct float64 `json:"medium_collided_pct,omitempty"`
}

// interval is how long sample k covers: since the previous sample (or the
// start), in seconds.
func (s *coopSeries) interval(k int) float64 {
	if k == 0 {
		return s.T[0]
	}
	return s.T[k] - s.T[k-1]
}

// maxInterval is the longest time between two samples (a recorder that
// fell behind its step on a busy machine).
func (s *coopSeries) maxInterval() float64 {
	m := 0.0
	for k := range s.T {
		m = max(m, s.interval(k))
	}
	return m
}

func (s *coopSeries) stats(hosts []int, from, to float64) coopStats {
	var st coopStats
	first, last := s.window(from, to)
	secs := s.hostStats(&st, hosts, first, last)
	s.mediumStats(&st, first, last, secs)
	if n := len(s.Samples); n > 0 {
		for _, i := range hosts {
			st.Retrans += s.Samples[n-1][i].Retrans
		}
	}
	return st
}

// window is the first and last sample in (from, to] seconds, -1 for none.
func (s *coopSeries) window(from, to float64) (first, last int) {
	first, last = -1, -1
	for k := range s.Samples {
		if s.T[k] <= from || s.T[k] > to {
			continue
		}
		if first < 0 {
			first = k
		}
		last = k
	}
	return first, last
}

// hostStats fills the hosts' goodput, Jain's indices and RTTs over samples
// first..last, and returns how long they cover in seconds.
func (s *coopSeries) hostStats(st *coopStats, hosts []int, first, last int) float64 {
	st.PerHostMbit = make([]float64, len(hosts))
	var jains, airs, rtts []float64
	var steps [][]float64
	secs := 0.0
	for k := first; k >= 0 && k <= last; k++ {
		// the bytes are those since the previous sample, which may be more
		// than a step ago when the machine is busy
		secs += s.interval(k)
		x, a := make([]float64, len(hosts)), make([]float64, len(hosts))
		for j, i := range hosts {
			row := s.Samples[k][i]
			x[j], a[j] = float64(row.Bytes), float64(row.Air)
			st.PerHostMbit[j] += float64(row.Bytes) * 8
			if row.SRTTms > 0 {
				rtts = append(rtts, row.SRTTms)
			}
		}
		jains, airs = append(jains, testbed.Jain(x)), append(airs, testbed.Jain(a))
		steps = append(steps, a)
	}
	pt := pattern(steps)
	st.HostCV, st.ACF4, st.ACF7 = pt.CV, pt.ACFShort, pt.ACFLong
	if secs > 0 {
		for j := range st.PerHostMbit {
			st.PerHostMbit[j] /= secs * 1e6
			st.TotalMbit += st.PerHostMbit[j]
		}
	}
	st.JainRun = testbed.Jain(st.PerHostMbit)
	st.JainStep, st.JainAir = testbed.Mean(jains), testbed.Mean(airs)
	sort.Float64s(rtts)
	if len(rtts) > 0 {
		st.RTTms = testbed.Percentile(rtts, 50)
		st.RTTp95ms = testbed.Percentile(rtts, 95)
	}
	return secs
}

// mediumStats fills the shared medium's figures over samples first..last
// (secs long): idle time, other traffic, queue, and the 802.11 air lost
// and collisions. Each series may be absent (older results, fifo beds).
func (s *coopSeries) mediumStats(st *coopStats, first, last int, secs float64) {
	if first < 0 || secs <= 0 {
		return
	}
	if last < len(s.MediumIdle) {
		st.IdlePct = 100 * delta(s.MediumIdle, first, last) / secs
	}
	if last < len(s.MediumOther) {
		st.OtherMbit = delta(s.MediumOther, first, last) * 8 / secs / 1e6
	}
	if last < len(s.MediumQueue) {
		queue := make([]float64, 0, last-first+1)
		for k := first; k <= last; k++ {
			queue = append(queue, float64(s.MediumQueue[k])/1000)
		}
		sort.Float64s(queue)
		st.QueueP50KB = testbed.Percentile(queue, 50)
	}
	if last < len(s.MediumLost) {
		lost := delta(s.MediumLost, first, last)
		coll := delta(s.MediumCollided, first, last)
		frames := delta(s.MediumFrames, first, last)
		st.AirLostPct = 100 * lost / secs
		if coll+frames > 0 {
			st.CollidedPct = 100 * coll / (coll + frames)
		}
	}
}

// delta is how much a cumulative series grew over samples first..last
// (from the sample before first, or 0).
func delta[T float64 | uint64 | int64](v []T, first, last int) float64 {
	d := float64(v[last])
	if first > 0 {
		d -= float64(v[first-1])
	}
	return d
}

// coopControllerConfig is the daemons' coop section in the lab: the AP rate
// known (as the paper assumed), the default 120 kbit headroom.
func coopControllerConfig(rate float64) config.Coop {
	c := config.DefaultCoop()
	c.APRate = config.Rate(math.Round(rate))
	return c
}

// streamSink receives timestamped chunks of CBR streams and records each
// chunk's delivery delay (all namespaces share one clock).
type streamSink struct {
	mu     sync.Mutex
	delays []float64 // ms, in arrival order
	times  []float64 // arrival, unix s
}

func (s *streamSink) serve(c net.Conn) {
	defer c.Close()
	hdr := make([]byte, 12)
	body := make([]byte, 64<<10)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		sent := int64(beUint64(hdr[:8]))
		n := int(beUint32(hdr[8:12]))
		if n > len(body) {
			return
		}
		if _, err := io.ReadFull(c, body[:n]); err != nil {
			return
		}
		now := time.Now()
		s.mu.Lock()
		s.delays = append(s.delays, float64(now.UnixNano()-sent)/1e6)
		s.times = append(s.times, float64(now.UnixNano())/1e9)
		s.mu.Unlock()
	}
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, x := range b[:8] {
		v = v<<8 | uint64(x)
	}
	return v
}

func beUint32(b []byte) uint32 {
	var v uint32
	for _, x := range b[:4] {
		v = v<<8 | uint32(x)
	}
	return v
}

func putBE(b []byte, v uint64, n int) {
	for i := n - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// startStream sends a constant-bit-rate stream from host i: one chunk of
// chunk bytes every chunk*8/rate seconds, each stamped with its intended
// send time (so a chunk held back by the socket counts as late).
func (cb *coopBed) startStream(ctx context.Context, i int, rate float64, chunk int, l lane.Lane) (*upload, error) {
	c, err := cb.dialServer(ctx, cb.hosts[i], coopStreamPort, l)
	if err != nil {
		return nil, err
	}
	u := &upload{conn: c, start: time.Now(), done: make(chan struct{})}
	u.cookie = socketCookie(c)
	period := time.Duration(float64(chunk*8) / rate * 1e9)
	go func() {
		defer close(u.done)
		msg := make([]byte, 12+chunk)
		next := time.Now()
		for ctx.Err() == nil {
			putBE(msg[:8], uint64(next.UnixNano()), 8)
			putBE(msg[8:12], uint64(chunk), 4)
			if _, err := c.Write(msg); err != nil {
				return
			}
			next = next.Add(period)
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
	}()
	return u, nil
}
