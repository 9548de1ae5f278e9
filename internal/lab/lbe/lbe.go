// Package lbe holds the low-priority background experiments: lbe,
// lbe-overhead, lbe-feedback (the LW-LBE paper's figures), lbe-remote (a
// remote bottleneck) and lbe-switch (the cost of a task switch).
//
// lbe.go: the LW-LBE paper's evaluation (docs/papers.md §000, figures 6–12).
//
//	phone ──[W-CDMA trace up, delay, device queue]──► router ──► fg server (HTTP)
//	      ◄─[W-CDMA trace down, delay, 100 pkts]───        └──► bg server (sink)
//
// Foreground: one HTTP GET (download) or POST (upload) of N KB on a fresh
// connection, by a separate client process in the phone. Background: a
// separate process in the phone uploading dummy data continuously (nice 19,
// the paper's static priority 139). Methods:
//
//	1 no background, 8 KB device queue
//	2 background without LBE, 8 KB
//	3 task-based LBE, 1.5 KB: a user-space task serves two queues strictly by
//	  priority (flows registered by 3-tuple) into the device queue (emu.Prioritiser)
//	4 lanes background lane, 1.5 KB (lanes daemon in the phone, `lanes run`)
//	5 pfifo_fast bands chosen by SO_PRIORITY (bg socket priority 1 = band 2), 1.5 KB
//	6 lanes, 8 KB
//
// Device queue: methods 1, 2, 4, 5, 6 get it from the host-side gate (the
// emulated device queue as a token bucket in the phone's root qdisc, see
// topo.Gate; for lanes, the daemon's root class is driven the same way);
// method 3's prioritiser feeds the emulator's device queue directly and
// waits while it is full.
//
// CPU per transfer: the phone's tasks (the foreground client's own
// user+system time from getrusage, the background uploader's from
// /proc/PID/stat, for method 3 the priority task's thread, for methods 4
// and 6 the lanes daemon's process) over the transfer; the machine's softirq time is reported beside it. The emulator's
// own CPU is not counted (except method 3's priority task, which stands for
// phone code).
package lbe

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net/netip"
	"strconv"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

// LBEMethod is one of the paper's methods.
type LBEMethod struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	BG    bool   `json:"background"`
	Queue int    `json:"device_queue_bytes"`
	Kind  string `json:"kind"` // gate, task, pfifo_fast, lanes
}

// LBEMethods are methods 1–6.
var LBEMethods = []LBEMethod{
	{"1", "no background, 8 KB", false, 8192, "gate"},
	{"2", "background, no LBE, 8 KB", true, 8192, "gate"},
	{"3", "task-based LBE, 1.5 KB", true, 1500, "task"},
	{"4", "lanes background lane, 1.5 KB", true, 1500, "lanes"},
	{"5", "pfifo_fast + SO_PRIORITY, 1.5 KB", true, 1500, "pfifo_fast"},
	{"6", "lanes, 8 KB", true, 8192, "lanes"},
}

// overheadMethods are figures 11–12's: no background, 8 KB vs 1.5 KB.
var overheadMethods = []LBEMethod{
	{"1", "no background, 8 KB", false, 8192, "gate"},
	{"1s", "no background, 1.5 KB", false, 1500, "gate"},
}

// LBEConfig configures a run.
type LBEConfig struct {
	Methods          []LBEMethod   `json:"methods"`
	SizesKB          []int         `json:"sizes_kb"`
	Dirs             []string      `json:"directions"` // download, upload
	Reps             int           `json:"repetitions"`
	UpTrace          string        `json:"up_trace,omitempty"`
	DownTrace        string        `json:"down_trace,omitempty"`
	UpRate           float64       `json:"up_rate_bps,omitempty"` // used when UpTrace is empty
	DownRate         float64       `json:"down_rate_bps,omitempty"`
	Delay            time.Duration `json:"one_way_delay_ns"`
	DownQueuePackets int           `json:"down_queue_packets"`
	Warmup           time.Duration `json:"warmup_ns"`
	Pause            time.Duration `json:"pause_ns"`
	// Slot > 0: transfer i starts at warmup + i x slot into the phone's
	// links, the same offset for every method (paired: each method meets
	// the same stretch of trace); 0: one after another, pause between.
	Slot  time.Duration `json:"slot_ns,omitempty"`
	CC    string        `json:"congestion_control"`
	Seed  int64         `json:"seed"`
	Lanes string        `json:"lanes_binary,omitempty"` // for methods 4 and 6
	// Failed lists lanes methods whose daemon would not start (RunLBE
	// skips them for the rest of the run instead of failing it).
	Failed map[string]string `json:"failed_methods,omitempty"`
}

