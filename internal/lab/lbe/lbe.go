// Package lbe holds the low-priority background experiments: lbe,
// lbe-overhead, lbe-feedback (the LW-LBE paper's figures), lbe-remote (a
// remote bottleneck) and lbe-switch (the cost of a task switch).
//
// lbe.go: the LW-LBE paper's evaluation (SEEDS.md §000, figures 6–12).
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
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/traces"
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

// LBECell is one (method, direction, size) summary.
type LBECell struct {
	Method string          `json:"method"`
	Dir    string          `json:"dir"`
	SizeKB int             `json:"size_kb"`
	Time   testbed.Summary `json:"seconds"`
	CPU    testbed.Summary `json:"cpu_ms"`
	Daemon testbed.Summary `json:"daemon_cpu_ms"` // of CPU, the lanes daemon's
	Sirq   testbed.Summary `json:"softirq_ms"`
	Errors int             `json:"errors"`
}

// SummarizeLBE groups trials into cells.
func SummarizeLBE(trials []LBETrial) []LBECell {
	type key struct {
		m, d string
		s    int
	}
	groups := map[key][]LBETrial{}
	var keys []key
	for _, t := range trials {
		k := key{t.Method, t.Dir, t.SizeKB}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], t)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.d != b.d {
			return a.d < b.d
		}
		if a.s != b.s {
			return a.s < b.s
		}
		return a.m < b.m
	})
	var out []LBECell
	for _, k := range keys {
		var ts, cs, ds, ss []float64
		errs := 0
		for _, t := range groups[k] {
			if t.Error != "" {
				errs++
				continue
			}
			ts = append(ts, t.Seconds)
			cs = append(cs, t.CPUms)
			ds = append(ds, t.DaemonMs)
			ss = append(ss, t.SoftirqMs)
		}
		out = append(out, LBECell{Method: k.m, Dir: k.d, SizeKB: k.s, Time: testbed.Summarize(ts), CPU: testbed.Summarize(cs), Daemon: testbed.Summarize(ds), Sirq: testbed.Summarize(ss), Errors: errs})
	}
	return out
}

// paperLBE are the LW-LBE paper's figures given as numbers in its text
// (other points exist only as plots): 400 KB download, LW-LBE 3.68 s,
// task-based 4.04 s.
var paperLBE = map[string]string{"download/400": "(4) 3.68 s, (3) 4.04 s"}

// LBETables renders the cells: mean ± CI (median and range for few
// repetitions), p95, CPU.
func LBETables(cells []LBECell, methods []LBEMethod, withPaper bool) []testbed.Table {
	byKey := map[string]LBECell{}
	type row struct {
		d string
		s int
	}
	var rows []row
	seen := map[row]bool{}
	for _, c := range cells {
		byKey[fmt.Sprintf("%s/%d/%s", c.Dir, c.SizeKB, c.Method)] = c
		r := row{c.Dir, c.SizeKB}
		if !seen[r] {
			seen[r] = true
			rows = append(rows, r)
		}
	}
	cols := []string{"transfer"}
	for _, m := range methods {
		cols = append(cols, "("+m.ID+") "+m.Name)
	}
	mk := func(title string, f func(LBECell) string, paper bool) testbed.Table {
		t := testbed.Table{Title: title, Columns: append([]string(nil), cols...)}
		if paper {
			t.Columns = append(t.Columns, "paper")
		}
		for _, r := range rows {
			line := []string{fmt.Sprintf("%s %d KB", r.d, r.s)}
			for _, m := range methods {
				c, ok := byKey[fmt.Sprintf("%s/%d/%s", r.d, r.s, m.ID)]
				if !ok || c.Time.N == 0 {
					line = append(line, "-")
					continue
				}
				line = append(line, f(c))
			}
			if paper {
				p := paperLBE[fmt.Sprintf("%s/%d", r.d, r.s)]
				if p == "" {
					p = "-"
				}
				line = append(line, p)
			}
			t.Rows = append(t.Rows, line)
		}
		return t
	}
	n := 0
	for _, c := range cells {
		n = max(n, c.Time.N)
	}
	return []testbed.Table{
		mk("Foreground completion time, s: "+testbed.SpreadName(n), func(c LBECell) string {
			s := c.Time.SpreadText("%.2f")
			if c.Errors > 0 {
				s += fmt.Sprintf(" (%d err)", c.Errors)
			}
			return s
		}, withPaper),
		mk("Foreground completion time, s: p95", func(c LBECell) string { return fmt.Sprintf("%.2f", c.Time.P95) }, false),
		mk("CPU of the phone's tasks per transfer, ms: mean (machine softirq ms)", func(c LBECell) string {
			return fmt.Sprintf("%.1f (%.0f)", c.CPU.Mean, c.Sirq.Mean)
		}, false),
		mk("of it the lanes daemon's, ms: mean", func(c LBECell) string {
			return fmt.Sprintf("%.1f", c.Daemon.Mean)
		}, false),
	}
}

