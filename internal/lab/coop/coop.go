// Package coop holds the cooperative-control experiments: coop,
// coop-dynamics, coop-mixed and apps, on a bed of hosts behind one AP
// (coopbed.go) with lanes daemons that announce and cap (coopd.go).
//
// coop.go: the cooperative-control experiments of docs/papers.md §001.
//
//   - coop: N hosts (2..8 by default) upload through one AP (20 Mbit/s, RTT
//     256 ms, buffer half a BDP by default), plain TCP vs lanes: per-host and
//     total goodput, Jain's index per 200 ms and over the run, RTT under
//     load, retransmissions; the TCP rows are also the paper's figure-4 sweep;
//     cwnd over time of every host per N and mode (plotCoop).
//   - coop-dynamics (dynamics.go): 5 -> 8 -> 5 senders, one joining/leaving every 60 s
//     (--time-scale shortens): N and caps as each host's daemon reports them,
//     reaction time to each join/leave (until every daemon has the new N;
//     for joins also until every flow's cwnd is under its new cap), goodput
//     and fairness per phase.
//   - coop-mixed (coopmixed.go): 6 hosts, 2 of them without lanes, vs all
//     plain TCP.
package coop

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// coopCommon are the flags every coop experiment has.
type coopCommon struct {
	rate, headroom, cc string
	rtt                time.Duration
	bufBDP             float64
	bufPackets         int
	lanes              string // lanes binary for the lanes hosts' daemons
	down               bool   // the hosts download (the AP's downlink is shared)
	allowance          float64
	interval           time.Duration
	announce           string // ipv4, ipv6, both (the daemons' transport) or unicast
	apRate             string // the daemons' ap_rate ("": effectiveAPRate's default, "estimate": 0)
	medium             string // fifo or dcf (CoopBedConfig.Medium)
	seed               int64  // the dcf medium's backoff draws
	serverPacing       bool   // the server paces its sends (CoopBedConfig.ServerPacing)
}

func (c *coopCommon) register(fs *flag.FlagSet) {
	fs.StringVar(&c.rate, "rate", "20mbit", "AP rate (the paper: 802.11g, ~20 Mbit/s real)")
	fs.DurationVar(&c.rtt, "rtt", 256*time.Millisecond, "base RTT to the server (the paper: 256 ms by Dummynet)")
	fs.Float64Var(&c.bufBDP, "buffer-bdp", 0.5, "AP buffer per direction, in BDPs (rate x RTT)")
	fs.IntVar(&c.bufPackets, "buffer-packets", 0, "also limit each of the medium's queues to this many packets (0: bytes only)")
	fs.StringVar(&c.headroom, "headroom", "120kbit", "headroom of the daemons' caps")
	fs.StringVar(&c.cc, "cc", "cubic", "hosts' congestion control")
	fs.StringVar(&c.lanes, "lanes", "", "lanes binary the lanes hosts run their daemon from (default: this executable)")
	fs.Float64Var(&c.allowance, "queue-allowance", config.DefaultCoop().QueueAllowance, "the daemons' queue_allowance (0: the paper's formula)")
	fs.DurationVar(&c.interval, "interval", config.DefaultCoop().Interval.D(), "the daemons' announcement interval")
	fs.StringVar(&c.announce, "announce", coop.TransportIPv4, "how the daemons announce: ipv4 (one IPv4 broadcast, relayed by the AP, as the paper), ipv6 (link-local multicast), both (the daemon's default: one of each) or unicast (IPv4 to every other lanes host, as under client isolation)")
	fs.StringVar(&c.apRate, "ap-rate", "", "the daemons' ap_rate and ap_downlink_rate: a rate or \"estimate\" (0: each daemon estimates it from the group's goodput); default: --rate, the AP rate known as the paper has it, on the fifo medium, and estimate on dcf, where contention leaves less than one station's rate")
	fs.StringVar(&c.medium, "medium", MediumFIFO, "the shared medium: fifo (one queue per direction at --rate, no contention) or dcf (802.11 DCF: each host's uplink queue and the AP's downlink queue contend for one half-duplex channel, backoff and collisions; --rate is one station's saturation rate)")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the dcf medium's backoff draws (the same for every run)")
	fs.BoolVar(&c.serverPacing, "server-pacing", false, "the server paces what it sends (TCP's internal pacing, as a server with the fq qdisc does): downloads then leave it spread over the RTT instead of in ACK-clocked bursts")
}

