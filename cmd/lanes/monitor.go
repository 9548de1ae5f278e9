// monitor.go: `lanes monitor`, the kernel TCP monitor: a live top-like view
// of TCP flows (lane, process, cwnd, RTT, congestion state, rate), JSON lines
// or CSV for machines and `lanes plot`, Prometheus text of per-lane
// aggregates, and an event mode tracing per-ACK cwnd and flow start/end.
//
// This file: the flags, the sampling loop and where samples are written.
// The live view is monitor_view.go, event mode monitor_events.go, the
// lanes asked of the daemon monitor_lanes.go, the UDP flows monitor_udp.go.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/client"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/metrics"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

func init() {
	register(&command{path: "monitor", summary: "watch TCP flows: cwnd, RTT, state, rate per lane and process",
		setup: monitorCmd})
}

type monitorFlags struct {
	json, csv, prom, events, probe bool
	allSegments                    bool
	interval, duration, probeGap   time.Duration
	maxDelay                       time.Duration
	output, netns, socket, backend string
	lanes, src, dst, comm, cgroup  string
	sport, dport, port             uint
	pid, count, top                int
	all, verbose                   bool
}

func monitorCmd(fs *pflag.FlagSet, e *env) runFunc {
	m := &monitorFlags{}
	fs.BoolVar(&m.json, "json", false, "JSON lines, one per flow per sample")
	fs.BoolVar(&m.csv, "csv", false, "CSV, one line per flow per sample")
	fs.BoolVar(&m.prom, "prometheus", false, "print lanes' metrics in Prometheus text format once and exit (the daemon's too, if it answers)")
	fs.BoolVar(&m.events, "events", false, "event mode: trace flow start/end (BPF on sock:inet_sock_set_state)")
	fs.BoolVar(&m.probe, "probe", false, "with --events: also every ACK's cwnd/ssthresh/srtt (tcp:tcp_probe); give a --port")
	fs.DurationVar(&m.probeGap, "probe-gap", 0, "with --probe: least time between two events of one flow")
	fs.BoolVar(&m.allSegments, "all-segments", false, "with --probe: every received segment, not only pure ACKs")
	fs.DurationVar(&m.maxDelay, "max-delay", 50*time.Millisecond, "with --events: deliver events in batches at most this late (0: each at once, costlier)")
	fs.DurationVar(&m.interval, "interval", tcpmon.DefaultInterval, "sampling interval (>= 10ms)")
	fs.DurationVar(&m.duration, "duration", 0, "stop after this long (0: until interrupted)")
	fs.IntVar(&m.count, "count", 0, "stop after this many samples (0: no limit)")
	fs.StringVar(&m.output, "output", "", "write JSON lines (CSV if the name ends in .csv or with --csv) to FILE; the live view stays on the terminal")
	fs.StringVar(&m.netns, "netns", "", "sample inside the network namespace at PATH (e.g. /var/run/netns/NAME)")
	fs.StringVar(&m.lanes, "lane", "", "only flows in these lanes (comma separated; needs the daemon)")
	defSock := e.getenv("LANES_SOCKET")
	if defSock == "" {
		defSock = client.DefaultSocket
	}
	fs.StringVar(&m.socket, "socket", defSock, "the daemon's API socket, for lanes (env LANES_SOCKET)")
	fs.StringVar(&m.src, "src", "", "only flows whose local address is in this prefix or address")
	fs.StringVar(&m.dst, "dst", "", "only flows whose remote address is in this prefix or address")
	fs.UintVar(&m.sport, "sport", 0, "only flows with this local port")
	fs.UintVar(&m.dport, "dport", 0, "only flows with this remote port")
	fs.UintVar(&m.port, "port", 0, "only flows with this port on either side")
	fs.IntVar(&m.pid, "pid", 0, "only flows of this process id")
	fs.StringVar(&m.comm, "comm", "", "only flows of processes with this name")
	fs.StringVar(&m.cgroup, "cgroup", "", "only flows created in this cgroup v2 directory")
	fs.IntVar(&m.top, "top", 40, "live view: show at most this many flows")
	fs.BoolVarP(&m.verbose, "verbose", "v", false, "live view: every column (cwnd, state, caps...) and line whole, the daemon's own UDP sockets")
	fs.BoolVar(&m.all, "all", false, "include listening and TIME-WAIT sockets")
	fs.StringVar(&m.backend, "backend", "", "sampling backend: bpf-track, bpf-iter or sock_diag (default: bpf-track when it loads, else the cheaper of the other two)")
	return func(ctx context.Context, _ []string) error { return runMonitor(ctx, e, m) }
}