// lbeFlags registers the flags lbe, lbe-overhead and lbe-feedback share.
func lbeFlags(fs *flag.FlagSet, c *LBEConfig) (methods, sizes, dirs *string, reps *int) {
	fs.StringVar(&c.UpTrace, "up-trace", "TMobile-UMTS-driving.up", "uplink mahimahi trace, a name in the traces folder or a path (empty: --up-rate)")
	fs.StringVar(&c.DownTrace, "down-trace", "TMobile-UMTS-driving.down", "downlink mahimahi trace, a name in the traces folder or a path (empty: --down-rate)")
	fs.Float64Var(&c.UpRate, "up-rate", 0, "fixed uplink rate, bit/s (with --up-trace '')")
	fs.Float64Var(&c.DownRate, "down-rate", 0, "fixed downlink rate, bit/s (with --down-trace '')")
	fs.DurationVar(&c.Delay, "delay", 50*time.Millisecond, "one-way delay each direction")
	fs.IntVar(&c.DownQueuePackets, "down-queue", 100, "downlink queue, packets")
	fs.DurationVar(&c.Warmup, "warmup", 5*time.Second, "background upload time before the first transfer")
	fs.DurationVar(&c.Pause, "pause", 500*time.Millisecond, "pause between transfers")
	fs.DurationVar(&c.Slot, "slot", 0, "paired schedule: transfer i starts at warmup + i x slot into the links for every method (0: one after another with --pause)")
	fs.StringVar(&c.CC, "cc", "cubic", "congestion control of every host")
	fs.Int64Var(&c.Seed, "seed", 1, "seed for the order of methods and transfers")
	fs.StringVar(&c.Lanes, "lanes", "", "lanes binary for methods 4 and 6 (default: this executable)")
	reps = fs.Int("reps", 20, "repetitions (the paper used 100)")
	sizes = fs.String("sizes", "1,10,100,400,1000", "foreground sizes, KB")
	dirs = fs.String("dirs", "download,upload", "foreground directions")
	methods = fs.String("methods", "1,2,3,4,5,6", "methods to run")
	return
}

func parseLBE(c *LBEConfig, all []LBEMethod, methods, sizes, dirs string, reps int) error {
	c.Reps = reps
	c.SizesKB, c.Dirs, c.Methods = nil, nil, nil
	for _, s := range strings.Split(sizes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v <= 0 {
			return fmt.Errorf("bad size %q", s)
		}
		c.SizesKB = append(c.SizesKB, v)
	}
	for _, d := range strings.Split(dirs, ",") {
		d = strings.TrimSpace(d)
		if d != "download" && d != "upload" {
			return fmt.Errorf("bad direction %q (download or upload)", d)
		}
		c.Dirs = append(c.Dirs, d)
	}
	for _, id := range strings.Split(methods, ",") {
		found := false
		for _, m := range all {
			if m.ID == strings.TrimSpace(id) {
				c.Methods = append(c.Methods, m)
				found = true
			}
		}
		if !found {
			return fmt.Errorf("unknown method %q", id)
		}
	}
	if c.Lanes == "" {
		c.Lanes, _ = os.Executable()
	}
	return nil
}

// dropUnavailable removes the lanes methods when the lanes binary has no
// daemon, with a note.
func dropUnavailable(c *LBEConfig, r *testbed.Result) {
	if testbed.LanesAvailable(c.Lanes) {
		return
	}
	var keep []LBEMethod
	for _, m := range c.Methods {
		if m.Kind == "lanes" {
			r.Notes = append(r.Notes, fmt.Sprintf("method %s skipped: %s has no working `daemon` command", m.ID, c.Lanes))
			continue
		}
		keep = append(keep, m)
	}
	c.Methods = keep
}

// checkTraces fails early, before any testbed is built, when a trace the
// configuration names cannot be found (see internal/traces for where).
func checkTraces(c *LBEConfig) error {
	for _, name := range []string{c.UpTrace, c.DownTrace} {
		if name == "" {
			continue
		}
		if _, err := traces.Path(name); err != nil {
			return err
		}
	}
	return nil
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

func orRate(trace string, rate float64) string {
	if trace != "" {
		return filepath.Base(trace)
	}
	return fmt.Sprintf("%.2f Mbit/s", rate/1e6)
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