func (c *coopCommon) bed(n int, lanesOn func(int) bool) (CoopBedConfig, error) {
	switch c.announce {
	case "", coop.TransportIPv4, coop.TransportIPv6, coop.TransportBoth, "unicast":
	default:
		return CoopBedConfig{}, fmt.Errorf("--announce %q: want ipv4, ipv6, both or unicast", c.announce)
	}
	switch c.medium {
	case "", MediumFIFO, MediumDCF:
	default:
		return CoopBedConfig{}, fmt.Errorf("--medium %q: want %s or %s", c.medium, MediumFIFO, MediumDCF)
	}
	r, err := config.ParseRate(c.rate)
	if err != nil {
		return CoopBedConfig{}, err
	}
	h, err := config.ParseBits(c.headroom)
	if err != nil {
		return CoopBedConfig{}, err
	}
	cc := coopControllerConfig(float64(r))
	switch c.effectiveAPRate() {
	case "":
	case "estimate":
		cc.APRate = 0
	default:
		a, err := config.ParseRate(c.apRate)
		if err != nil {
			return CoopBedConfig{}, fmt.Errorf("--ap-rate: %w", err)
		}
		cc.APRate = a
	}
	cc.Headroom = h
	cc.APDownlinkRate = cc.APRate
	cc.QueueAllowance = c.allowance
	if c.interval > 0 {
		cc.Interval = config.Duration(c.interval)
	}
	buf := int(c.bufBDP * float64(r) / 8 * c.rtt.Seconds())
	bin := c.lanes
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return CoopBedConfig{}, fmt.Errorf("lanes binary: %w (pass --lanes)", err)
		}
	}
	return CoopBedConfig{Hosts: n, Rate: float64(r), RTT: c.rtt, Buffer: max(buf, 3000), CC: c.cc, LanesOn: lanesOn, Lanes: bin, Coop: cc, Down: c.down, Announce: c.announce,
		Medium: c.medium, Seed: c.seed, BufferPackets: c.bufPackets, ServerPacing: c.serverPacing}, nil
}

func (c *coopCommon) params() map[string]any {
	p := map[string]any{"rate": c.rate, "rtt": c.rtt.String(), "buffer_bdp": c.bufBDP, "buffer_packets": c.bufPackets, "headroom": c.headroom, "cc": c.cc, "queue_allowance": c.allowance, "interval": c.interval.String(), "announce": c.announce, "medium": c.medium, "ap_rate": c.apRateParam(), "server_pacing": c.serverPacing,
		"controller": "`lanes daemon` per lanes host: silence 3, ap_rate = ap_downlink_rate (ap_rate above), demand-aware, safety on, HMAC key"}
	if c.medium == MediumDCF {
		p["seed"] = c.seed
		if r, err := config.ParseRate(c.rate); err == nil {
			if m, err := emu.NewDCF(emu.DCFConfig{Rate: float64(r)}); err == nil {
				p["dcf"] = fmt.Sprintf("802.11a/g OFDM DCF (slot 9 µs, SIFS 16, DIFS 34, EIFS 94, CW 15..1023, 7 attempts), PHY %.2f Mbit/s so that one station alone gets %s of 1500-byte packets; no aggregation, no RTS/CTS; queues: each host's uplink and the AP's downlink, buffer each",
					m.PHYRate()/1e6, c.rate)
			}
		}
	}
	return p
}

// effectiveAPRate is --ap-rate with its default filled in: on the dcf
// medium the AP delivers less than --rate (one station's rate alone) once
// stations contend, so a configured --rate would be a rate the group can
// never reach, read by every daemon as foreign traffic (the fallback at
// N = 2 and 4); there the daemons estimate it, as they do by default.
func (c *coopCommon) effectiveAPRate() string {
	if c.apRate == "" && c.medium == MediumDCF {
		return "estimate"
	}
	return c.apRate
}

// apRateParam is the daemons' ap_rate as the parameters table shows it.
func (c *coopCommon) apRateParam() string {
	switch {
	case c.apRate == "" && c.medium == MediumDCF:
		return "estimate (the dcf medium's default)"
	case c.apRate == "":
		return c.rate + " (the AP rate)"
	}
	return c.apRate
}

// parseDirections reads --direction: up, down or both.
func parseDirections(s string) ([]string, error) {
	switch s {
	case "up", "down":
		return []string{s}, nil
	case "both":
		return []string{"up", "down"}, nil
	}
	return nil, fmt.Errorf("--direction %q: want up, down or both", s)
}

