// Package deadline holds experiment deadline: realtime datagrams with
// deadlines through lanes' realtime lane against default Linux.
//
// deadline.go: experiment `deadline`, SEEDS.md §003 tables 1–3 — realtime
// datagrams with deadlines under a saturating bulk transfer, through the
// lanes realtime lane (EDF + admission, internal/rtlane) and through default
// Linux (one FIFO), timestamped at the paper's five points; plus the
// inversion scenario, the added latency of the daemon path and the largest
// realtime rate with zero misses.
//
//	netns snd                                       netns rcv
//	 flows A, B --rtclient--> rtlane (EDF, paced)
//	                            | SO_PRIORITY 1:11
//	 bulk TCP x2 ----------> [egress qdisc] dl0 ==veth== dl1 --> UDP receiver (SO_TIMESTAMPNS)
//	                                                         --> bulk sink
//
// Egress qdisc of dl0, the emulated NIC of rate R (--rate):
//   - lanes: the lanes datapath (internal/datapath), shaped mode: HTB root at
//     0.95 R, realtime leaf prio 0, interactive (bulk) prio 1;
//   - default: HTB root at 0.95 R with one class and a pfifo of
//     1000/--scale packets (the 1,000-packet txqueue of the paper's NIC,
//     scaled to the same time).
//
// Both set gso_max_segs 1 on dl0 so bulk TCP sends frames, not 64 KiB GSO
// packets (the non-preemptible unit, docs/realtime.md).
//
// Timestamps (all CLOCK_MONOTONIC on one machine, so the paper's clock
// drift correction is not needed): (1) before the send call, (2) enqueue,
// (3) dequeue, (4) receiver kernel timestamp (SO_TIMESTAMPNS), (5) after
// recvmsg. lanes: (2)/(3) are the daemon's admission and release into the
// kernel; default: SO_TIMESTAMPING TX_SCHED (entering the qdisc) and
// TX_SOFTWARE (handed to the driver) of the sending socket.
//
// Scaling: one machine cannot push 1 Gbit/s of 1,400 B frames through a
// shaped veth beside five other engineers, so the default is R = 100 Mbit/s
// with the packet counts per period divided by --scale (10): A sends 3
// datagrams of 1,400 B every 3 ms with a 10 ms deadline, B 1 every 3 ms with
// 1 ms. Realtime load stays 15% of the link as in the paper; transmit times
// are 10x the paper's, deadlines and periods unchanged. --rate 1gbit
// --scale 1 is the paper's setup.
package deadline

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/edfqdisc"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/latency"
	"github.com/lanes-net/lanes/internal/monoclock"
	"github.com/lanes-net/lanes/internal/pmqos"
	"github.com/lanes-net/lanes/internal/rtclient"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/schedtick"
)

func init() {
	testbed.Register(testbed.Experiment{Name: "deadline", Summary: "realtime datagrams with deadlines under bulk traffic: lanes EDF vs default Linux, inversion, daemon path (§003 tables 1-3)",
		Quick: "3 s per configuration",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			rate := fs.String("rate", "100mbit", "emulated NIC rate (the paper: 1gbit)")
			scale := fs.Int("scale", 10, "divide the paper's packet counts per period (and the default FIFO length) by this")
			dur := fs.Duration("duration", 10*time.Second, "measurement time per configuration (--quick: 3s)")
			bulk := fs.Int("bulk", 2, "bulk senders saturating the link")
			bulkKind := fs.String("bulk-kind", "udp", "bulk traffic: udp (unresponsive burst, as the paper's) or tcp")
			prio := fs.Int("rt-priority", 20, "SCHED_FIFO priority of the realtime senders' and receiver's threads (0 = normal)")
			sweep := fs.Bool("sweep", true, "also find the largest realtime rate with zero misses")
			pathDur := fs.Duration("path-duration", 0, "measurement time of each daemon-path configuration (0: a third of --duration, at least 2s)")
			lanePrio := fs.Int("lane-priority", 0, "release_priority of the lane (SCHED_FIFO of lanes-rtd) in every lanes configuration, and cyclictest's in the daemon-path table (0: the lane's default, 10); the realtime senders run at --rt-priority")
			procClient := fs.Bool("path-process", true, "the daemon-path table also runs the lanes paths with the client in a process of its own (lanes lab helper rtclient)")
			paths := fs.String("paths", "", "comma-separated daemon-path configurations to run (lanes, lanes-proc; the direct send is always run); empty: all that the other flags ask for")
			pathOnly := fs.Bool("path-only", false, "run only the daemon-path table (no tables 2/3, no inversion)")
			cpuLoad := fs.Int("cpu-load", 0, "busy worker processes at normal priority while the daemon-path table and its cyclictest reference run")
			clientCPU := fs.String("client-cpu", "", "the -proc paths' client process (lanes lab helper rtclient) pinned to this CPU, every thread of it (empty: not pinned, the scheduler places it)")
			ownSock := fs.Bool("own-socket", false, "the lanes clients attach a UDP socket of their own, connected to the receiver, and the lane sends from it (as applications do: docs/realtime.md, \"The application's socket\"); the notes give the sources the receiver saw")
			qd := fs.Bool("qdisc", true, "tables 2/3 also run the kernel path, paired with the daemon path: the EDF BPF qdisc (internal/bpf/edfqdisc, Linux 6.16+) at the root of the sender's egress and SO_TXTIME on each flow's own UDP socket; skipped, with the reason, where the kernel has no BPF qdisc")
			pmLat := fs.Int("pm-latency", 0, "CPU wake-up latency (µs) held through /dev/cpu_dma_latency while the daemon-path table and its cyclictest reference run, for every path alike (cyclictest's default); -1 leaves the CPUs' idle states alone")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				r, err := config.ParseRate(*rate)
				if err != nil {
					return nil, err
				}
				if *scale < 1 || *scale > 30 {
					return nil, fmt.Errorf("--scale %d not in 1..30", *scale)
				}
				if *bulkKind != "udp" && *bulkKind != "tcp" {
					return nil, fmt.Errorf("--bulk-kind %q: want udp or tcp", *bulkKind)
				}
				if *prio < 0 || *prio > 98 {
					return nil, fmt.Errorf("--rt-priority %d not in 0..98", *prio)
				}
				if *lanePrio < 0 || *lanePrio > 98 {
					return nil, fmt.Errorf("--lane-priority %d not in 0..98", *lanePrio)
				}
				if *pmLat < -1 {
					return nil, fmt.Errorf("--pm-latency %d: want µs >= 0, or -1", *pmLat)
				}
				if *cpuLoad < 0 || *cpuLoad > 64 {
					return nil, fmt.Errorf("--cpu-load %d not in 0..64", *cpuLoad)
				}
				p := dlParams{rate: r.Bits(), scale: *scale, dur: *dur, bulk: *bulk, bulkKind: *bulkKind, prio: *prio, sweep: *sweep,
					pathDur: *pathDur, pmLatency: *pmLat, procClient: *procClient, lanePrio: *lanePrio,
					pathOnly: *pathOnly, cpuLoad: *cpuLoad, clientCPU: -1, ownSocket: *ownSock, qdisc: *qd}
				if *clientCPU != "" {
					cpu, err := strconv.Atoi(*clientCPU)
					if err != nil || cpu < 0 || cpu >= runtime.NumCPU() {
						return nil, fmt.Errorf("--client-cpu %q: want a CPU in 0..%d", *clientCPU, runtime.NumCPU()-1)
					}
					p.clientCPU = cpu
				}
				if *paths != "" {
					for _, c := range strings.Split(*paths, ",") {
						if !slices.Contains(dlPathConfigs, c) {
							return nil, fmt.Errorf("--paths: unknown configuration %q (want %s)", c, strings.Join(dlPathConfigs, ", "))
						}
						p.paths = append(p.paths, c)
					}
				}
				if env.Quick {
					p.dur = 3 * time.Second
				}
				return runDeadline(ctx, env, p)
			}
		}})
}