// LBETrial is one foreground transfer.
type LBETrial struct {
	Method    string  `json:"method"`
	Dir       string  `json:"dir"`
	SizeKB    int     `json:"size_kb"`
	Round     int     `json:"round"`
	Seconds   float64 `json:"seconds"`
	CPUms     float64 `json:"cpu_ms"`         // phone tasks
	DaemonMs  float64 `json:"daemon_cpu_ms"`  // of CPUms, the lanes daemon's (methods 4 and 6)
	SoftirqMs float64 `json:"softirq_ms"`     // whole machine
	Offset    float64 `json:"offset_s"`       // start, from the links' start
	Late      bool    `json:"late,omitempty"` // --slot: the previous transfer overran its slot
	Error     string  `json:"error,omitempty"`
}

// gateSlack is extra room in the emulator's queue behind a host gate: the
// gate follows the link in steps, and what it lets through beyond the
// device queue waits in the TUN's ring (the reader takes a packet only
// while the emulator's queue is below its limit), see docs/lab.md.
const gateSlack = 3000

func (c *LBEConfig) linkConfigs() (up, down emu.LinkConfig, err error) {
	up = emu.LinkConfig{Rate: c.UpRate, Delay: c.Delay}
	down = emu.LinkConfig{Rate: c.DownRate, Delay: c.Delay, QueuePackets: c.DownQueuePackets}
	if c.UpTrace != "" {
		if up.Trace, err = testbed.LoadTrace(c.UpTrace); err != nil {
			return
		}
	}
	if c.DownTrace != "" {
		if down.Trace, err = testbed.LoadTrace(c.DownTrace); err != nil {
			return
		}
	}
	if up.Unlimited() || down.Unlimited() {
		err = errors.New("the phone's links need a rate or a trace in both directions")
	}
	return
}

// lbeBed is one method's testbed with its servers and background running.
type lbeBed struct {
	bed    *testbed.Bed
	phone  *topo.Node
	fgURL  string
	bulk   *topo.Proc
	prio   *emu.Prioritiser
	bgFlow emu.FlowKey
	up     *emu.Link
	meter  *flowMeter
	daemon *topo.Proc // methods 4 and 6: phone code, its CPU counts
}

func (b *lbeBed) Close() error { return b.bed.Close() }

// newLBEBed builds the topology for method m and starts its background.
func newLBEBed(ctx context.Context, env *testbed.Env, c *LBEConfig, m LBEMethod) (_ *lbeBed, err error) {
	upCfg, downCfg, err := c.linkConfigs()
	if err != nil {
		return nil, err
	}
	bed, err := testbed.NewBed(env, c.CC)
	if err != nil {
		return nil, err
	}
	lb := &lbeBed{bed: bed}
	defer func() {
		if err != nil {
			bed.Close()
		}
	}()
	opts, err := lb.phoneOpts(m, &upCfg)
	if err != nil {
		return nil, err
	}
	lb.up = bed.Emu.NewUplink(upCfg)
	phone, err := bed.AddHost("phone", c.CC, lb.up, bed.Emu.NewDownlink(downCfg), opts)
	if err != nil {
		return nil, err
	}
	lb.phone = phone
	var srv [2]*topo.Node
	for i, name := range []string{"fgsrv", "bgsrv"} {
		if srv[i], err = bed.AddHost(name, c.CC, bed.Emu.NewUplink(emu.LinkConfig{}), bed.Emu.NewDownlink(emu.LinkConfig{}), testbed.HostOpts{}); err != nil {
			return nil, err
		}
	}
	if m.Kind == "lanes" {
		if lb.daemon, err = startLanes(ctx, env, c, m, bed, phone); err != nil {
			return nil, err
		}
	}
	lb.meter = &flowMeter{src: phone.Addr}
	bed.Emu.OnUp = lb.meter.see
	bed.Start(ctx)
	for _, s := range srv {
		p, err := s.Start("serve", "--listen", ":80")
		if err != nil {
			return nil, err
		}
		if l, err := p.Line(ctx, 15*time.Second); err != nil || l != "ready" {
			return nil, fmt.Errorf("server in %s: %q %v", s.Name, l, err)
		}
	}
	lb.fgURL = "http://" + srv[0].Addr.String() + ":80"
	if !m.BG {
		return lb, nil
	}
	if err := lb.startBackground(ctx, c, m, "http://"+srv[1].Addr.String()+":80"); err != nil {
		return nil, err
	}
	return lb, nil
}