// parseHosts reads "2-8" or "2,4,8".
func parseHosts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		a, b, rng := strings.Cut(part, "-")
		lo, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil {
			return nil, fmt.Errorf("hosts %q: %w", s, err)
		}
		hi := lo
		if rng {
			if hi, err = strconv.Atoi(strings.TrimSpace(b)); err != nil {
				return nil, fmt.Errorf("hosts %q: %w", s, err)
			}
		}
		for n := lo; n <= hi; n++ {
			if n < 1 || n > 64 {
				return nil, fmt.Errorf("hosts %d out of range 1..64", n)
			}
			out = append(out, n)
		}
	}
	return out, nil
}

// coopRun is one run of the coop experiment.
type coopRun struct {
	N     int       `json:"n"`
	Mode  string    `json:"mode"`
	Dir   string    `json:"direction"`
	Stats coopStats `json:"stats"`
	Cap   uint32    `json:"cap_median,omitempty"`
	// CapChangesPerMin: cap changes per host (one flow each) per minute
	// over the run's second half after the warm-up (lanes)
	CapChangesPerMin float64     `json:"cap_changes_per_min,omitempty"`
	Series           *coopSeries `json:"series"`
}

// runCoopOnce runs n endless uploads for dur and returns the series.
func runCoopOnce(ctx context.Context, env *testbed.Env, bc CoopBedConfig, dur time.Duration) (*coopSeries, error) {
	cb, err := newCoopBed(ctx, env, bc)
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := cb.startFlows(rctx, allHosts(bc.Hosts)); err != nil {
		return nil, err
	}
	s, err := cb.record(ctx, 200*time.Millisecond, dur, nil)
	if err != nil {
		return nil, err
	}
	env.Printf("  testbed: %s\n", s.testbedNote())
	return s, ctx.Err()
}

// testbedNote says what the run's hosts and emulator saw of stalls.
func (s *coopSeries) testbedNote() string {
	var at []string
	for _, d := range append(s.Up.StallsAt, s.Down.StallsAt...) {
		at = append(at, fmt.Sprintf("%.1fs", d.Seconds()))
	}
	sort.Strings(at)
	note := fmt.Sprintf("%d RTOs (%d spurious) in the hosts; emulator: %d late stretches (worst %v) at %s; recorder: %d samples, longest interval %.2f s (step %v)",
		s.RTOs, s.SpuriousRTOs, s.Up.StallEvents+s.Down.StallEvents,
		max(s.Up.MaxLate, s.Down.MaxLate).Round(time.Millisecond), strings.Join(at, " "),
		len(s.T), s.maxInterval(), s.Step)
	if d := s.DCF; d != nil && d.Elapsed > 0 {
		note += fmt.Sprintf("; dcf: %d frames, %d collisions (%d frames), %d dropped at the retry limit, air %.1f %% ok, %.1f %% collisions, %.1f %% backoff, %.1f %% idle",
			d.Successes, d.Collisions, d.Collided, d.RetryDrops, 100*d.AirOK.Seconds()/d.Elapsed.Seconds(), 100*d.AirLost.Seconds()/d.Elapsed.Seconds(),
			100*d.Backoff.Seconds()/d.Elapsed.Seconds(), 100*d.Idle.Seconds()/d.Elapsed.Seconds())
	}
	return note
}

