// monitor.go: `lanes monitor`, the kernel TCP monitor: a live top-like view
// of TCP flows (lane, process, cwnd, RTT, congestion state, rate), JSON lines
// or CSV for machines and `lanes plot`, Prometheus text of per-lane
// aggregates, and an event mode tracing per-ACK cwnd and flow start/end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/api"
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
	all                            bool
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
		defSock = api.DefaultSocket
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
			drawLive(e.stdout, s, flows, m.top, isTerminal(e.stdout), udp)
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

// isTerminal tells whether w is a terminal; elsewhere (pipes, files) the
// live view prints plain tables one after the other, without ANSI codes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// redrawEvery: a terminal is redrawn at most 4 times a second, a pipe gets
// one table a second, however fast we sample.
func redrawEvery(w io.Writer) time.Duration {
	if isTerminal(w) {
		return 250 * time.Millisecond
	}
	return time.Second
}

// drawLive redraws the terminal (or, to a pipe, appends): a summary line,
// the TCP flows by throughput, then the UDP flows.
func drawLive(w io.Writer, s *tcpmon.Sampler, flows []tcpmon.Flow, top int, tty bool, udp *udpFlows) {
	var b strings.Builder
	if tty {
		b.WriteString("\x1b[H\x1b[2J")
	} else {
		b.WriteString("\n")
	}
	var total float64
	for i := range flows {
		total += flows[i].Throughput
	}
	backend, why := s.Backend()
	seen := fmt.Sprintf("%d sockets seen", s.Dumped)
	if backend == tcpmon.BackendTrack {
		seen = fmt.Sprintf("%d changed", s.Dumped)
	}
	fmt.Fprintf(&b, "lanes monitor  %s  every %v  %d flows (%s, %s)  total %s\n",
		time.Now().Format("15:04:05"), s.Interval(), len(flows), seen, backend, fmtRate(total))
	if backend == tcpmon.BackendTrack {
		fmt.Fprintf(&b, "(%s)\n", why) // how late an idle socket's change may show
	}
	b.WriteString("\n")
	writeFlowTable(&b, flows, top)
	writeUDPView(&b, udp)
	io.WriteString(w, b.String())
}

// writeFlowTable prints flows as an aligned table, at most top rows.
func writeFlowTable(w io.Writer, flows []tcpmon.Flow, top int) {
	const hdr = "%-11s %-18s %-23s %-23s %-10s %-22s %-8s %6s %6s %9s %9s %10s %7s %9s %9s  %s\n"
	fmt.Fprintf(w, hdr, "LANE", "PROCESS", "LOCAL", "REMOTE", "STATE", "CC", "CA", "CWND", "SSTHR", "RTT(ms)", "MINRTT", "RATE", "RETRANS", "SENDQ", "CAP", "WHY")
	for i := range flows {
		if top > 0 && i >= top {
			fmt.Fprintf(w, "... %d more\n", len(flows)-top)
			break
		}
		f := &flows[i]
		proc := "-"
		if f.PID != 0 {
			proc = fmt.Sprintf("%s/%d", f.Comm, f.PID)
		}
		lname := "-"
		if f.Lane != lane.Unset {
			lname = f.Lane.String()
		}
		ss := "-"
		if f.SSThresh != 0 && f.SSThresh < 0x7fffffff {
			ss = strconv.FormatUint(uint64(f.SSThresh), 10)
		}
		fmt.Fprintf(w, hdr, lname, trunc(proc, 18), trunc(f.Src, 23), trunc(f.Dst, 23), f.State, trunc(f.CongLabel(), 22), f.CAState,
			strconv.FormatUint(uint64(f.Cwnd), 10), ss,
			fmt.Sprintf("%.3f", float64(f.SRTT)/1000), fmt.Sprintf("%.3f", float64(f.MinRTT)/1000),
			fmtRate(f.Throughput), strconv.FormatUint(uint64(f.TotalRetrans), 10), strconv.FormatUint(uint64(f.SendQ), 10), capsText(f), f.Why)
	}
}