type dlParams struct {
	rate     uint64
	scale    int
	dur      time.Duration
	bulk     int
	bulkKind string
	prio     int
	sweep    bool
	// The daemon-path table: time per configuration (0: dur/3, at least
	// 2 s) and the PM QoS wake-up latency held for all of it (-1: none).
	pathDur   time.Duration
	pmLatency int
	// procClient: the lanes paths also run with the client in its own
	// process.
	procClient bool
	// lanePrio: the lane's release_priority (0: its default).
	lanePrio int
	// paths: only these daemon-path configurations (nil: as the flags
	// above ask); pathOnly: the daemon-path table alone; cpuLoad: busy
	// workers while it runs.
	paths    []string
	pathOnly bool
	cpuLoad  int
	// clientCPU: the -proc paths' client process pinned to this CPU (-1:
	// not pinned).
	clientCPU int
	// ownSocket: the lanes clients send from a UDP socket of their own.
	ownSocket bool
	// qdisc: tables 2/3 also run the kernel path (qdisc.go) where the
	// kernel has a BPF qdisc.
	qdisc bool
}

// dlPathConfigs are the lanes configurations of the daemon-path table, in
// the order they run: the client in the lab's process, and in its own.
var dlPathConfigs = []string{"lanes", "lanes-proc"}

// setFIFO locks the calling goroutine to its thread and makes the thread
// SCHED_FIFO prio (the paper's real-time senders and receiver); the thread
// is discarded when the goroutine ends without unlocking.
func setFIFO(prio int) {
	runtime.LockOSThread()
	if prio > 0 {
		a := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
		_ = unix.SchedSetAttr(0, &a, 0)
	}
}

// sleepUntilMono sleeps on CLOCK_MONOTONIC until t (ns).
func sleepUntilMono(t int64) {
	ts := unix.NsecToTimespec(t)
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
}

// dlFlow is one periodic realtime sender (paper table 1).
type dlFlow struct {
	ID       uint32        `json:"id"`
	Name     string        `json:"name"`
	Deadline time.Duration `json:"deadline_ns"`
	Burst    int           `json:"burst"`
	Period   time.Duration `json:"period_ns"`
	Size     int           `json:"size"`
	Offset   time.Duration `json:"offset_ns,omitempty"` // start this long into each period
}

// dlRecord is one datagram's five timestamps (0 = not reached).
type dlRecord struct {
	Flow     uint32 `json:"flow"`
	Seq      uint32 `json:"seq"`
	Deadline int64  `json:"deadline"`
	Send     int64  `json:"t1_send"`
	Enqueue  int64  `json:"t2_enqueue"`
	Dequeue  int64  `json:"t3_dequeue"`
	Arrive   int64  `json:"t4_arrive"`
	Receive  int64  `json:"t5_receive"`
	Refused  string `json:"refused,omitempty"` // lanes: reason
	Dropped  bool   `json:"dropped,omitempty"` // lanes: admitted, dropped at release
}

// dlRun is one configuration's outcome.
type dlRun struct {
	Config  string                 `json:"config"`
	Records []dlRecord             `json:"-"`
	Stages  map[string]stageByFlow `json:"stages"`
	Counts  map[string]dlCounts    `json:"counts"`
	Notes   []string               `json:"notes,omitempty"`
}

type stageByFlow map[string][2]float64 // flow name -> {mean, max} µs

type dlCounts struct {
	Sent     int `json:"sent"`
	Refused  int `json:"refused"`
	Dropped  int `json:"dropped"`
	Lost     int `json:"lost"`
	Late     int `json:"late"` // arrived (kernel) after the deadline
	Misses   int `json:"misses"`
	Received int `json:"received"`
}

var dlStages = []string{"generation", "queue", "transmission", "delivery", "total"}

// The paper's tables 2 (proposed) and 3 (Linux default), µs, {A mean, A max, B mean, B max}.
var dlPaper = map[string]map[string][4]float64{
	"lanes": {
		"generation": {6.6, 31, 6.8, 31}, "queue": {2.8, 23, 2.8, 23}, "transmission": {99.4, 213, 102.0, 177},
		"delivery": {37.7, 928, 40.3, 158}, "total": {146.5, 999, 151.9, 306}},
	"default": {
		"generation": {10.3, 86, 10.5, 57}, "queue": {11582, 12317, 11464.7, 12311}, "transmission": {2660.7, 2957, 2574.1, 2848},
		"delivery": {51.8, 564, 42.4, 464}, "total": {14305.6, 15397, 14091.6, 15236}},
}

// dlBed is the two namespaces and their link.
type dlBed struct {
	t        *topo.Topology
	snd, rcv *topo.Node
	dst      netip.Addr
	rate     uint64
}

const (
	dlDevS = "dl0"
	dlDevR = "dl1"
)

func newDLBed(rate uint64) (_ *dlBed, err error) {
	t, err := topo.New()
	if err != nil {
		return nil, err
	}
	b := &dlBed{t: t, rate: rate}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if b.snd, err = t.AddNode("snd", ""); err != nil {
		return nil, err
	}
	if b.rcv, err = t.AddNode("rcv", ""); err != nil {
		return nil, err
	}
	b.dst = b.rcv.Addr
	addr := func(a netip.Addr) *netlink.Addr {
		return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(24, 32)}}
	}
	if err := b.snd.Do(func() error {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: dlDevS}, PeerName: dlDevR, PeerNamespace: netlink.NsFd(int(b.rcv.Handle))}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("veth: %w", err)
		}
		l, err := netlink.LinkByName(dlDevS)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, addr(b.snd.Addr)); err != nil {
			return err
		}
		// One segment per skb: a frame is the non-preemptible unit.
		if err := netlink.LinkSetGSOMaxSegs(l, 1); err != nil {
			return fmt.Errorf("gso_max_segs: %w", err)
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		return nil, err
	}
	if err := b.rcv.Do(func() error {
		l, err := netlink.LinkByName(dlDevR)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, addr(b.rcv.Addr)); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		return nil, err
	}
	return b, nil
}

