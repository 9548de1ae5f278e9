// Package deadline holds experiment deadline: realtime datagrams with
// deadlines through lanes' realtime lane against default Linux.
//
// deadline.go: experiment `deadline`, docs/papers.md §003 tables 1–3 — realtime
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
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lab/testbed"
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
			qd := fs.Bool("qdisc", true, "tables 2/3 also run the kernel path, paired with the daemon path: the EDF BPF qdisc (Linux 6.16+) at the root of the sender's egress and SO_TXTIME on each flow's own UDP socket; skipped, with the reason, where the kernel has no BPF qdisc")
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
	if name == "lanes" {
		run.Notes = append(run.Notes, residenceNote(run, flows))
	}
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