// dcfPct shows a percentage of the dcf medium ("-" on fifo).
func dcfPct(medium string, v float64) string {
	if medium != MediumDCF {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// mediumNote says what the medium models.
func mediumNote(medium string) string {
	if medium == MediumDCF {
		return "medium dcf: 802.11 DCF contention (emu/dcf.go): each host's uplink queue and the AP's downlink queue (buffer each) contend for one half-duplex channel, so TCP ACKs and announcements cost air too; AP idle % = the air idle (no queue with a frame, both directions); AP queue = the stations' uplink queues summed (up) or the AP's (down); air lost % = air time in collisions, collided % = share of frame attempts that collided"
	}
	return "medium fifo: the emulated AP has no CSMA/CA collisions: losses are buffer overflows only, so plain TCP's total stays nearer the rate than on the paper's Wi-Fi (--medium dcf models the contention)"
}

func medianCap(s *coopSeries, from float64) uint32 {
	var v []int
	for k, row := range s.Samples {
		if s.T[k] <= from {
			continue
		}
		for _, h := range row {
			if h.Cap > 0 {
				v = append(v, int(h.Cap))
			}
		}
	}
	if len(v) == 0 {
		return 0
	}
	sort.Ints(v)
	return uint32(v[len(v)/2])
}

// capChangesPerMinute is the hosts' mean count of cap changes per minute
// after from (seconds): the steady state's, when from is past the start.
// A host's counter that fell (its flow replaced) counts from there.
func capChangesPerMinute(s *coopSeries, hosts int, from float64) float64 {
	first, last := -1, -1
	for k := range s.Samples {
		if s.T[k] > from {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 || last <= first || hosts == 0 {
		return 0
	}
	total := 0.0
	for i := range hosts {
		for k := first + 1; k <= last; k++ {
			a, b := s.Samples[k-1][i].CapChanges, s.Samples[k][i].CapChanges
			if b >= a {
				total += float64(b - a)
			} else {
				total += float64(b)
			}
		}
	}
	return total / float64(hosts) / ((s.T[last] - s.T[first]) / 60)
}

// cappingStops is, for each of the hosts, the time (s) its daemon first
// reported capping off after it had reported capping on (the safety
// fallback; -1: never).
func cappingStops(s *coopSeries, hosts []int) []float64 {
	out := make([]float64, len(hosts))
	for j, h := range hosts {
		out[j] = -1
		was := false
		for k, row := range s.Samples {
			if h >= len(row) {
				continue
			}
			if was && !row[h].Capping {
				out[j] = s.T[k]
				break
			}
			was = row[h].Capping
		}
	}
	return out
}

// stopsText says how many of the hosts' daemons stopped capping during
// the run and when: "none", or "3/4 at 10.2-11.0 s".
func stopsText(stops []float64) string {
	var at []float64
	for _, t := range stops {
		if t >= 0 {
			at = append(at, t)
		}
	}
	if len(at) == 0 {
		return "none"
	}
	sort.Float64s(at)
	if at[0] == at[len(at)-1] {
		return fmt.Sprintf("%d/%d at %.1f s", len(at), len(stops), at[0])
	}
	return fmt.Sprintf("%d/%d at %.1f-%.1f s", len(at), len(stops), at[0], at[len(at)-1])
}

func mbit(v float64) string { return fmt.Sprintf("%.2f", v) }

func minMax(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.2f-%.2f", lo, hi)
}

func allHosts(n int) []int {
	h := make([]int, n)
	for i := range h {
		h[i] = i
	}
	return h
}

func init() {
	testbed.Register(testbed.Experiment{Name: "coop", Summary: "N hosts through one AP, plain TCP vs lanes' cooperative caps (docs/papers.md §001)",
		Quick: "20 s runs after 5 s warm-up; N = 2, 5, 8",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			o := &coopOptions{}
			o.c.register(fs)
			fs.StringVar(&o.hosts, "hosts", "2-8", "host counts to run, e.g. 2-8 or 2,4,8,16")
			fs.DurationVar(&o.dur, "duration", 60*time.Second, "length of each run")
			fs.DurationVar(&o.warm, "warmup", 5*time.Second, "start of each run left out of the statistics")
			fs.StringVar(&o.modes, "modes", "tcp,lanes", "tcp, lanes or both")
			fs.StringVar(&o.direction, "direction", "up", "the hosts upload (up), download (down: the AP's downlink is shared, lanes caps receive windows) or both, one after the other")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				return runCoopExperiment(ctx, env, o)
			}
		}, Plot: plotCoop})

	testbed.Register(testbed.Experiment{Name: "coop-dynamics", Summary: "5 -> 8 -> 5 senders, one every 60 s: N, caps, reaction time, goodput (docs/papers.md §001)",
		Quick: "15 s periods (--time-scale 0.25)",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			o := &dynamicsOptions{}
			o.c.register(fs)
			fs.Float64Var(&o.scale, "time-scale", 1, "multiply the 60 s period by this")
			fs.BoolVar(&o.baseline, "baseline", true, "also run plain TCP with the same schedule")
			fs.StringVar(&o.direction, "direction", "up", "the hosts upload (up), download (down) or both, one after the other")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				return runDynamicsExperiment(ctx, env, o)
			}
		}})
}

// coopOptions are the coop experiment's flags.
type coopOptions struct {
	c                       coopCommon
	hosts, modes, direction string
	dur, warm               time.Duration
}