// installFIFO puts the default-Linux stand-in on dl0: HTB at 0.95 R, one
// class, pfifo of limit packets.
func (b *dlBed) installFIFO(limit int) error {
	return b.snd.Do(func() error {
		l, err := netlink.LinkByName(dlDevS)
		if err != nil {
			return err
		}
		rate := b.rate * 95 / 100 / 8
		q := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
		q.Defcls = 1
		if err := netlink.QdiscReplace(q); err != nil {
			return fmt.Errorf("htb: %w", err)
		}
		c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.MakeHandle(1, 0), Handle: netlink.MakeHandle(1, 1)},
			netlink.HtbClassAttrs{Rate: rate * 8, Ceil: rate * 8, Buffer: uint32(max(rate/1000, 1600)), Cbuffer: uint32(max(rate/1000, 1600))})
		if err := netlink.ClassReplace(c); err != nil {
			return fmt.Errorf("htb class: %w", err)
		}
		// netlink has no pfifo options: the leaf with tc.
		if out, err := b.snd.Run("tc", "qdisc", "replace", "dev", dlDevS, "parent", "1:1", "handle", "10:", "pfifo", "limit", fmt.Sprint(limit)); err != nil {
			return fmt.Errorf("pfifo: %v: %s", err, out)
		}
		return nil
	})
}

func (b *dlBed) removeRoot() {
	_ = b.snd.Do(func() error {
		l, err := netlink.LinkByName(dlDevS)
		if err != nil {
			return err
		}
		return netlink.QdiscDel(&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)}, QdiscType: "htb"})
	})
}

// openLanes installs the lanes datapath (shaped at R) and starts a
// realtime lane whose trace fills rec; tune adjusts its configuration.
func (b *dlBed) openLanes(ctx context.Context, sock string, trace func(rtlane.Event), tune func(*rtlane.Config)) (func(), *rtlane.Lane, error) {
	var dp *datapath.Datapath
	if err := b.snd.Do(func() (err error) {
		dp, err = datapath.Open(datapath.Config{Interface: dlDevS, Mode: datapath.Shaped, UplinkBps: b.rate,
			Instance: "lab-dl-" + b.t.ID})
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("lanes datapath: %w", err)
	}
	cfg := rtlane.DefaultConfig()
	cfg.Enabled = true
	cfg.Socket = sock
	cfg.Rate = config.Rate(b.rate * 95 / 100)
	if tune != nil {
		tune(&cfg)
	}
	var l *rtlane.Lane
	if err := b.snd.Do(func() (err error) {
		l, err = rtlane.New(cfg, rtlane.WithTrace(trace), rtlane.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		return err
	}); err != nil {
		dp.Close()
		return nil, nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { l.Run(lctx); close(done) }()
	return func() { cancel(); <-done; l.Close(); dp.Close() }, l, nil
}

// dlBulkCC is the bulk TCP senders' congestion control, set on each socket.
const dlBulkCC = "cubic"

// startBulk runs n TCP connections snd -> rcv until stop is called.
func (b *dlBed) startBulk(n int) (stop func(), err error) {
	var ln net.Listener
	if err := b.rcv.Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(b.dst, 0).String())
		return err
	}); err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	done := make(chan struct{})
	for i := 0; i < n; i++ {
		var c net.Conn
		if err := b.snd.Do(func() (err error) {
			// CUBIC on the socket itself: the namespace's default may be
			// only what the machine allows (BBR here), and BBR's own pacing
			// and ProbeRTT would change the experiment
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error { return testbed.SetCC(rc, dlBulkCC) }}
			c, err = d.Dial("tcp4", ln.Addr().String())
			return err
		}); err != nil {
			close(done)
			ln.Close()
			return nil, err
		}
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}, nil
}

// startUDPBulk runs n unresponsive UDP senders snd -> rcv, each writing
// 1,400 B datagrams as fast as its socket buffer lets it (the qdisc keeps
// the socket's bytes charged until they leave, so the queue stays full
// without spinning), until stop is called.
func (b *dlBed) startUDPBulk(n int) (stop func(), err error) {
	var sink *net.UDPConn
	if err := b.rcv.Do(func() (err error) {
		sink, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(b.dst, 0)))
		return err
	}); err != nil {
		return nil, err
	}
	go io.Copy(io.Discard, sink)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var conns []*net.UDPConn
	for i := 0; i < n; i++ {
		var c *net.UDPConn
		if err := b.snd.Do(func() (err error) {
			c, err = net.DialUDP("udp4", nil, sink.LocalAddr().(*net.UDPAddr))
			return err
		}); err != nil {
			close(done)
			sink.Close()
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1400)
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := c.Write(buf); err != nil && errors.Is(err, net.ErrClosed) {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
		sink.Close()
	}, nil
}

// receiver collects arrivals in rcv until stop.
type dlReceiver struct {
	rx   *rtlane.Receiver
	mu   sync.Mutex
	got  map[[2]uint32][2]int64 // (flow, seq) -> {kernel, user}
	from map[netip.AddrPort]int // datagrams per source address
	done chan struct{}
	quit chan struct{}
}

func (b *dlBed) startReceiver(prio int) (*dlReceiver, error) {
	r := &dlReceiver{got: map[[2]uint32][2]int64{}, from: map[netip.AddrPort]int{}, done: make(chan struct{}), quit: make(chan struct{})}
	if err := b.rcv.Do(func() (err error) {
		r.rx, err = rtlane.ListenReceiver(netip.AddrPortFrom(b.dst, 0))
		return err
	}); err != nil {
		return nil, err
	}
	r.rx.SetTimeout(100 * time.Millisecond)
	go func() {
		defer close(r.done)
		setFIFO(prio)
		var ticked int64
		for {
			// The receiver stands for another host, yet it is a locked
			// goroutine of the lab's process: keep its schedtick fresh
			// (tick.go, a yield every 4 ms at most).
			ticked = schedtick.Fresh(ticked)
			a, err := r.rx.Read()
			if err != nil {
				// EAGAIN: timeout; EINTR: a signal (Go's preemption) ends a
				// read on a socket with SO_RCVTIMEO even with SA_RESTART.
				if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
					select {
					case <-r.quit:
						return
					default:
					}
					continue
				}
				return
			}
			if len(a.Payload) < 8 {
				continue
			}
			k := [2]uint32{binary.BigEndian.Uint32(a.Payload), binary.BigEndian.Uint32(a.Payload[4:])}
			r.mu.Lock()
			r.got[k] = [2]int64{a.Kernel, a.User}
			r.from[a.From]++
			r.mu.Unlock()
		}
	}()
	return r, nil
}