func runMonitor(ctx context.Context, e *env, m *monitorFlags) error {
	if (m.prom && (m.json || m.csv || m.events)) || (m.csv && (m.json || m.events)) {
		return usageErrorf("--json, --csv, --prometheus and --events exclude each other (except --events --json)")
	}
	if m.interval < tcpmon.MinInterval {
		return usageErrorf("--interval %v is below %v", m.interval, tcpmon.MinInterval)
	}
	if m.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.duration)
		defer cancel()
	}
	cfg, err := m.samplerConfig()
	if err != nil {
		return err
	}
	if m.events || m.probe {
		return runEvents(ctx, e, m)
	}
	// Lanes come from the daemon, asked in batches after each sample; the
	// lane filter is applied here, after that.
	lanes := newDaemonLanes(m.socket)
	defer lanes.close()
	wantLanes := cfg.Filter.Lanes
	cfg.Filter.Lanes = nil
	if len(wantLanes) > 0 && lanes.client == nil {
		return fmt.Errorf("--lane needs the lanes daemon: %w", lanes.err)
	}
	if lanes.client == nil && !m.prom {
		// Lanes are the daemon's to say; say that they are missing, not
		// only "unset" in every row.
		fmt.Fprintf(e.stderr, "lanes monitor: note: no daemon at %s (%v): every flow's lane shows as unset (--socket names another daemon's)\n", m.socket, lanes.err)
	}
	s, err := tcpmon.New(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	// apply changes the flows: a copy, the sample is the sampler's.
	withLanes := func(flows []tcpmon.Flow) []tcpmon.Flow { return lanes.apply(slices.Clone(flows), wantLanes) }
	if m.prom {
		return writeMonitorMetrics(e, m, s, lanes, withLanes)
	}
	udp := &udpFlows{client: lanes.client, filter: udpFilter{lanes: wantLanes, local: cfg.Filter.Local, remote: cfg.Filter.Remote,
		sport: cfg.Filter.LocalPort, dport: cfg.Filter.RemotePort, port: cfg.Filter.Port, pid: cfg.Filter.PID, comm: cfg.Filter.Comm}}
	if cfg.Filter.Cgroup != "" || m.netns != "" {
		udp.client = nil // the daemon's namespace, not filtered by cgroup: not these flows'
	}
	return monitorLoop(ctx, e, m, s, withLanes, udp)
}

// writeMonitorMetrics prints one Prometheus exposition: two samples an
// interval apart, so that rates are known.
func writeMonitorMetrics(e *env, m *monitorFlags, s *tcpmon.Sampler, lanes *daemonLanes, withLanes func([]tcpmon.Flow) []tcpmon.Flow) error {
	if _, err := s.Sample(); err != nil {
		return err
	}
	time.Sleep(m.interval)
	flows, err := s.Sample()
	if err != nil {
		return err
	}
	snap := metrics.Snapshot{Flows: withLanes(flows)}
	if lanes.client != nil {
		snap.Status, _ = lanes.client.Status()
	}
	return metrics.Write(e.stdout, snap)
}

// monitorLoop samples until the context ends or --count samples, writing
// each to the encoder the flags ask for and redrawing the live view.
func monitorLoop(ctx context.Context, e *env, m *monitorFlags, s *tcpmon.Sampler, withLanes func([]tcpmon.Flow) []tcpmon.Flow, udp *udpFlows) error {
	enc, jsonOut, live, closeOut, err := monitorOutput(e, m)
	if err != nil {
		return err
	}
	defer closeOut()
	samples := 0
	var drawn time.Time
	view := &liveView{tty: isTerminal(e.stdout), verbose: m.verbose, top: m.top}
	err = s.Run(ctx, func(flows []tcpmon.Flow) error {
		samples++
		flows = withLanes(flows)
		now := time.Now()
		udpf := udp.get(now)
		if enc != nil {
			if err := enc.Encode(flows); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		if jsonOut != nil {
			t := now
			if len(flows) > 0 {
				t = flows[0].Time
			}
			if err := writeUDPJSON(jsonOut, t, udpf); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		// The screen is redrawn at most 4 times a second, however fast we sample.
		if live && time.Since(drawn) >= redrawEvery(e.stdout) {
			drawn = time.Now()
			tcpmon.SortByThroughput(flows)
			view.drawLive(e.stdout, s, flows, udp)
		}
		if m.count > 0 && samples >= m.count {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return err
}

// monitorOutput opens where samples are written (--output, or --csv/--json
// to stdout; none: only the live view), where UDP flows' JSON lines go
// (JSON only) and says whether the live view is drawn.
func monitorOutput(e *env, m *monitorFlags) (enc *tcpmon.Encoder, jsonOut io.Writer, live bool, closeOut func(), err error) {
	closeOut = func() {}
	switch {
	case m.output != "":
		f, err := os.Create(m.output)
		if err != nil {
			return nil, nil, false, closeOut, fmt.Errorf("output: %w", err)
		}
		if m.csv || strings.HasSuffix(m.output, ".csv") {
			enc = tcpmon.NewCSVEncoder(f)
		} else {
			enc, jsonOut = tcpmon.NewJSONEncoder(f), f
		}
		return enc, jsonOut, !m.json && !m.csv, func() { f.Close() }, nil
	case m.csv:
		return tcpmon.NewCSVEncoder(e.stdout), nil, false, closeOut, nil
	case m.json:
		return tcpmon.NewJSONEncoder(e.stdout), e.stdout, false, closeOut, nil
	}
	return nil, nil, true, closeOut, nil
}

var errStop = errors.New("stop")

func (m *monitorFlags) samplerConfig() (tcpmon.Config, error) {
	cfg := tcpmon.Config{Interval: m.interval, NetNSPath: m.netns, Backend: m.backend}
	f := &cfg.Filter
	if m.lanes != "" {
		for _, s := range strings.Split(m.lanes, ",") {
			l, err := lane.Parse(strings.TrimSpace(s))
			if err != nil {
				return cfg, usageErrorf("--lane: %v", err)
			}
			f.Lanes = append(f.Lanes, l)
		}
	}
	var err error
	if f.Local, err = parsePrefix(m.src); err != nil {
		return cfg, usageErrorf("--src: %v", err)
	}
	if f.Remote, err = parsePrefix(m.dst); err != nil {
		return cfg, usageErrorf("--dst: %v", err)
	}
	for _, p := range []uint{m.sport, m.dport, m.port} {
		if p > 65535 {
			return cfg, usageErrorf("port %d out of range", p)
		}
	}
	f.LocalPort, f.RemotePort, f.Port = uint16(m.sport), uint16(m.dport), uint16(m.port)
	f.PID, f.Comm, f.Cgroup = m.pid, m.comm, m.cgroup
	if m.all {
		cfg.States = ^uint32(0)
	}
	return cfg, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