// phoneOpts are the phone's host options for method m, which also sets the
// uplink's queue (up).
func (lb *lbeBed) phoneOpts(m LBEMethod, up *emu.LinkConfig) (testbed.HostOpts, error) {
	opts := testbed.HostOpts{TxQueueLen: 1000, BackPressure: true}
	switch m.Kind {
	case "gate":
		up.QueueBytes = m.Queue + gateSlack
		opts.Gate = &testbed.GateSpec{Burst: m.Queue, Leaf: "pfifo", Limit: 1000}
	case "pfifo_fast":
		up.QueueBytes = m.Queue + gateSlack
		opts.Gate = &testbed.GateSpec{Burst: m.Queue, Leaf: "pfifo_fast"}
	case "task":
		up.QueueBytes = m.Queue
		lb.prio = emu.NewPrioritiser()
		opts.Prio = lb.prio
	case "lanes":
		up.QueueBytes = m.Queue + gateSlack
	default:
		return opts, fmt.Errorf("unknown method kind %q", m.Kind)
	}
	return opts, nil
}

// startBackground starts the phone's background upload to bgURL (through
// `lanes run --lane background` for the lanes methods, at SO_PRIORITY
// filler for pfifo_fast) and registers its flow with the meter and the
// paper's prioritiser.
func (lb *lbeBed) startBackground(ctx context.Context, c *LBEConfig, m LBEMethod, bgURL string) error {
	args := []string{"bulk", "--url", bgURL, "--nice", "19"}
	if m.Kind == "pfifo_fast" {
		args = append(args, "--prio", "1") // TC_PRIO_FILLER -> pfifo_fast band 2
	}
	var err error
	if m.Kind == "lanes" {
		lb.bulk, err = lb.phone.StartCommand(c.Lanes, append([]string{"run", "--lane", "background", "--socket", lanesSocket(lb.bed), "--",
			c.Lanes, "lab", "helper"}, args...)...)
	} else {
		lb.bulk, err = lb.phone.Start(args...)
	}
	if err != nil {
		return err
	}
	l, err := lb.bulk.Line(ctx, 30*time.Second)
	if err != nil {
		return fmt.Errorf("background uploader: %w", err)
	}
	var hello testbed.BulkHello
	if err := json.Unmarshal([]byte(l), &hello); err != nil {
		return fmt.Errorf("background uploader said %q", l)
	}
	src, err1 := netip.ParseAddrPort(hello.Src)
	dst, err2 := netip.ParseAddrPort(hello.Dst)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("background uploader addresses %q", l)
	}
	lb.bgFlow = emu.FlowKey{Dst: dst, Sport: src.Port()}
	lb.meter.setBG(lb.bgFlow)
	if lb.prio != nil {
		lb.prio.Register(lb.bgFlow) // the paper's registration
	}
	return nil
}

// transfer runs one foreground GET or POST and measures it.
func (lb *lbeBed) transfer(ctx context.Context, dir string, sizeKB int) (LBETrial, error) {
	tr := LBETrial{Dir: dir, SizeKB: sizeKB}
	var bulk0, prio0, daemon0 time.Duration
	if lb.bulk != nil {
		bulk0 = emu.ProcCPU(lb.bulk.Pid())
	}
	if lb.daemon != nil {
		daemon0 = emu.ProcCPU(lb.daemon.Pid())
	}
	if lb.prio != nil {
		prio0 = lb.prio.ThreadCPU()
	}
	sirq0 := emu.SoftirqTime()
	res, err := foregroundTransfer(ctx, lb.phone, dir, lb.fgURL, sizeKB)
	if err != nil {
		return tr, err
	}
	tr.Seconds = res.Seconds
	tr.Error = res.Error
	cpu := time.Duration(res.CPUNs)
	if lb.bulk != nil {
		cpu += emu.ProcCPU(lb.bulk.Pid()) - bulk0
	}
	if lb.prio != nil {
		cpu += lb.prio.ThreadCPU() - prio0
	}
	if lb.daemon != nil {
		dcpu := emu.ProcCPU(lb.daemon.Pid()) - daemon0
		cpu += dcpu
		tr.DaemonMs = float64(dcpu) / 1e6
	}
	tr.CPUms = float64(cpu) / 1e6
	tr.SoftirqMs = float64(emu.SoftirqTime()-sirq0) / 1e6
	return tr, nil
}

type lbePair struct {
	dir  string
	size int
}