func (r *dlReceiver) stop() map[[2]uint32][2]int64 {
	time.Sleep(200 * time.Millisecond)
	close(r.quit)
	<-r.done
	r.rx.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

func dlPayload(buf []byte, flow, seq uint32) []byte {
	binary.BigEndian.PutUint32(buf, flow)
	binary.BigEndian.PutUint32(buf[4:], seq)
	return buf
}

// sender is how one configuration hands a datagram to the network; it
// returns the record with what it knows (t1, and for lanes the decision).
type dlSender interface {
	send(f dlFlow, seq uint32, buf []byte) dlRecord
	close()
}

// laneSender: through the realtime lane.
type laneSender struct {
	c   *rtclient.Client
	dst netip.AddrPort
	own *net.UDPConn // the client's own socket (--own-socket), attached
}

func (s *laneSender) send(f dlFlow, seq uint32, buf []byte) dlRecord {
	t1 := monoclock.Now()
	d := t1 + int64(f.Deadline)
	rec := dlRecord{Flow: f.ID, Seq: seq, Deadline: d, Send: t1}
	res, err := s.c.Send(f.ID, s.dst, d, dlPayload(buf, f.ID, seq))
	switch {
	case err != nil:
		rec.Refused = err.Error()
	case !res.Admitted:
		rec.Refused = res.Reason.String()
	}
	return rec
}
func (s *laneSender) close() {
	s.c.Close()
	if s.own != nil {
		s.own.Close()
	}
}

// attachOwn gives the sender a UDP socket of its own, connected to its
// destination (opened by open, in the sender's namespace), and attaches it.
func (s *laneSender) attachOwn(open func(func() error) error) error {
	if err := open(func() (err error) { s.own, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.dst)); return err }); err != nil {
		return err
	}
	_, err := s.c.Attach(s.own)
	return err
}

// udpSender: a plain UDP socket in snd (default Linux), optionally with a
// priority (the FIFO top class of the inversion scenario), with
// SO_TIMESTAMPING TX_SCHED + TX_SOFTWARE for points 2 and 3.
type udpSender struct {
	fd     int
	dst    unix.Sockaddr
	mu     sync.Mutex
	next   uint32
	keys   map[uint32][2]uint32 // tskey -> (flow, seq)
	offset int64
	txtime bool // connected, SO_TXTIME: the deadline rides in SCM_TXTIME (qdisc.go)
}

func (b *dlBed) newUDPSender(prio int) (*udpSender, error) {
	s := &udpSender{keys: map[uint32][2]uint32{}, dst: &unix.SockaddrInet4{Addr: b.dst.As4()}, offset: rtlane.RealtimeOffset()}
	err := b.snd.Do(func() (err error) {
		if s.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		flags := unix.SOF_TIMESTAMPING_TX_SCHED | unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE |
			unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY
		if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags); err != nil {
			return fmt.Errorf("SO_TIMESTAMPING: %w", err)
		}
		_ = unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		if prio != 0 {
			if err := unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_PRIORITY, prio); err != nil {
				return fmt.Errorf("SO_PRIORITY: %w", err)
			}
		}
		return nil
	})
	return s, err
}

func (s *udpSender) setPort(port int) { s.dst.(*unix.SockaddrInet4).Port = port }

func (s *udpSender) send(f dlFlow, seq uint32, buf []byte) dlRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	t1 := monoclock.Now()
	rec := dlRecord{Flow: f.ID, Seq: seq, Deadline: t1 + int64(f.Deadline), Send: t1}
	var err error
	if s.txtime {
		err = sendTxtime(s.fd, dlPayload(buf, f.ID, seq), rec.Deadline)
	} else {
		err = unix.Sendto(s.fd, dlPayload(buf, f.ID, seq), 0, s.dst)
	}
	if s.txtime && errors.Is(err, unix.ENOBUFS) {
		// The qdisc's refusal at enqueue: the datagram was built, so it
		// took a timestamp key.
		s.next++
		rec.Refused = "refused at enqueue (ENOBUFS)"
		return rec
	}
	if err != nil {
		rec.Refused = "send: " + err.Error()
		return rec
	}
	s.keys[s.next] = [2]uint32{f.ID, seq}
	s.next++
	return rec
}