// runCoopExperiment runs every direction, N and mode the flags ask for, one
// after the other, and tabulates them.
func runCoopExperiment(ctx context.Context, env *testbed.Env, o *coopOptions) (*testbed.Result, error) {
	c := &o.c
	if env.Quick {
		o.dur, o.warm = 20*time.Second, 5*time.Second
		if o.hosts == "2-8" {
			o.hosts = "2,5,8"
		}
	}
	ns, err := parseHosts(o.hosts)
	if err != nil {
		return nil, err
	}
	dirs, err := parseDirections(o.direction)
	if err != nil {
		return nil, err
	}
	var modes []string
	for _, mode := range strings.Split(o.modes, ",") {
		mode = strings.TrimSpace(mode)
		if mode != "tcp" && mode != "lanes" {
			return nil, fmt.Errorf("unknown mode %q", mode)
		}
		modes = append(modes, mode)
	}
	apRate, err := config.ParseRate(c.rate)
	if err != nil {
		return nil, err
	}
	r := &testbed.Result{Experiment: "coop", Started: time.Now(), Params: c.params()}
	r.Params["hosts"], r.Params["duration"], r.Params["warmup"], r.Params["modes"] = o.hosts, o.dur.String(), o.warm.String(), o.modes
	r.Params["direction"] = o.direction
	var runs []coopRun
	main := testbed.Table{Title: "coop: N hosts uploading (up) or downloading (down) through one AP (goodput Mbit/s, Jain's index, srtt under load at the sender)",
		Columns: []string{"dir", "N", "mode", "total", "per host min-max", "Jain 200ms", "Jain 200ms air", "Jain run", "RTT p50 ms", "RTT p95 ms", "AP idle %", "AP queue p50 KB", "AP non-TCP Mbit/s", "air lost %", "collided %", "retrans", "cap", "cap chg/min", "capping stopped"}}
	fig4 := testbed.Table{Title: "paper figure 4: total TCP throughput vs N without lanes (paper: ~19 Mbit/s at N=2, falling with N)",
		Columns: []string{"dir", "N", "TCP total Mbit/s", "lanes total Mbit/s", "lanes/TCP", "lanes/AP rate"}}
	prog := env.NewProgress(len(dirs) * len(ns) * len(modes))
	for _, dir := range dirs {
		c.down = dir == "down"
		for _, n := range ns {
			row4 := []string{dir, strconv.Itoa(n), "-", "-", "-", "-"}
			var tcpTotal, lanesTotal float64
			for _, mode := range modes {
				prog.Step("coop %s N=%d %s: %v...", dir, n, mode, o.dur)
				run, err := runCoopMode(ctx, env, o, dir, n, mode)
				if err != nil {
					return nil, err
				}
				runs = append(runs, run)
				main.Rows = append(main.Rows, coopRow(c, run))
				st := run.Stats
				if mode == "tcp" {
					row4[2], tcpTotal = mbit(st.TotalMbit), st.TotalMbit
				} else {
					row4[3], lanesTotal = mbit(st.TotalMbit), st.TotalMbit
					row4[5] = fmt.Sprintf("%.1f %%", 100*st.TotalMbit*1e6/float64(apRate))
				}
				if tcpTotal > 0 && lanesTotal > 0 {
					row4[4] = fmt.Sprintf("%.3f", lanesTotal/tcpTotal)
				}
				env.Printf("  total %.2f Mbit/s, Jain 200ms %.3f (air %.3f), run %.3f, RTT %.0f ms, retrans %d; per host: CV %.3f, acf 4/7 %+.2f/%+.2f\n", st.TotalMbit, st.JainStep, st.JainAir, st.JainRun, st.RTTms, st.Retrans, st.HostCV, st.ACF4, st.ACF7)
			}
			fig4.Rows = append(fig4.Rows, row4)
		}
	}
	r.Tables = []testbed.Table{main, fig4, perHostTable(runs)}
	r.Notes = coopNotes(c.medium)
	r.Data = runs
	r.Environment = testbed.CaptureEnvironment(nil, env, nil)
	r.Duration = time.Since(r.Started)
	return r, nil
}