// RunLBE runs every method, size and direction Reps times (methods in a
// new random order each round; transfers in a new random order each round,
// the same for every method of the round) and returns every trial.
func RunLBE(ctx context.Context, env *testbed.Env, c *LBEConfig) ([]LBETrial, map[string]*testbed.Environment, error) {
	rng := rand.New(rand.NewSource(c.Seed))
	var pairs []lbePair
	for _, d := range c.Dirs {
		for _, s := range c.SizesKB {
			pairs = append(pairs, lbePair{d, s})
		}
	}
	envs := map[string]*testbed.Environment{}
	var trials []LBETrial
	prog := env.NewProgress(c.Reps * len(c.Methods))
	for round := 0; round < c.Reps; round++ {
		order := rng.Perm(len(c.Methods))
		// One transfer order per round, the same for every method: each
		// testbed starts its traces at 0, so a transfer meets the same
		// stretch of trace under every method (paired comparison).
		ps := append([]lbePair(nil), pairs...)
		rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		for _, mi := range order {
			m := c.Methods[mi]
			if _, failed := c.Failed[m.ID]; failed {
				continue
			}
			prog.Step("round %d/%d method %s (%s)", round+1, c.Reps, m.ID, m.Name)
			lb, err := newLBEBed(ctx, env, c, m)
			if err != nil && m.Kind == "lanes" && ctx.Err() == nil {
				// The daemon needs kernel features (BPF, cgroup v2) a
				// machine may lack: report, and go on without it.
				if c.Failed == nil {
					c.Failed = map[string]string{}
				}
				c.Failed[m.ID] = err.Error()
				env.Printf("  method %s skipped: %v\n", m.ID, err)
				continue
			}
			if err != nil {
				return trials, envs, fmt.Errorf("method %s: %w", m.ID, err)
			}
			got, err := lb.runTransfers(ctx, env, c, m, round, ps, envs)
			trials = append(trials, got...)
			if err != nil {
				return trials, envs, fmt.Errorf("method %s: %w", m.ID, err)
			}
		}
	}
	return trials, envs, nil
}

// runTransfers runs one round's transfers ps on the bed of method m (each
// at its slot's trace offset with --slot, else after the warm-up and a
// pause each), records the method's environment the first time, and
// closes the bed.
func (lb *lbeBed) runTransfers(ctx context.Context, env *testbed.Env, c *LBEConfig, m LBEMethod, round int, ps []lbePair, envs map[string]*testbed.Environment) ([]LBETrial, error) {
	defer lb.Close()
	// Every method waits, so that the first transfer meets the same stretch
	// of the trace with or without background (with --slot, every transfer
	// waits for its offset).
	if c.Slot == 0 {
		if err := testbed.SleepCtx(ctx, c.Warmup); err != nil {
			return nil, err
		}
	}
	var trials []LBETrial
	for i, p := range ps {
		late := false
		if c.Slot > 0 {
			onTime, err := untilOffset(ctx, lb.up, c.Warmup+time.Duration(i)*c.Slot)
			if err != nil {
				return trials, err
			}
			late = !onTime
		}
		offset := sinceBase(lb.up)
		tr, err := lb.transfer(ctx, p.dir, p.size)
		if err != nil {
			return trials, err
		}
		tr.Method, tr.Round, tr.Offset, tr.Late = m.ID, round, offset.Seconds(), late
		if tr.Error != "" {
			env.Printf("  %s %d KB: error %s\n", p.dir, p.size, tr.Error)
		}
		trials = append(trials, tr)
		if c.Slot > 0 {
			continue
		}
		if err := testbed.SleepCtx(ctx, c.Pause); err != nil {
			return trials, err
		}
	}
	if _, ok := envs[m.ID]; !ok {
		e := testbed.CaptureEnvironment(lb.bed.Topo, env, map[string]string{"method": m.ID + " " + m.Name})
		e.Extra["uplink_stats"] = fmt.Sprintf("%+v", lb.up.Stats())
		if g := lb.bed.Gates["phone"]; g != nil {
			ch, er, last := g.Stats()
			e.Extra["gate"] = fmt.Sprintf("rate changes %d, refused %d %s", ch, er, last)
		}
		envs[m.ID] = e
	}
	return trials, nil
}