// drain reads the error queue: (flow, seq) -> {sched, driver} CLOCK_MONOTONIC.
func (s *udpSender) drain() map[[2]uint32][2]int64 {
	out := map[[2]uint32][2]int64{}
	buf := make([]byte, 64)
	oob := make([]byte, 512)
	for {
		_, oobn, _, _, err := unix.Recvmsg(s.fd, buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		if err != nil {
			break
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		var ts int64
		var info, key uint32
		ok := false
		for _, m := range msgs {
			switch {
			case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPING && len(m.Data) >= 16:
				t := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
				ts = t.Nano() - s.offset
			case m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR && len(m.Data) >= 16:
				info = binary.NativeEndian.Uint32(m.Data[8:])
				key = binary.NativeEndian.Uint32(m.Data[12:])
				ok = true
			}
		}
		if !ok || ts == 0 {
			continue
		}
		fs, found := s.keys[key]
		if !found {
			continue
		}
		v := out[fs]
		switch info {
		case unix.SCM_TSTAMP_SCHED:
			v[0] = ts
		case unix.SCM_TSTAMP_SND:
			v[1] = ts
		}
		out[fs] = v
	}
	return out
}

func (s *udpSender) close() { unix.Close(s.fd) }

// runFlows runs the periodic senders for dur, each on its own thread at
// SCHED_FIFO prio, and returns their records.
func runFlows(ctx context.Context, flows []dlFlow, dur time.Duration, prio int, mk func() (dlSender, error)) ([]dlRecord, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var recs []dlRecord
	start := monoclock.Now()
	end := start + int64(dur)
	for _, f := range flows {
		s, err := mk()
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func(f dlFlow, s dlSender) {
			defer wg.Done()
			defer s.close()
			setFIFO(prio)
			buf := make([]byte, f.Size)
			var seq uint32
			var mine []dlRecord
			next := start + int64(f.Offset)
			sleepUntilMono(next)
			for next < end && ctx.Err() == nil {
				for i := 0; i < f.Burst; i++ {
					seq++
					mine = append(mine, s.send(f, seq, buf))
				}
				next += int64(f.Period)
				sleepUntilMono(next)
			}
			mu.Lock()
			recs = append(recs, mine...)
			mu.Unlock()
		}(f, s)
	}
	wg.Wait()
	return recs, ctx.Err()
}

// traceIndex collects the lane's enqueue/dequeue/drop times by (flow, seq).
type traceIndex struct {
	mu sync.Mutex             // called on the lane's realtime threads
	m  map[[2]uint32][3]int64 // admit, release, drop
}

func newTraceIndex() *traceIndex { return &traceIndex{m: make(map[[2]uint32][3]int64, 1<<15)} }

func (ti *traceIndex) add(e rtlane.Event) {
	ti.mu.Lock()
	k := [2]uint32{e.Flow, e.Seq}
	v := ti.m[k]
	switch e.Kind {
	case rtlane.EvAdmit:
		v[0] = e.Time
	case rtlane.EvRelease:
		v[1] = e.Time
	case rtlane.EvDrop:
		v[2] = e.Time
	}
	ti.m[k] = v
	ti.mu.Unlock()
}

// runConfig measures one configuration: "lanes", "default" or "fifo-top"
// (and the lanes variants of the daemon-path table).
func (b *dlBed) runConfig(ctx context.Context, env *testbed.Env, p dlParams, name string, flows []dlFlow, bulk int, dur time.Duration) (*dlRun, error) {
	run := &dlRun{Config: name}
	rx, err := b.startReceiver(p.prio)
	if err != nil {
		return nil, err
	}
	ti := newTraceIndex()
	snd, err := b.openSenders(ctx, p, name, rx.rx.Addr, ti)
	defer snd.close()
	if err != nil {
		rx.stop()
		return nil, err
	}
	var stopBulk func()
	if bulk > 0 {
		start := b.startBulk
		if p.bulkKind == "udp" {
			start = b.startUDPBulk
		}
		if stopBulk, err = start(bulk); err != nil {
			rx.stop()
			return nil, err
		}
		time.Sleep(500 * time.Millisecond) // let TCP fill the queue
	}
	// The lab's own bookkeeping (records, maps) allocates; a GC
	// stop-the-world waits for every thread of this process, normal-priority
	// ones included, and would stall the in-process lane (which itself
	// allocates nothing per datagram). Collect between runs, not during.
	runtime.GC()
	gc := debug.SetGCPercent(-1)
	var recs []dlRecord
	if strings.HasSuffix(name, "-proc") {
		// The client in its own process; one flow (the daemon path's).
		recs, err = b.runProcClient(ctx, snd.sock, rx.rx.Addr, flows[0], dur, p.prio, p.clientCPU, p.ownSocket)
	} else {
		recs, err = runFlows(ctx, flows, dur, p.prio, snd.mk)
	}
	debug.SetGCPercent(gc)
	if stopBulk != nil {
		stopBulk()
	}
	got := rx.stop()
	if strings.HasPrefix(name, "lanes") || name == "qdisc" {
		run.Notes = append(run.Notes, fmt.Sprintf("%s: the receiver saw the sources %v", name, rx.from))
	}
	if err != nil {
		return nil, err
	}
	if snd.lane != nil {
		snd.lane.SyncTrace()
	}
	if n := snd.stamp(name, recs, ti, got); !strings.HasPrefix(name, "lanes") && n == 0 {
		run.Notes = append(run.Notes, "no SO_TIMESTAMPING TX timestamps: queue and transmission merged")
	}
	run.Records = recs
	run.summarize(flows)
	if snd.qd != nil {
		refused := 0
		for _, c := range run.Counts {
			refused += c.Refused
		}
		run.Notes = append(run.Notes, qdiscNote(snd.qd, refused))
	}
	env.Printf("deadline: %-8s %s\n", name, run.countLine(flows))
	return run, nil
}

// dlSenders is how one configuration's flows send: through the lane's
// client socket (the lanes configurations) or plain UDP sockets, whose TX
// timestamps are drained after the run.
type dlSenders struct {
	mk      func() (dlSender, error)
	lane    *rtlane.Lane // the lanes configurations
	sock    string       // the lane's client socket
	udps    []*udpSender
	cleanup []func()
	// The kernel path (qdisc.go): the qdisc, and qdFlow puts a socket's
	// flow in its realtime lane.
	qd     *edfqdisc.Qdisc
	qdFlow func(src, dst netip.AddrPort) error
}

// close undoes what openSenders set up, last first.
func (s *dlSenders) close() {
	for i := len(s.cleanup) - 1; i >= 0; i-- {
		s.cleanup[i]()
	}
}

// openSenders sets up the configuration name's path to dst: the lanes
// tree and its deadline lane, the lanes tree alone (fifo-top: UDP in the
// realtime class), or the machine's default root (default: a FIFO).
func (b *dlBed) openSenders(ctx context.Context, p dlParams, name string, dst netip.AddrPort, ti *traceIndex) (*dlSenders, error) {
	s := &dlSenders{}
	switch name {
	case "lanes", "lanes-proc":
		if err := b.openLaneSenders(ctx, s, p, name, ti); err != nil {
			return s, err
		}
		s.mk = func() (dlSender, error) {
			c, err := rtclient.Dial(s.sock)
			if err != nil {
				return nil, err
			}
			ls := &laneSender{c: c, dst: dst}
			if p.ownSocket {
				if err := ls.attachOwn(b.snd.Do); err != nil {
					ls.close()
					return nil, fmt.Errorf("own socket: %w", err)
				}
			}
			return ls, nil
		}
		return s, nil
	case "fifo-top":
		// The lanes tree without the lane's EDF: the lane is started only
		// because openLanes brings both; nothing is sent through it.
		if err := b.openLaneSenders(ctx, s, p, "", ti); err != nil {
			return s, err
		}
	case "qdisc":
		if err := b.openQdisc(s); err != nil {
			return s, fmt.Errorf("kernel path: %w", err)
		}
		s.mk = func() (dlSender, error) {
			u, err := b.newTxtimeSender(dst, s.qdFlow)
			if err != nil {
				return nil, err
			}
			s.udps = append(s.udps, u)
			return &keepOpen{u}, nil
		}
		return s, nil
	case "default":
		if err := b.installFIFO(max(1000/p.scale, 10)); err != nil {
			return s, err
		}
		s.cleanup = append(s.cleanup, func() { b.removeRoot() })
	}
	prio := 0
	if name == "fifo-top" {
		prio = int(lane.Realtime.ClassID())
	}
	s.mk = func() (dlSender, error) {
		u, err := b.newUDPSender(prio)
		if err != nil {
			return nil, err
		}
		u.setPort(int(dst.Port()))
		s.udps = append(s.udps, u)
		return &keepOpen{u}, nil
	}
	return s, nil
}

// openLaneSenders starts the lanes tree and its deadline lane on a client
// socket in a fresh directory, tuned for the lanes variant name ("": the
// lane's defaults).
func (b *dlBed) openLaneSenders(ctx context.Context, s *dlSenders, p dlParams, name string, ti *traceIndex) error {
	dir, err := os.MkdirTemp("", "lanes-lab-dl")
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, func() { os.RemoveAll(dir) })
	s.sock = filepath.Join(dir, "rt.sock")
	var tune func(c *rtlane.Config)
	if name != "" {
		tune = func(c *rtlane.Config) {
			if p.lanePrio > 0 {
				c.ReleasePriority = p.lanePrio
			}
		}
	}
	closeLane, l, err := b.openLanes(ctx, s.sock, ti.add, tune)
	if err != nil {
		return err
	}
	s.cleanup = append(s.cleanup, closeLane)
	s.lane = l
	return nil
}

// stamp fills each record's enqueue and dequeue times (the lane's trace
// for the lanes configurations, the UDP sockets' TX timestamps otherwise)
// and its arrival, closes the UDP senders, and returns how many TX
// timestamps there were.
func (s *dlSenders) stamp(name string, recs []dlRecord, ti *traceIndex, got map[[2]uint32][2]int64) int {
	kts := map[[2]uint32][2]int64{}
	for _, u := range s.udps {
		for k, v := range u.drain() {
			kts[k] = v
		}
		u.close()
	}
	for i := range recs {
		r := &recs[i]
		k := [2]uint32{r.Flow, r.Seq}
		if strings.HasPrefix(name, "lanes") {
			ti.mu.Lock()
			v := ti.m[k]
			ti.mu.Unlock()
			r.Enqueue, r.Dequeue, r.Dropped = v[0], v[1], v[2] != 0
		} else if v, ok := kts[k]; ok {
			r.Enqueue, r.Dequeue = v[0], v[1]
		}
		if a, ok := got[k]; ok {
			r.Arrive, r.Receive = a[0], a[1]
		}
	}
	return len(kts)
}

// keepOpen closes a udpSender only after its timestamps were drained.
type keepOpen struct{ *udpSender }

func (keepOpen) close() {}

func (r *dlRun) summarize(flows []dlFlow) {
	r.Stages = map[string]stageByFlow{}
	r.Counts = map[string]dlCounts{}
	for _, st := range dlStages {
		r.Stages[st] = stageByFlow{}
	}
	for _, f := range flows {
		var c dlCounts
		vals := map[string][]float64{}
		for _, x := range r.Records {
			if x.Flow != f.ID {
				continue
			}
			c.Sent++
			switch {
			case x.Refused != "":
				c.Refused++
			case x.Dropped:
				c.Dropped++
			case x.Arrive == 0:
				c.Lost++
			default:
				c.Received++
				if x.Arrive > x.Deadline {
					c.Late++
				}
			}
			if x.Refused != "" || x.Dropped || x.Arrive == 0 {
				continue
			}
			us := func(a, b int64) float64 { return float64(b-a) / 1e3 }
			if x.Enqueue != 0 {
				vals["generation"] = append(vals["generation"], us(x.Send, x.Enqueue))
				if x.Dequeue != 0 {
					vals["queue"] = append(vals["queue"], us(x.Enqueue, x.Dequeue))
					vals["transmission"] = append(vals["transmission"], us(x.Dequeue, x.Arrive))
				}
			}
			vals["delivery"] = append(vals["delivery"], us(x.Arrive, x.Receive))
			vals["total"] = append(vals["total"], us(x.Send, x.Receive))
		}
		// A refusal is the paper's SIGURG: not sent, sender told at once.
		// A miss is a promise broken: accepted (or, without admission
		// control, sent) but dropped, lost or late.
		c.Misses = c.Dropped + c.Lost + c.Late
		r.Counts[f.Name] = c
		for _, st := range dlStages {
			v := vals[st]
			if len(v) == 0 {
				r.Stages[st][f.Name] = [2]float64{math.NaN(), math.NaN()}
				continue
			}
			var sum, mx float64
			for _, x := range v {
				sum += x
				mx = math.Max(mx, x)
			}
			r.Stages[st][f.Name] = [2]float64{sum / float64(len(v)), mx}
		}
	}
}

func (r *dlRun) countLine(flows []dlFlow) string {
	s := ""
	for _, f := range flows {
		c := r.Counts[f.Name]
		s += fmt.Sprintf(" %s: %d sent, %d refused, %d dropped, %d lost, %d late;", f.Name, c.Sent, c.Refused, c.Dropped, c.Lost, c.Late)
	}
	return s
}

func fmtUS(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// stageTable is the paper's table 2 or 3 with its numbers beside ours.
func stageTable(title string, r *dlRun, paper map[string][4]float64) testbed.Table {
	t := testbed.Table{Title: title, Columns: []string{"stage (µs)", "A mean", "A max", "B mean", "B max", "paper A mean", "paper A max", "paper B mean", "paper B max"}}
	for _, st := range dlStages {
		a, b := r.Stages[st]["A"], r.Stages[st]["B"]
		row := []string{st, fmtUS(a[0]), fmtUS(a[1]), fmtUS(b[0]), fmtUS(b[1])}
		pp := paper[st]
		for _, v := range pp {
			row = append(row, fmtUS(v))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func countTable(title string, runs []*dlRun, flows []dlFlow) testbed.Table {
	t := testbed.Table{Title: title, Columns: []string{"config", "flow", "sent", "refused", "dropped", "lost", "late", "misses", "miss %", "refused+missed %"}}
	for _, r := range runs {
		for _, f := range flows {
			c := r.Counts[f.Name]
			pct, all := 0.0, 0.0
			if c.Sent > 0 {
				pct = 100 * float64(c.Misses) / float64(c.Sent)
				all = 100 * float64(c.Misses+c.Refused) / float64(c.Sent)
			}
			t.Rows = append(t.Rows, []string{r.Config, f.Name, fmt.Sprint(c.Sent), fmt.Sprint(c.Refused), fmt.Sprint(c.Dropped),
				fmt.Sprint(c.Lost), fmt.Sprint(c.Late), fmt.Sprint(c.Misses), fmt.Sprintf("%.2f", pct), fmt.Sprintf("%.2f", all)})
		}
	}
	return t
}

func runDeadline(ctx context.Context, env *testbed.Env, p dlParams) (*testbed.Result, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("deadline: needs root (namespaces, qdiscs)")
	}
	start := time.Now()
	loadStart := testbed.ReadTrim("/proc/loadavg")
	b, err := newDLBed(p.rate)
	if err != nil {
		return nil, fmt.Errorf("deadline: testbed: %w", err)
	}
	defer b.t.Close()
	res := &testbed.Result{Experiment: "deadline", Started: start, Params: map[string]any{
		"rate": config.Rate(p.rate).String(), "scale": p.scale, "duration_per_config": p.dur.String(),
		"bulk": p.bulk, "bulk_kind": p.bulkKind, "bulk_tcp_cc": dlBulkCC, "rt_priority": p.prio, "client_cpu": p.clientCPU}}
	res.Notes = append(res.Notes,
		"the lane runs inside the lab process; Go's GC is held off during each measured run (the lab's bookkeeping allocates, the lane does not per datagram)",
		"one machine, one CLOCK_MONOTONIC: no drift correction; lanes stages (2)/(3) are the daemon's admission and release, default ones the socket's TX_SCHED/TX_SOFTWARE timestamps",
		"refused = the admission test said no at once (the paper's SIGURG); a miss = a datagram accepted (lanes) or sent (default) that was dropped at release, lost, or arrived (receiver kernel timestamp) after its deadline")

	if !p.pathOnly {
		if err := runDeadlineTables(ctx, env, b, p, res); err != nil {
			return nil, err
		}
	}
	if err := runDaemonPath(ctx, env, b, p, res); err != nil {
		return nil, err
	}
	if p.sweep {
		st, best, err := b.sweep(ctx, env, p)
		if err != nil {
			return nil, err
		}
		res.Tables = append(res.Tables, st)
		res.Notes = append(res.Notes, fmt.Sprintf("largest realtime rate with zero misses (and <= 1%% refused): %d datagrams/s", best))
	}
	res.Notes = append(res.Notes, "load average at start: "+loadStart+", at end: "+testbed.ReadTrim("/proc/loadavg")+
		" (other tasks on this machine delay softirq and ksoftirqd, which carry the shaped link's dequeues; they show as transmission and delivery maxima)")
	res.Environment = testbed.CaptureEnvironment(b.t, env, map[string]string{"egress": dlDevS, "gso_max_segs": "1"})
	res.Duration = time.Since(start)
	return res, nil
}

// paperFlows are the paper's flows A and B (table 1), their packets per
// period divided by scale.
func paperFlows(scale int) []dlFlow {
	per := func(n int) int { return max(1, int(math.Round(float64(n)/float64(scale)))) }
	return []dlFlow{
		{ID: 1, Name: "A", Deadline: 10 * time.Millisecond, Burst: per(30), Period: 3 * time.Millisecond, Size: 1400},
		{ID: 2, Name: "B", Deadline: time.Millisecond, Burst: per(10), Period: 3 * time.Millisecond, Size: 1400},
	}
}

// runDeadlineTables runs the paper's tables 2 and 3, the kernel path
// paired with the daemon path (where the kernel has a BPF qdisc) and the
// inversion scenario.
func runDeadlineTables(ctx context.Context, env *testbed.Env, b *dlBed, p dlParams, res *testbed.Result) error {
	flows := paperFlows(p.scale)
	res.Notes = append(res.Notes,
		fmt.Sprintf("link %s (paper 1 Gbit/s); flow A %d x 1400 B / 3 ms, 10 ms deadline; flow B %d x 1400 B / 3 ms, 1 ms deadline (paper: 30 and 10); default FIFO %d packets (paper: txqueuelen 1000)",
			config.Rate(p.rate), flows[0].Burst, flows[1].Burst, max(1000/p.scale, 10)))
	var runs []*dlRun
	cfgs := []string{"lanes", "default"}
	if p.qdisc {
		if why := qdiscSkip(); why != "" {
			res.Notes = append(res.Notes, "kernel path (qdisc) skipped: "+why)
		} else {
			cfgs = append(cfgs, "qdisc")
		}
	}
	byName := map[string]*dlRun{}
	for _, cfg := range cfgs {
		env.Printf("deadline: %s, %d bulk %s senders, %v...\n", cfg, p.bulk, p.bulkKind, p.dur)
		r, err := b.runConfig(ctx, env, p, cfg, flows, p.bulk, p.dur)
		if err != nil {
			return fmt.Errorf("deadline: %s: %w", cfg, err)
		}
		runs = append(runs, r)
		byName[cfg] = r
		res.Notes = append(res.Notes, r.Notes...)
	}
	res.Tables = append(res.Tables,
		stageTable("lanes realtime lane, data path in lanes-rtd (paper table 2: proposed qdisc)", byName["lanes"], dlPaper["lanes"]),
		stageTable("default Linux, one FIFO (paper table 3)", byName["default"], dlPaper["default"]),
		countTable("deadline misses under bulk traffic", runs, flows))
	if r := byName["qdisc"]; r != nil {
		res.Tables = append(res.Tables,
			stageTable("kernel path: EDF BPF qdisc at the root, SO_TXTIME on each flow's own UDP socket (queue = TX_SCHED -> TX_SOFTWARE)", r, dlPaper["lanes"]),
			pairTable("kernel path (EDF BPF qdisc, SO_TXTIME on the application's socket) ÷ daemon path (rtlane), same flows, bulk and schedule, flows A and B together",
				"daemon", "qdisc", byName["lanes"], r, pairMeasures))
	}

	// Inversion: loose bursts queued ahead of tight packets.
	txFrame := time.Duration(1442 * 8 * 1e9 / (0.95 * float64(p.rate))) // at the tree's rate
	looseN := 40
	tight := time.Duration(float64(looseN) * float64(txFrame) / 2.5)
	inv := []dlFlow{
		{ID: 3, Name: "loose", Deadline: 50 * time.Millisecond, Burst: looseN, Period: 20 * time.Millisecond, Size: 1400},
		{ID: 4, Name: "tight", Deadline: tight, Burst: 1, Period: 20 * time.Millisecond, Size: 1400, Offset: time.Millisecond},
	}
	res.Notes = append(res.Notes, fmt.Sprintf("inversion: every 20 ms a burst of %d loose datagrams (50 ms deadline, %v on the wire together) and one tight datagram 1 ms later (%v deadline), bulk traffic as above (without it HTB's token bucket lets the burst out at once)",
		looseN, time.Duration(looseN)*txFrame, tight.Round(time.Microsecond)))
	var invRuns []*dlRun
	for _, cfg := range []string{"lanes", "fifo-top"} {
		env.Printf("deadline: inversion, %s...\n", cfg)
		r, err := b.runConfig(ctx, env, p, cfg, inv, p.bulk, max(p.dur/3, 2*time.Second))
		if err != nil {
			return fmt.Errorf("deadline: inversion %s: %w", cfg, err)
		}
		invRuns = append(invRuns, r)
	}
	invRuns[0].Config = "lanes EDF"
	invRuns[1].Config = "FIFO top class"
	res.Tables = append(res.Tables, countTable("inversion: EDF vs a FIFO top class", invRuns, inv))
	res.Data = map[string]any{"flows": flows, "runs": runs, "inversion": invRuns}
	return nil
}

// runDaemonPath measures the added latency of the daemon path.
//
// Daemon path: idle link, client send call -> receiver kernel timestamp;
// with and without direct release, beside a direct send and beside
// cyclictest at the lane's priority for as long (what one RT thread
// wake-up costs on this machine at this moment).
func runDaemonPath(ctx context.Context, env *testbed.Env, b *dlBed, p dlParams, res *testbed.Result) error {
	path := []dlFlow{{ID: 5, Name: "P", Deadline: 5 * time.Millisecond, Burst: 1, Period: time.Millisecond, Size: 200}}
	pt := testbed.Table{Title: "added latency of the daemon path (idle link, 200 B every 1 ms): send call -> receiver kernel; p50/p99 of its stages: (1) send call -> admission (lanes: the client's write, lanes-rtd's wake-up, the read), (2) -> release (admission, EDF, pacing), (3) -> receiver kernel (sendto, qdisc, veth, receive softirq); for the direct send (2)/(3) are the socket's TX_SCHED/TX_SOFTWARE timestamps",
		Columns: []string{"path", "n", "p50 µs", "p99 µs", "max µs", "(1) p50/p99", "(2) p50/p99", "(3) p50/p99"}}
	pathDur := max(p.dur/3, 2*time.Second)
	if p.pathDur > 0 {
		pathDur = p.pathDur
	}
	// Every path and the reference measure under the same CPU idle
	// policy: cyclictest holds PM QoS by default, and a woken thread on an
	// idle CPU otherwise pays the idle state's exit (in a VM, a halted
	// vCPU's) on top of the path.
	pm, err := pmqos.Hold(p.pmLatency)
	if err != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("daemon path: --pm-latency %d not held (%v): measured with the idle states left alone", p.pmLatency, err))
		p.pmLatency = -1
	}
	defer pm.Close()
	pathCfgs := daemonPathConfigs(p)
	if p.cpuLoad > 0 {
		load, err := latency.StartCPULoad(p.cpuLoad, time.Duration(len(pathCfgs)+1)*(pathDur+10*time.Second))
		if err != nil {
			return fmt.Errorf("deadline: %w", err)
		}
		defer load.Stop()
	}
	names := daemonPathNames(p)
	p50s, p99s := map[string]float64{}, map[string]float64{}
	for _, cfg := range pathCfgs {
		r, err := b.runConfig(ctx, env, p, cfg, path, 0, pathDur)
		if err != nil {
			return fmt.Errorf("deadline: path %s: %w", cfg, err)
		}
		res.Notes = append(res.Notes, r.Notes...)
		row, p50, p99, ok := daemonPathRow(names[cfg], r.Records)
		if ok {
			p50s[cfg], p99s[cfg] = p50, p99
			pt.Rows = append(pt.Rows, row)
		}
	}
	for _, cfg := range pathCfgs[:len(pathCfgs)-1] {
		pt.Rows = append(pt.Rows, []string{"added (difference to the direct send), " + cfg, "", fmtUS(p50s[cfg] - p50s["fifo-top"]),
			fmtUS(p99s[cfg] - p99s["fifo-top"]), "", "", "", ""})
	}
	relPrio := rtlane.DefaultConfig().ReleasePriority
	if p.lanePrio > 0 {
		relPrio = p.lanePrio
	}
	env.Printf("deadline: cyclictest at SCHED_FIFO %d, %v...\n", relPrio, pathDur)
	ct, err := latency.RunCyclictest(latency.Config{Period: time.Millisecond, Duration: pathDur, Policy: "fifo", Priority: relPrio, Threads: 1, PMLatency: p.pmLatency}, nil)
	if err != nil {
		res.Notes = append(res.Notes, "cyclictest reference not run: "+err.Error())
	} else {
		s := ct.All
		pt.Rows = append(pt.Rows, []string{fmt.Sprintf("reference: cyclictest -p %d -i 1000, one RT thread wake-up", relPrio), strconv.Itoa(s.Samples),
			fmtUS(s.P50US), fmtUS(s.P99US), fmtUS(s.MaxUS), "", "", ""})
	}
	pm.Close()
	pt.Title += fmt.Sprintf("; CPU wake-up latency held (PM QoS): %s; the lane's threads at SCHED_FIFO %d, the senders and the receiver at %d; %d busy workers at normal priority", pmString(p.pmLatency), relPrio, p.prio, p.cpuLoad)
	res.Tables = append(res.Tables, pt)
	return nil
}

// daemonPathConfigs are the paths the flags ask for, the direct send
// (fifo-top, the reference) last.
func daemonPathConfigs(p dlParams) []string {
	var cfgs []string
	for _, c := range dlPathConfigs {
		if p.paths != nil && slices.Contains(p.paths, c) ||
			p.paths == nil && (p.procClient || !strings.HasSuffix(c, "-proc")) {
			cfgs = append(cfgs, c)
		}
	}
	return append(cfgs, "fifo-top")
}

// daemonPathNames are the rows' names of the daemon-path table.
func daemonPathNames(p dlParams) map[string]string {
	return map[string]string{"lanes": "lanes daemon path (rtclient -> lanes-rtd -> 1:11)",
		"lanes-proc": "lanes daemon path, client in its own process",
		"fifo-top":   "direct UDP send with SO_PRIORITY 1:11"}
}

// daemonPathRow is one path's row: the send-to-arrival latency's count,
// p50, p99 and maximum, and p50/p99 of each of its three stages; ok is
// false when no datagram arrived.
func daemonPathRow(name string, recs []dlRecord) (row []string, p50, p99 float64, ok bool) {
	var v []float64
	var st [3][]float64
	for _, x := range recs {
		if x.Arrive == 0 {
			continue
		}
		v = append(v, float64(x.Arrive-x.Send)/1e3)
		if x.Enqueue != 0 && x.Dequeue != 0 {
			st[0] = append(st[0], float64(x.Enqueue-x.Send)/1e3)
			st[1] = append(st[1], float64(x.Dequeue-x.Enqueue)/1e3)
			st[2] = append(st[2], float64(x.Arrive-x.Dequeue)/1e3)
		}
	}
	if len(v) == 0 {
		return nil, 0, 0, false
	}
	sort.Float64s(v)
	p50, p99 = testbed.Percentile(v, 50), testbed.Percentile(v, 99)
	row = []string{name, fmt.Sprint(len(v)), fmtUS(p50), fmtUS(p99), fmtUS(v[len(v)-1])}
	for _, sv := range st {
		sort.Float64s(sv)
		if len(sv) == 0 {
			row = append(row, "")
			continue
		}
		row = append(row, fmtUS(testbed.Percentile(sv, 50))+" / "+fmtUS(testbed.Percentile(sv, 99)))
	}
	return row, p50, p99, true
}

// pmString says which PM QoS wake-up latency a run held.
func pmString(us int) string {
	if us < 0 {
		return "none (idle states left alone)"
	}
	return fmt.Sprintf("%d µs, for every path and cyclictest alike", us)
}

// sweep raises the realtime rate (4 client connections, 200 B datagrams,
// 2 ms deadline, unshaped link in device-bottleneck terms: the lane's
// rate is 1 Gbit/s) until a step has a miss.
func (b *dlBed) sweep(ctx context.Context, env *testbed.Env, p dlParams) (testbed.Table, int, error) {
	t := testbed.Table{Title: "realtime rate sweep (lanes, 4 clients, 200 B, 2 ms deadline, 1 s per step; stops at the first miss or >1% refused)", Columns: []string{"offered/s", "achieved/s", "refused", "dropped", "lost", "late"}}
	best := 0
	saved := b.rate
	b.rate = 1_000_000_000
	defer func() { b.rate = saved }()
	for _, rate := range []int{1000, 2000, 3000, 4000, 5000, 7000, 10000, 15000, 20000} {
		const clients = 4
		per := time.Duration(float64(time.Second) * clients / float64(rate))
		var flows []dlFlow
		for i := 0; i < clients; i++ {
			flows = append(flows, dlFlow{ID: uint32(10 + i), Name: fmt.Sprint("c", i), Deadline: 2 * time.Millisecond, Burst: 1, Period: per, Size: 200})
		}
		r, err := b.runConfig(ctx, env, p, "lanes", flows, 0, time.Second)
		if err != nil {
			return t, best, err
		}
		var c dlCounts
		for _, f := range flows {
			x := r.Counts[f.Name]
			c.Sent += x.Sent
			c.Refused += x.Refused
			c.Dropped += x.Dropped
			c.Lost += x.Lost
			c.Late += x.Late
			c.Received += x.Received
		}
		t.Rows = append(t.Rows, []string{fmt.Sprint(rate), fmt.Sprint(c.Sent), fmt.Sprint(c.Refused), fmt.Sprint(c.Dropped), fmt.Sprint(c.Lost), fmt.Sprint(c.Late)})
		miss := c.Dropped + c.Lost + c.Late
		if miss > 0 || c.Refused > c.Sent/100 || c.Sent < rate*9/10 {
			break
		}
		best = c.Sent
	}
	return t, best, nil
}
