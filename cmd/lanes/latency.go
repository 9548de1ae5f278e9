// latency.go: `lanes latency`, the wake-up latency tester of docs/papers.md §004
// (periodic absolute-timer wake-ups, optional CPU and interrupt load, and a
// side-by-side comparison with cyclictest).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/latency"
	"golang.org/x/sys/unix"
)

func init() {
	register(&command{path: "latency", summary: "measure timer wake-up latency (jitter), optionally under CPU/interrupt load",
		setup: latencyCmd})
	register(&command{path: "latency flood-child", summary: "the net load's sender and sink (internal)", hidden: true,
		setup: floodChildCmd})
}

// latencyFlags are `lanes latency`'s flags.
type latencyFlags struct {
	period, duration, histMax *time.Duration
	loops, prio, threads      *int
	cpuLoad, netRate, rounds  *int
	pmLat                     *int
	policy, affinity          *string
	nsPath, tag               *string
	mlock, netLoad, compare   *bool
	full, asJSON              *bool
	priorityGiven             func() bool
}

func latencyCmd(fs *pflag.FlagSet, e *env) runFunc {
	def := latency.DefaultConfig()
	f := latencyFlags{
		period:   fs.Duration("period", def.Period, "wake-up period"),
		duration: fs.Duration("duration", def.Duration, "run time (ignored if --loops is set)"),
		loops:    fs.Int("loops", 0, "wake-ups per thread (overrides --duration)"),
		policy:   fs.String("policy", "other", "scheduling policy of the measuring threads: other, fifo, rr, idle, keep (as set from outside)"),
		prio:     fs.Int("priority", 0, "RT priority 1..99 for fifo/rr (if not given: 99), nice for other (if not given: 0)"),
		threads:  fs.Int("threads", 1, "measuring threads"),
		affinity: fs.String("affinity", "", "CPUs to pin threads to, round robin (e.g. 1 or 0,1)"),
		mlock:    fs.Bool("mlock", false, "lock memory (mlockall)"),
		histMax:  fs.Duration("hist-max", def.HistMax, "histogram bound (1 µs bins)"),
		cpuLoad:  fs.Int("cpu-load", 0, "busy worker processes at normal priority"),
		netLoad:  fs.Bool("net-load", false, "flood UDP+ICMP from a peer namespace over a private veth at the tested host"),
		netRate:  fs.Int("net-rate", 20000, "net load packets per second"),
		compare:  fs.Bool("compare-cyclictest", false, "also run cyclictest the same way under the same load, and print the difference"),
		rounds:   fs.Int("rounds", 1, "with --compare-cyclictest: alternate the two tools this many times, each measuring 1/N of the run"),
		pmLat:    fs.Int("pm-latency", 0, "CPU wake-up latency (µs) requested through /dev/cpu_dma_latency while measuring, as cyclictest --latency; -1 leaves it alone"),
		full:     fs.Bool("hist", false, "print every non-empty 1 µs bin instead of folded ranges"),
		asJSON:   fs.Bool("json", false, "JSON output"),
		nsPath:   fs.String("netns", "", "measure inside this network namespace (path, e.g. /proc/PID/ns/net)"),
		tag:      fs.String("tag", "", "a label recorded in the output (lets a task rule find this process by command line)"),

		priorityGiven: func() bool { return fs.Changed("priority") },
	}
	return func(ctx context.Context, _ []string) error {
		// Measure in a runtime that sends no preemption signals (same pid, so
		// a rule matching this command line still finds it).
		if err := latency.ExecQuiet(); err != nil {
			fmt.Fprintf(e.stderr, "lanes latency: %v (measuring anyway)\n", err)
		}
		return runLatency(ctx, f, e)
	}
}