func runLBEExperiment(ctx context.Context, env *testbed.Env, name string, c *LBEConfig, r *testbed.Result) (*testbed.Result, error) {
	r.Params = map[string]any{"config": c}
	trials, envs, err := RunLBE(ctx, env, c)
	if err != nil && len(trials) == 0 {
		return nil, err
	}
	if err != nil {
		r.Notes = append(r.Notes, "stopped early: "+err.Error())
	}
	for id, why := range c.Failed {
		r.Notes = append(r.Notes, fmt.Sprintf("method %s skipped: %s", id, why))
	}
	if c.Slot > 0 {
		late := 0
		for _, t := range trials {
			if t.Late {
				late++
			}
		}
		r.Notes = append(r.Notes, fmt.Sprintf("paired schedule: transfer i started at %v + i x %v into the links for every method; %d of %d started late (the previous one overran its slot)",
			c.Warmup, c.Slot, late, len(trials)))
	}
	cells := SummarizeLBE(trials)
	r.Tables = append(r.Tables, LBETables(cells, c.Methods, name == "lbe")...)
	r.Data = map[string]any{"trials": trials, "cells": cells, "method_environments": envs}
	for _, id := range []string{"2", "1", "1s"} {
		if e, ok := envs[id]; ok {
			r.Environment = e
			break
		}
	}
	if r.Environment == nil {
		for _, e := range envs {
			r.Environment = e
			break
		}
	}
	r.Notes = append(r.Notes,
		fmt.Sprintf("links: up %s, down %s, %v one way; downlink queue %d packets; %s; %d repetitions",
			orRate(c.UpTrace, c.UpRate), orRate(c.DownTrace, c.DownRate), c.Delay, c.DownQueuePackets, c.CC, c.Reps),
		"CPU = the phone's tasks (foreground client + background uploader + method 3's priority task + methods 4/6's lanes daemon); softirq is the whole machine's")
	r.Duration = time.Since(r.Started)
	return r, nil
}

func init() {
	testbed.Register(testbed.Experiment{Name: "lbe", Summary: "LW-LBE figures 6–10: foreground time with background upload, methods 1–6",
		Quick: "sizes 100,400 KB, 2 repetitions, 4 s warm-up",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			c := &LBEConfig{}
			methods, sizes, dirs, reps := lbeFlags(fs, c)
			demo := fs.Bool("demo", false, "make demo: sizes 100,400 KB, 2 repetitions, methods 1-5")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				if *demo {
					*methods = "1,2,3,4,5"
				}
				if *demo || env.Quick {
					*sizes, *reps = "100,400", 2
					c.Warmup = 4 * time.Second
				}
				if err := parseLBE(c, LBEMethods, *methods, *sizes, *dirs, *reps); err != nil {
					return nil, err
				}
				r := &testbed.Result{Experiment: "lbe", Started: time.Now()}
				if err := checkTraces(c); err != nil {
					return nil, err
				}
				dropUnavailable(c, r)
				return runLBEExperiment(ctx, env, "lbe", c, r)
			}
		}, Plot: plotLBE})
	testbed.Register(testbed.Experiment{Name: "lbe-overhead", Summary: "LW-LBE figures 11–12: no background, 8 KB vs 1.5 KB device queue",
		Quick: "sizes 100,400 KB, 2 repetitions",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			c := &LBEConfig{}
			methods, sizes, dirs, reps := lbeFlags(fs, c)
			*methods, *dirs = "1,1s", "upload"
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				if env.Quick {
					*sizes, *reps = "100,400", 2
				}
				if err := parseLBE(c, overheadMethods, *methods, *sizes, *dirs, *reps); err != nil {
					return nil, err
				}
				r := &testbed.Result{Experiment: "lbe-overhead", Started: time.Now()}
				if err := checkTraces(c); err != nil {
					return nil, err
				}
				return runLBEExperiment(ctx, env, "lbe-overhead", c, r)
			}
		}, Plot: plotLBE})
}

// foregroundTransfer runs one foreground GET (download) or POST (upload)
// of sizeKB from node to url with the lab's client helper, and returns
// what the helper measured.
func foregroundTransfer(ctx context.Context, node *topo.Node, dir, url string, sizeKB int) (testbed.HelperResult, error) {
	var res testbed.HelperResult
	kind := "get"
	if dir == "upload" {
		kind = "post"
	}
	p, err := node.Start(kind, "--url", url, "--bytes", strconv.Itoa(sizeKB*1000))
	if err != nil {
		return res, err
	}
	l, err := p.Line(ctx, 10*time.Minute)
	if err != nil {
		p.Stop()
		return res, fmt.Errorf("%s client: %w", kind, err)
	}
	if err := json.Unmarshal([]byte(l), &res); err != nil {
		return res, fmt.Errorf("%s client said %q", kind, l)
	}
	<-p.Done()
	return res, nil
}