// runCoopMode runs n hosts in one direction and mode (tcp or lanes) and
// computes the run's statistics, and for lanes its caps and fallbacks.
func runCoopMode(ctx context.Context, env *testbed.Env, o *coopOptions, dir string, n int, mode string) (coopRun, error) {
	bc, err := o.c.bed(n, func(int) bool { return mode == "lanes" })
	if err != nil {
		return coopRun{}, err
	}
	s, err := runCoopOnce(ctx, env, bc, o.dur)
	if err != nil {
		return coopRun{}, fmt.Errorf("%d hosts, %s: %w", n, mode, err)
	}
	st := s.stats(allHosts(n), o.warm.Seconds(), o.dur.Seconds()+1)
	run := coopRun{N: n, Mode: mode, Dir: dir, Stats: st, Series: s}
	if mode == "lanes" {
		run.Cap = medianCap(s, o.warm.Seconds())
		run.CapChangesPerMin = capChangesPerMinute(s, n, (o.warm.Seconds()+o.dur.Seconds())/2)
	}
	return run, nil
}

// coopRow is one run's row of the coop table.
func coopRow(c *coopCommon, run coopRun) []string {
	st := run.Stats
	capS, chgS, stopS := "-", "-", "-"
	if run.Mode == "lanes" {
		capS, chgS = strconv.Itoa(int(run.Cap)), fmt.Sprintf("%.1f", run.CapChangesPerMin)
		stopS = stopsText(cappingStops(run.Series, allHosts(run.N)))
	}
	return []string{run.Dir, strconv.Itoa(run.N), run.Mode, mbit(st.TotalMbit), minMax(st.PerHostMbit),
		fmt.Sprintf("%.3f", st.JainStep), fmt.Sprintf("%.3f", st.JainAir), fmt.Sprintf("%.3f", st.JainRun), fmt.Sprintf("%.0f", st.RTTms),
		fmt.Sprintf("%.0f", st.RTTp95ms), fmt.Sprintf("%.1f", st.IdlePct), fmt.Sprintf("%.1f", st.QueueP50KB), fmt.Sprintf("%.3f", st.OtherMbit),
		dcfPct(c.medium, st.AirLostPct), dcfPct(c.medium, st.CollidedPct), strconv.Itoa(int(st.Retrans)), capS, chgS, stopS}
}

// perHostTable lists every run's per-host goodput.
func perHostTable(runs []coopRun) testbed.Table {
	per := testbed.Table{Title: "per-host goodput, Mbit/s", Columns: []string{"dir", "N", "mode", "hosts"}}
	for _, run := range runs {
		var parts []string
		for _, v := range run.Stats.PerHostMbit {
			parts = append(parts, fmt.Sprintf("%.2f", v))
		}
		per.Rows = append(per.Rows, []string{run.Dir, strconv.Itoa(run.N), run.Mode, strings.Join(parts, " ")})
	}
	return per
}

// coopNotes say what the coop experiment's columns measure.
func coopNotes(medium string) []string {
	return []string{
		"goodput = bytes the server received per host (up) or each host received (down); Jain 200ms = mean of per-200-ms indices of those bytes, Jain 200ms air = the same over each host's TCP payload leaving the shared medium (the AP's exit, independent of the readers' wake-ups), Jain run = index of the hosts' run averages",
		"AP idle % = share of the time the shared medium's serialiser had nothing to send (the capacity left unused); AP queue p50 = the medium's queue at the samples; AP non-TCP = what else the medium carried in that direction (the daemons' announcements: with --announce ipv4 or ipv6 one datagram per host and interval up and the same down, as an AP relays a broadcast (both: two); with --announce unicast one to every other lanes host, N(N-1) per interval, each crossing the medium's uplink and downlink)",
		"RTT = the senders' srtt (TCP monitor: the hosts' uploads, or the server's sockets of the downloads) every 200 ms; retrans = total retransmitted segments",
		"down: the server sends (CUBIC) to every host; lanes caps each download's receive window (downlink caps, TCP_WINDOW_CLAMP from sock_ops); cap = median downlink cap in segments (bytes / MSS)",
		"lanes = `lanes daemon` in every host (datapath: sock_ops clamp and the cap-enforcing congestion control; coop controller), ap_rate = the AP rate on the fifo medium, estimated on dcf (or --ap-rate), headroom as given; cap = median applied cap (segments), from the daemons' coop status; cap chg/min = changes of a host's applied cap per minute over the second half of the measured time (the steady state), from the daemons' counters; capping stopped = the daemons that reported capping off after capping (the safety fallback), and when (s from the start)",
		mediumNote(medium),
	}
}
