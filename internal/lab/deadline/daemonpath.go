// daemonpath.go: the daemon-path table: the latency the realtime lane's
// path adds (client in the lab's process, and in a process of its own),
// per configuration, with the CPU wake-up latency held or not.
package deadline

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/latency"
	"github.com/lanes-net/lanes/internal/pmqos"
)

// dlPathConfigs are the lanes configurations of the daemon-path table, in
// the order they run: the client in the lab's process, and in its own.
var dlPathConfigs = []string{"lanes", "lanes-proc"}

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
	relPrio := config.DefaultRealtime().ReleasePriority
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