// capsText is a flow's coop caps for the table: the cwnd cap in segments,
// a downlink cap as "rwnd:N" bytes, "-" for none.
func capsText(f *tcpmon.Flow) string {
	switch {
	case f.CwndCap != 0 && f.RwndCap != 0:
		return fmt.Sprintf("%d/%dB", f.CwndCap, f.RwndCap)
	case f.RwndCap != 0:
		return fmt.Sprintf("rwnd:%d", f.RwndCap)
	case f.CwndCap != 0:
		return strconv.FormatUint(uint64(f.CwndCap), 10)
	}
	return "-"
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "~"
}

// fmtRate prints bits/s the way tc and ss do.
func fmtRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.2fGbit", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.2fMbit", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.1fKbit", bps/1e3)
	}
	return fmt.Sprintf("%.0fbit", bps)
}

// runEvents is event mode: flow start/end (and per-ACK probes with --probe)
// as text lines or, with --json, JSON lines.
func runEvents(ctx context.Context, e *env, m *monitorFlags) error {
	if m.netns != "" {
		fmt.Fprintln(e.stderr, "lanes monitor: note: tracepoints see every namespace; filter with --port")
	}
	cfg := tcpmon.EventConfig{State: true, Probe: m.probe, ProbeGap: m.probeGap, AllSegments: m.allSegments, MaxDelay: m.maxDelay}
	for _, p := range []uint{m.port, m.sport, m.dport} {
		if p != 0 {
			cfg.Ports = append(cfg.Ports, uint16(p))
		}
	}
	tr, err := tcpmon.OpenTracer(cfg)
	if err != nil {
		return err
	}
	defer tr.Close()
	out := e.stdout
	if m.output != "" {
		f, err := os.Create(m.output)
		if err != nil {
			return fmt.Errorf("output: %w", err)
		}
		defer f.Close()
		out = f
	}
	enc := json.NewEncoder(out)
	if !m.json {
		fmt.Fprintf(out, "%-15s %-5s %-23s %-23s %s\n", "TIME", "EVENT", "LOCAL", "REMOTE", "DETAILS")
	}
	n := 0
	for {
		ev, err := tr.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				st := tr.Stats()
				if st.Dropped > 0 {
					fmt.Fprintf(e.stderr, "lanes monitor: %d events dropped (ring buffer full)\n", st.Dropped)
				}
				return nil
			}
			return err
		}
		if m.json {
			if err := enc.Encode(&ev); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(out, "%-15s %-5s %-23s %-23s %s\n", ev.Time.Format("15:04:05.000000"), ev.Kind, ev.Src, ev.Dst, eventDetails(&ev))
		}
		n++
		if m.count > 0 && n >= m.count {
			return nil
		}
	}
}

func eventDetails(ev *tcpmon.Event) string {
	switch ev.Kind {
	case "probe":
		return fmt.Sprintf("cwnd %d ssthresh %d srtt %.3fms snd_wnd %d", ev.Cwnd, ev.SSThresh, float64(ev.SRTT)/1000, ev.SndWnd)
	case "start":
		return fmt.Sprintf("%s->%s handshake %v %s", ev.OldState, ev.NewState, ev.Duration, procName(ev))
	case "end":
		return fmt.Sprintf("%s->%s duration %v %s", ev.OldState, ev.NewState, ev.Duration, procName(ev))
	}
	return ""
}

func procName(ev *tcpmon.Event) string {
	if ev.PID == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%d", ev.Comm, ev.PID)
}

// daemonLanes asks the daemon for the lanes of sampled sockets, in one
// batch per sample for the cookies it has not answered yet. Sockets the
// daemon does not know are in the default lane (interactive) and are asked
// about again after a while, in case they were registered since; so are
// background sockets, whose app may set a congestion control of its own at
// any time (shown beside the LEDBAT++ it keeps).
type daemonLanes struct {
	client  *api.Client
	err     error
	known   map[uint64]laneAnswer
	ccNames map[string]string // lanes' congestion controls: kernel name -> "ledbat", "capcc"
	warned  bool
}