// runLatency starts the asked-for load, measures and prints.
func runLatency(ctx context.Context, f latencyFlags, e *env) error {
	c, err := f.config()
	if err != nil {
		return err
	}
	loadTime := f.loadTime(c)
	nl, cleanup, err := startLatencyLoads(f, &c, loadTime)
	defer cleanup()
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	var once sync.Once
	closeStop := func() { once.Do(func() { close(stop) }) }
	defer closeStop()
	go func() {
		select {
		case <-ctx.Done():
			closeStop()
		case <-stop:
		}
	}()
	results, err := measureRounds(ctx, c, *f.compare, *f.rounds, nl, stop)
	if err != nil {
		return err
	}
	closeStop()
	var sent, recv uint64
	if nl != nil {
		if err := nl.Close(); err != nil {
			fmt.Fprintf(e.stderr, "lanes latency: %v\n", err)
		}
		sent, recv = nl.Counts()
	}
	if *f.asJSON {
		return writeLatencyJSON(e, f, sent, recv, results)
	}
	writeLatencyText(e, f, c, nl != nil, sent, recv, results)
	return nil
}

// config turns the flags into the tester's configuration.
func (f latencyFlags) config() (latency.Config, error) {
	c := latency.Config{Period: *f.period, Duration: *f.duration, Loops: *f.loops, Policy: *f.policy, Priority: *f.prio,
		Threads: *f.threads, Mlock: *f.mlock, HistMax: *f.histMax, PMLatency: *f.pmLat}
	if !f.priorityGiven() {
		c.Priority = 0
		if c.Policy == "fifo" || c.Policy == "rr" {
			c.Priority = 99
		}
	}
	if *f.affinity != "" {
		for _, s := range strings.Split(*f.affinity, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return c, usageErrorf("bad --affinity %q", *f.affinity)
			}
			c.Affinity = append(c.Affinity, n)
		}
	}
	if *f.rounds < 1 || (*f.rounds > 1 && !*f.compare) {
		return c, usageErrorf("--rounds %d: want >= 1, and more than 1 only with --compare-cyclictest", *f.rounds)
	}
	if *f.cpuLoad < 0 || *f.cpuLoad > 64 {
		return c, usageErrorf("--cpu-load %d out of range (0..64)", *f.cpuLoad)
	}
	if *f.netLoad && *f.nsPath != "" {
		return c, usageErrorf("--netns and --net-load exclude each other")
	}
	if err := c.Validate(); err != nil {
		return c, usageErrorf("%v", err)
	}
	return c, nil
}

// loadTime is how long the loads must last: the whole run (both tools'
// with --compare-cyclictest) and a margin.
func (f latencyFlags) loadTime(c latency.Config) time.Duration {
	runTime := c.Duration
	if c.Loops > 0 {
		runTime = time.Duration(c.Loops) * c.Period
	}
	if *f.compare {
		return 2*runTime + 10*time.Second
	}
	return runTime + 5*time.Second
}

// startLatencyLoads starts the net and CPU loads and enters the namespace the
// flags ask for (through c.Setup, run by each measuring thread). cleanup
// stops what was started, also when err is set.
func startLatencyLoads(f latencyFlags, c *latency.Config, loadTime time.Duration) (nl *latency.NetLoad, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if *f.netLoad {
		exe, _ := os.Executable() // the flood runs in a child process when we know our binary
		nl, err = latency.StartNetLoad(latency.NetLoadConfig{Rate: *f.netRate, Duration: loadTime, Exe: exe})
		if err != nil {
			return nil, cleanup, fmt.Errorf("net load: %w", err)
		}
		undo = append(undo, func() { nl.Close() })
		c.Setup = nl.EnterHost
	}
	if *f.nsPath != "" {
		ns, err := os.Open(*f.nsPath)
		if err != nil {
			return nl, cleanup, fmt.Errorf("netns: %w", err)
		}
		undo = append(undo, func() { ns.Close() })
		c.Setup = func() error { return unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET) }
	}
	if *f.cpuLoad > 0 {
		cl, err := latency.StartCPULoad(*f.cpuLoad, loadTime)
		if err != nil {
			return nl, cleanup, err
		}
		undo = append(undo, cl.Stop)
	}
	return nl, cleanup, nil
}