type laneAnswer struct {
	l     lane.Lane
	why   string // what decided it, from the daemon
	appCC string // the congestion control the app asked for and did not get
	asked time.Time
	found bool
}

// reaskAfter is how long an answer about a socket the daemon did not know,
// or a background socket, stands before it is asked for again.
const reaskAfter = 2 * time.Second

// stale says whether a's answer is to be asked for again.
func (a laneAnswer) stale(now time.Time) bool {
	return (!a.found || a.l == lane.Background) && now.Sub(a.asked) > reaskAfter
}

// coopCaps reads the cooperative controller's caps in force, by cookie:
// {cwnd cap (segments), downlink cap (bytes)}; none when the daemon runs
// no controller.
func (d *daemonLanes) coopCaps() map[uint64][2]uint32 {
	doc, err := d.client.Component("coop")
	if err != nil {
		return nil
	}
	var st struct {
		Flows []struct {
			Cookie  uint64 `json:"cookie"`
			Cap     uint32 `json:"cap"`
			DownCap uint32 `json:"down_cap_bytes"`
		} `json:"flows"`
	}
	if json.Unmarshal(doc, &st) != nil {
		return nil
	}
	m := make(map[uint64][2]uint32, len(st.Flows))
	for _, f := range st.Flows {
		m[f.Cookie] = [2]uint32{f.Cap, f.DownCap}
	}
	return m
}

// yielding says whether the daemon's yield holds background now (its
// background component); false without one.
func (d *daemonLanes) yielding() bool {
	doc, err := d.client.Component("background")
	if err != nil {
		return false
	}
	var st struct {
		Yielding bool `json:"yielding"`
	}
	return json.Unmarshal(doc, &st) == nil && st.Yielding
}

func newDaemonLanes(socket string) *daemonLanes {
	c, err := api.Dial(socket)
	return &daemonLanes{client: c, err: err, known: map[uint64]laneAnswer{}}
}

func (d *daemonLanes) close() {
	if d.client != nil {
		d.client.Close()
	}
}

// apply sets each flow's lane and keeps those in want (all if want is empty).
func (d *daemonLanes) apply(flows []tcpmon.Flow, want []lane.Lane) []tcpmon.Flow {
	if d.client == nil {
		return flows
	}
	now := time.Now()
	var ask []uint64
	for i := range flows {
		c := flows[i].Cookie
		a, ok := d.known[c]
		if c != 0 && (!ok || a.stale(now)) {
			ask = append(ask, c)
		}
	}
	if len(ask) > 0 {
		si, err := d.client.SocketInfo(ask)
		if err != nil {
			if !d.warned {
				slog.Warn("lanes of sockets from the daemon", "err", err)
				d.warned = true
			}
		} else {
			for _, c := range ask {
				l, found := si.Lanes[c]
				if !found || l == lane.Unset {
					l = lane.Interactive
				}
				d.known[c] = laneAnswer{l: l, why: si.Why[c], appCC: si.AppCC[c], asked: now, found: found}
			}
			if len(si.CCNames) > 0 {
				d.ccNames = si.CCNames
			}
		}
	}
	if len(d.known) > 4*len(flows)+1024 { // forget closed sockets now and then
		live := make(map[uint64]bool, len(flows))
		for i := range flows {
			live[flows[i].Cookie] = true
		}
		for c := range d.known {
			if !live[c] {
				delete(d.known, c)
			}
		}
	}
	caps, yielding := d.coopCaps(), d.yielding()
	out := flows[:0]
	for i := range flows {
		if a, ok := d.known[flows[i].Cookie]; ok {
			flows[i].Lane, flows[i].Why, flows[i].AppCong = a.l, a.why, a.appCC
		}
		if n, ok := d.ccNames[flows[i].Cong]; ok {
			flows[i].Cong = n
		}
		if c, ok := caps[flows[i].Cookie]; ok {
			flows[i].CwndCap, flows[i].RwndCap = c[0], c[1]
		}
		flows[i].Held = yielding && flows[i].Lane == lane.Background
		if len(want) == 0 || slices.Contains(want, flows[i].Lane) {
			out = append(out, flows[i])
		}
	}
	return out
}