// writeLatencyJSON prints the results and the load as JSON.
func writeLatencyJSON(e *env, f latencyFlags, sent, recv uint64, results []*latency.Result) error {
	out := struct {
		Tag         string            `json:"tag,omitempty"`
		CPULoad     int               `json:"cpu_load"`
		NetLoad     bool              `json:"net_load"`
		NetRatePPS  int               `json:"net_rate_pps,omitempty"`
		NetSent     uint64            `json:"net_sent,omitempty"`
		NetReceived uint64            `json:"net_received_udp,omitempty"`
		Results     []*latency.Result `json:"results"`
	}{*f.tag, *f.cpuLoad, *f.netLoad, *f.netRate, sent, recv, results}
	if !*f.netLoad {
		out.NetRatePPS = 0
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeLatencyText prints the table, the difference to cyclictest and the
// histograms.
func writeLatencyText(e *env, f latencyFlags, c latency.Config, netLoad bool, sent, recv uint64, results []*latency.Result) {
	fmt.Fprintf(e.stdout, "period %v, %d thread(s), cpu load %d", c.Period, c.Threads, *f.cpuLoad)
	if netLoad {
		fmt.Fprintf(e.stdout, ", net load %d pps (sent %d, udp received %d)", *f.netRate, sent, recv)
	}
	fmt.Fprintln(e.stdout)
	latency.WriteTable(e.stdout, results...)
	if len(results) == 2 {
		latency.WriteDifference(e.stdout, results[0], results[1])
	}
	for _, r := range results {
		fmt.Fprintf(e.stdout, "\nhistogram (%s, all threads):\n", r.Tool)
		latency.WriteHistogram(e.stdout, r.All, *f.full)
	}
}

// measureRounds runs our tester, and with compare cyclictest after it, in
// rounds alternating the two (each round measures 1/rounds of the run), and
// returns the summed results: ours first.
func measureRounds(ctx context.Context, c latency.Config, compare bool, rounds int, nl *latency.NetLoad, stop chan struct{}) ([]*latency.Result, error) {
	if c.Loops <= 0 {
		c.Loops = max(1, int(c.Duration/c.Period))
	}
	per := max(1, c.Loops/rounds)
	var ours, theirs []*latency.Result
	for r := 0; r < rounds && ctx.Err() == nil; r++ {
		rc := c
		rc.Loops = per
		if r == rounds-1 {
			rc.Loops = max(1, c.Loops-per*(rounds-1))
		}
		o, err := latency.Run(rc, stop)
		if err != nil {
			return nil, err
		}
		ours = append(ours, o)
		if compare && ctx.Err() == nil {
			ct, err := latency.RunCyclictest(rc, nl)
			if err != nil {
				return nil, err
			}
			theirs = append(theirs, ct)
		}
	}
	results := []*latency.Result{latency.Merge(ours...)}
	if len(theirs) > 0 {
		results = append(results, latency.Merge(theirs...))
	}
	return results, nil
}

// floodChild is the hidden `lanes latency --flood-child`: the net load's
// sender and sink in their own process (see latency.NetLoadConfig.Exe).
func floodChildCmd(fs *pflag.FlagSet, e *env) runFunc {
	rate := fs.Int("rate", 20000, "packets per second")
	size := fs.Int("size", 1000, "UDP payload bytes")
	d := fs.Duration("duration", time.Minute, "stop after")
	host := fs.String("host", "", "tested host address (netns on fd 3)")
	peer := fs.String("peer", "", "peer address (netns on fd 4)")
	return func(_ context.Context, args []string) error {
		return latency.FloodChild(*rate, *size, *d, *host, *peer, e.stdout)
	}
}
