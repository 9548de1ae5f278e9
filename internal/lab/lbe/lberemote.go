// lberemote.go: the background lane where the queue is not lanes' own
// (issue 11): the emulator's link queue is the bottleneck, deep, with no
// host-side gate, as in a home router or a base station.
//
//	phone ──[trace or fixed rate up, delay, deep queue]──► fgsrv (HTTP, UDP echo)
//	      ◄─[trace or fixed rate down, delay, deep queue]─ bgsrv, bgsrv2 (HTTP; QUIC)
//
// One testbed per (link, background direction, transport, method, round),
// the transport of the background flows being TCP, TCP whose app sets its
// own congestion control, or QUIC (lberemote_transport.go); every time
// below is an offset from the start of the phone's links, so each method
// meets the same stretch of trace at each step (paired design):
//
//	0 .. warmup        background alone: its share of the link and a UDP
//	                   probe every 100 ms to fgsrv, over [3 s, warmup - 2.5 s)
//	warmup + i x slot  foreground transfer i (GET/POST of the lbe sizes, one
//	                   order per round, the same for every method); a
//	                   transfer that overruns its slot delays the next (counted)
//	then, bulk-for     an interactive CUBIC bulk transfer in the background's
//	                   direction: the background's share under it
//	then, jain-for     a second background flow (to bgsrv2) joins the first,
//	                   which has run all along: Jain's index of the two over
//	                   the window's last two thirds
//
// Methods: no background; CUBIC background (no lanes); lanes before issue 11
// (default policy, background keeps the system congestion control and
// receive window, no yield); LEDBAT++ only; LEDBAT++ + rLEDBAT +
// foreground-aware yield (the default policy). Throughput is counted at the
// emulator per server address (uplink: destination, downlink: source).
package lbe

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/lab/varlink"
	"github.com/lanes-net/lanes/internal/policy"
)

// RemoteMethod is one way of running the background.
type RemoteMethod struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	BG    bool   `json:"background"`
	Lanes bool   `json:"lanes"`
	// Background is the policy's `background:` section appended to the
	// default policy ("" = the default policy as it is).
	Background string `json:"policy_background,omitempty"`
	// Daemon are the daemon's extra flags (lab switches, not policy).
	Daemon []string `json:"daemon_flags,omitempty"`
}

// RemoteMethods are the methods of lbe-remote.
var RemoteMethods = []RemoteMethod{
	{"none", "no background", false, false, "", nil},
	{"cubic", "CUBIC background, no lanes", true, false, "", nil},
	{"lanes0", "lanes before LEDBAT++ (default policy, system CC)", true, true,
		"background:\n  congestion_control: system\n  receive_window: system\n  yield: false\n", nil},
	{"ledbat", "LEDBAT++ only", true, true, "background:\n  receive_window: system\n  yield: false\n", nil},
	{"full", "LEDBAT++ + rLEDBAT + yield (default policy)", true, true, "", nil},
	// the share rule beside a present foreground with parts left off
	// (datapath.ShareParts), paired with full in one run
	{"full-share0", "full, sharing with LEDBAT++'s own decrease and slowdowns, downloads held", true, true, "",
		[]string{"--share-rule-off", "all"}},
	{"full-noslope", "full, sharing without the gentler decrease", true, true, "", []string{"--share-rule-off", "slope"}},
	{"full-nodefer", "full, sharing with periodic slowdowns", true, true, "", []string{"--share-rule-off", "defer"}},
	{"full-nogrow", "full, sharing with LEDBAT++'s own growth below the share target", true, true, "", []string{"--share-rule-off", "grow"}},
	{"full-nodl", "full, downloads held beside a present foreground", true, true, "", []string{"--share-rule-off", "download"}},
	// the QUIC/UDP class's bucket left full at a decrease (bgudp.Rule.KeepTokens)
	{"full-keeptokens", "full, the QUIC/UDP class's bucket left as it is at a decrease", true, true, "", []string{"--bg-udp-keep-tokens"}},
	// the QUIC/UDP class's decrease beside a foreground at the share
	// target's slope (bgudp.RuleParts)
	{"full-udpslope", "full, the QUIC/UDP class's decrease beside a foreground at the share target's slope", true, true, "",
		[]string{"--bg-udp-rule-off", "slope"}},
	// the QUIC/UDP class's arrivals held at the yield's rate beside any
	// present foreground (bgudp.RuleParts.Arrivals)
	{"full-udpholddl", "full, the QUIC/UDP class's arrivals held beside a present foreground", true, true, "",
		[]string{"--bg-udp-rule-off", "arrivals"}},
	// a present foreground no TCP sample speaks for (a call: UDP) holds
	// background at the minimum, its arrivals not presence (--untold-held)
	{"full-untoldheld", "full, held beside a foreground without TCP RTT samples (UDP), its arrivals not presence", true, true, "",
		[]string{"--untold-held"}},
	// a harm in either direction holds background both ways, every delay
	// read from the RTT (--directions-joined): the rule directions apart
	// replaced
	{"full-joined", "full, a harm in either direction holds both, delays from the RTT", true, true, "",
		[]string{"--directions-joined"}},
	// a foreground quiet a fixed 150 ms after its last stamp
	// (--quiet-fixed): the rule the measured quiet replaced
	{"full-quietfixed", "full, a foreground quiet 150 ms after its last stamp, not six gaps between its stamps", true, true, "",
		[]string{"--quiet-fixed"}},
	// a background upload's window that keeps no rate through the other
	// direction's queue, its growth scaled instead (--rate-unkept): the
	// rule keeping the rate replaced
	{"full-rateunkept", "full, a background upload's window keeps no rate through the other direction's queue", true, true, "",
		[]string{"--rate-unkept"}},
	// the upload capacity estimate from the bytes acked over their ACKs'
	// arrival alone (--rate-by-acks): the rule timing their sending too
	// replaced
	{"full-ratebyacks", "full, the upload capacity estimate by the ACKs' arrival alone", true, true, "",
		[]string{"--rate-by-acks"}},
	// a background upload that keeps the window a loss the kernel found
	// spurious took (--no-undo): the rule giving it back replaced
	{"full-noundo", "full, a background upload keeps the window a spurious loss took", true, true, "",
		[]string{"--no-undo"}},
	// the QUIC/UDP class's egress policed (drops over its rate), not
	// shaped (bgudp.RuleParts.Shape)
	{"full-udppolice", "full, the QUIC/UDP class's egress policed, not shaped", true, true, "",
		[]string{"--bg-udp-rule-off", "shape"}},
	// the QUIC/UDP class's queue its probes' whole RTT, the other
	// direction's not taken off (experiments.BgUDPOff.BothWays)
	{"full-udpbothways", "full, the QUIC/UDP class's queue its probes' RTT both ways", true, true, "",
		[]string{"--bg-udp-rule-off", "both-ways"}},
	// the QUIC/UDP class's download link measured from its own arrivals,
	// not every lane's (experiments.BgUDPOff.OwnLink)
	{"full-udpownlink", "full, the QUIC/UDP class's download link from its own arrivals", true, true, "",
		[]string{"--bg-udp-rule-off", "own-link"}},
	// shaped arrivals bounded by the whole measured link, not the room
	// the other lanes leave (experiments.BgUDPOff.Room)
	{"full-udpwholelink", "full, the QUIC/UDP class's shaped arrivals bounded by the whole link", true, true, "",
		[]string{"--bg-udp-rule-off", "room"}},
	// the QUIC/UDP class grows back a share of the link a step between a
	// foreground's bursts (experiments.BgUDPOff.Bursts)
	{"full-udpbursts", "full, the QUIC/UDP class grows back between a foreground's bursts a share of the link a step", true, true, "",
		[]string{"--bg-udp-rule-off", "bursts"}},
}

// RemoteConfig configures a run.
type RemoteConfig struct {
	Links     []string       `json:"links"` // "fixed", "variable", or a trace pair's name ("TMobile-LTE-short": .up and .down)
	FixedRate float64        `json:"fixed_rate_bps"`
	Delay     time.Duration  `json:"one_way_delay_ns"`
	QueueTime time.Duration  `json:"queue_time_ns"` // each link's buffer, as time at its mean rate
	BGDirs    []string       `json:"background_directions"`
	FGDirs    []string       `json:"foreground_directions"`
	SizesKB   []int          `json:"sizes_kb"`
	Methods   []RemoteMethod `json:"methods"`
	Reps      int            `json:"repetitions"`
	Warmup    time.Duration  `json:"warmup_ns"`
	Slot      time.Duration  `json:"slot_ns"`
	BulkFor   time.Duration  `json:"bulk_for_ns"`
	JainFor   time.Duration  `json:"jain_for_ns"`
	CC        string         `json:"congestion_control"`
	Seed      int64          `json:"seed"`
	Lanes     string         `json:"lanes_binary,omitempty"`
	Target    time.Duration  `json:"target_delay_ns,omitempty"` // background.target_delay for the lanes methods (0: the policy's default)
	// BGTransports are the background flows' transports, each a testbed
	// of its own per method (lberemote_transport.go).
	BGTransports []string `json:"background_transports"`
	// MonitorDir: if set, every testbed's phone runs `lanes monitor` into
	// DIR/LINK-BGDIR-METHOD-rROUND.csv (per-flow cwnd, RTT, min RTT; draw
	// with `lanes plot`).
	MonitorDir string `json:"monitor_dir,omitempty"`
	// SteadyFor: the last step, the background beside a steady
	// foreground paced at SteadyShare of the link (lberemote_steady.go;
	// 0: no such step).
	SteadyFor   time.Duration `json:"steady_for_ns,omitempty"`
	SteadyShare float64       `json:"steady_share,omitempty"`
	// SteadyOf: of which rate a traced link's steady foreground takes
	// SteadyShare: SteadyOfStep, the link's capacity over the step (its
	// settling and window); "" the whole trace's mean rate, which on the
	// LTE traces' steady windows is 61-83 % of their capacity there.
	SteadyOf string `json:"steady_of,omitempty"`
	// SteadyFG: the steady foreground's kinds, each a steady step of its
	// own, one after the other (SteadyTCP, SteadyUDP; empty: TCP).
	SteadyFG []string `json:"steady_foregrounds,omitempty"`
}

// RemoteTrial is one foreground transfer.
type RemoteTrial struct {
	Dir     string  `json:"dir"`
	SizeKB  int     `json:"size_kb"`
	Offset  float64 `json:"offset_s"` // when it started, from the links' start
	Late    bool    `json:"late"`     // the previous transfer overran its slot
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
}

// RemoteRun is one testbed's results.
type RemoteRun struct {
	Link        string        `json:"link"`
	BGDir       string        `json:"background_direction"`
	Method      string        `json:"method"`
	Transport   string        `json:"background_transport,omitempty"` // "" without background
	Round       int           `json:"round"`
	ProbeMs     []float64     `json:"probe_rtt_ms"`
	ProbeLost   int           `json:"probe_lost"`
	BGAlone     float64       `json:"bg_alone_share"`  // of the link's capacity over [AloneFrom, AloneTo)
	AloneFrom   float64       `json:"bg_alone_from_s"` // the window of BGAlone and the probe (s from the links' start)
	AloneTo     float64       `json:"bg_alone_to_s"`
	BGUnderBulk float64       `json:"bg_under_fg_share"` // under the interactive bulk flow
	FGBulk      float64       `json:"fg_bulk_share"`     // the interactive bulk flow's
	Jain        float64       `json:"jain"`              // two background flows
	JainShares  [2]float64    `json:"jain_shares"`       // their shares of the link
	Trials      []RemoteTrial `json:"trials"`
	// Timeline: Mbit/s per timelineBin from the links' start, in the
	// background's direction: the link's capacity and what each server
	// exchanged (bg, bg2: background flows; fg: foreground transfers and
	// the interactive bulk flow).
	Timeline map[string][]float64 `json:"timeline,omitempty"`
	JainFrom float64              `json:"jain_from_s,omitempty"` // the second background flow started (s)
	// BGSocketCC: the first background socket's congestion control after
	// its app set its own (tcp-app-cc only).
	BGSocketCC string `json:"bg_socket_cc,omitempty"`
	// Steady: the steady steps (lberemote_steady.go), one per
	// foreground kind of --steady-fg, in its order.
	Steady []RemoteSteady `json:"steady,omitempty"`
	// ChurnSignal: the daemon's background state over the churn window
	// (lberemote_signal.go; lanes methods).
	ChurnSignal *RemoteSignal `json:"churn_signal,omitempty"`
	// ChurnIdle: the background's bytes ÷ the idle capacity beside a
	// foreground opening a connection every churnEvery.
	ChurnIdle float64 `json:"churn_bg_of_idle,omitempty"`
}

// remoteBed is one running testbed.
type remoteBed struct {
	bed         *testbed.Bed
	phone       *topo.Node
	fg, bg, bg2 *topo.Node
	up, down    *emu.Link
	meter       *remoteMeter
	sock        string
	cfg         *RemoteConfig
	m           RemoteMethod
	transport   string // the background's ("" without)
	base        time.Time
}

// remoteLinks returns the phone's link configurations for link name.
func (c *RemoteConfig) remoteLinks(name string) (up, down emu.LinkConfig, err error) {
	up = emu.LinkConfig{Delay: c.Delay}
	down = emu.LinkConfig{Delay: c.Delay}
	switch name {
	case "fixed":
		up.Rate, down.Rate = c.FixedRate, c.FixedRate
	case variableLink:
		up.Trace = emu.VariableTrace(varlink.Seed, variableSteps)
		down.Trace = emu.VariableTrace(varlink.Seed+1, variableSteps)
	default:
		if up.Trace, err = testbed.LoadTrace(name + ".up"); err != nil {
			return
		}
		if down.Trace, err = testbed.LoadTrace(name + ".down"); err != nil {
			return
		}
	}
	for _, l := range []*emu.LinkConfig{&up, &down} {
		rate := l.Rate
		if l.Trace != nil {
			rate = l.Trace.MeanRate()
		}
		l.QueueBytes = max(int(rate/8*c.QueueTime.Seconds()), minQueueBytes)
	}
	return
}

// variableLink is the variable-rate link's name in --links: each
// direction steps every 500 ms between 1.5 and 16 Mbit/s
// (internal/lab/varlink), the uplink on the tests' sequence, the downlink
// on the next seed's; variableSteps of it, then it repeats (a minute).
const (
	variableLink  = "variable"
	variableSteps = 120
)

// minQueueBytes is a link buffer's floor: three full packets, so that a
// slow link's buffer stays the --queue asked for (0.2 Mbit/s x 100 ms is
// 2.5 KB; a 64 KB floor made it 2.6 s).
const minQueueBytes = 3 * 1514

func newRemoteBed(ctx context.Context, env *testbed.Env, c *RemoteConfig, link string, cs remoteCase) (_ *remoteBed, err error) {
	upCfg, downCfg, err := c.remoteLinks(link)
	if err != nil {
		return nil, err
	}
	bed, err := testbed.NewBed(env, c.CC)
	if err != nil {
		return nil, err
	}
	m := cs.Method
	rb := &remoteBed{bed: bed, cfg: c, m: m, transport: cs.Transport, meter: newRemoteMeter()}
	defer func() {
		if err != nil {
			bed.Close()
		}
	}()
	rb.up, rb.down = bed.Emu.NewUplink(upCfg), bed.Emu.NewDownlink(downCfg)
	// No gate and no back-pressure: the phone's packets go straight into
	// the emulator's deep queue, which is the bottleneck.
	if rb.phone, err = bed.AddHost("phone", c.CC, rb.up, rb.down, testbed.HostOpts{TxQueueLen: 1000}); err != nil {
		return nil, err
	}
	srv := map[string]**topo.Node{"fgsrv": &rb.fg, "bgsrv": &rb.bg, "bgsrv2": &rb.bg2}
	for _, name := range []string{"fgsrv", "bgsrv", "bgsrv2"} {
		if *srv[name], err = bed.AddHost(name, c.CC, bed.Emu.NewUplink(emu.LinkConfig{}), bed.Emu.NewDownlink(emu.LinkConfig{}), testbed.HostOpts{}); err != nil {
			return nil, err
		}
	}
	if m.Lanes {
		if err := rb.startDaemon(ctx); err != nil {
			return nil, err
		}
	}
	bed.Emu.OnUp = func(b []byte) { rb.meter.see("upload", b) }
	bed.Emu.OnDown = func(b []byte) { rb.meter.see("download", b) }
	bed.Start(ctx)
	for _, s := range []*topo.Node{rb.fg, rb.bg, rb.bg2} {
		p, err := s.Start("serve", "--listen", ":80")
		if err != nil {
			return nil, err
		}
		if l, err := p.Line(ctx, 15*time.Second); err != nil || l != "ready" {
			return nil, fmt.Errorf("server in %s: %q %v", s.Name, l, err)
		}
	}
	if err := rb.startQUICServers(ctx); err != nil {
		return nil, err
	}
	if p, err := rb.fg.Start("echo", "--listen", ":7"); err != nil {
		return nil, err
	} else if l, err := p.Line(ctx, 15*time.Second); err != nil || l != "ready" {
		return nil, fmt.Errorf("echo server: %q %v", l, err)
	}
	for rb.base = rb.up.Base(); rb.base.IsZero(); rb.base = rb.up.Base() {
		if err := testbed.SleepCtx(ctx, time.Millisecond); err != nil {
			return nil, err
		}
	}
	rb.meter.mu.Lock()
	rb.meter.t0 = rb.base
	rb.meter.mu.Unlock()
	return rb, nil
}

// startDaemon runs the lanes daemon in the phone with the default policy
// (plus the method's background: section) and waits for its tree.
func (rb *remoteBed) startDaemon(ctx context.Context) error {
	if !testbed.LanesAvailable(rb.cfg.Lanes) {
		return fmt.Errorf("method %s needs the lanes daemon (%s has none)", rb.m.ID, rb.cfg.Lanes)
	}
	dir, err := os.MkdirTemp("", "lanes-lab-policy-")
	if err != nil {
		return err
	}
	rb.bed.PolicyFiles = append(rb.bed.PolicyFiles, dir)
	pol := filepath.Join(dir, "policy.yaml")
	bg := rb.m.Background
	if rb.cfg.Target > 0 {
		if bg == "" {
			bg = "background:\n"
		}
		bg += fmt.Sprintf("  target_delay: %v\n", rb.cfg.Target)
	}
	text := string(policy.DefaultYAMLWithout("background")) + bg
	if err := os.WriteFile(pol, []byte(text), 0o644); err != nil {
		return err
	}
	rb.sock = filepath.Join(dir, "lanes.sock")
	d, err := rb.phone.StartCommand(rb.cfg.Lanes, append([]string{"daemon", "--policy", pol, "--socket", rb.sock}, rb.m.Daemon...)...)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(rb.sock); err == nil {
			if out, err := rb.phone.Run("tc", "qdisc", "show", "dev", testbed.TUNName); err == nil && strings.Contains(out, "htb") {
				return nil
			}
		}
		select {
		case <-d.Done():
			return fmt.Errorf("lanes daemon exited: %v", d.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lanes daemon did not install its tree on %s within 20 s", testbed.TUNName)
		}
	}
}

// monitor records the phone's TCP flows into cfg.MonitorDir/name.csv for
// the life of the bed (nothing without a MonitorDir). The lane column
// comes from the phone's daemon, whose API socket is the bed's own (not
// the default path, where no daemon or another namespace's answers).
func (rb *remoteBed) monitor(name string) error {
	if rb.cfg.MonitorDir == "" {
		return nil
	}
	if err := os.MkdirAll(rb.cfg.MonitorDir, 0o755); err != nil {
		return err
	}
	args := []string{"monitor", "--csv", "--interval", "50ms",
		"--output", filepath.Join(rb.cfg.MonitorDir, name+".csv"), "--dst", "10.0.0.0/8"}
	if rb.sock != "" {
		args = append(args, "--socket", rb.sock)
	}
	_, err := rb.phone.StartCommand(rb.cfg.Lanes, args...)
	return err
}

// until sleeps until offset d from the links' start; false if already past.
func (rb *remoteBed) until(ctx context.Context, d time.Duration) (bool, error) {
	return untilOffset(ctx, rb.up, d)
}

// untilOffset sleeps until offset d from link l's start (its trace's
// time 0); false if that is already past.
func untilOffset(ctx context.Context, l *emu.Link, d time.Duration) (bool, error) {
	base := l.Base()
	for base.IsZero() {
		if err := testbed.SleepCtx(ctx, time.Millisecond); err != nil {
			return false, err
		}
		base = l.Base()
	}
	wait := time.Until(base.Add(d))
	if wait <= 0 {
		return false, nil
	}
	return true, testbed.SleepCtx(ctx, wait)
}

// sinceBase is the time since link l's start (0 before it started).
func sinceBase(l *emu.Link) time.Duration {
	if b := l.Base(); !b.IsZero() {
		return time.Since(b)
	}
	return 0
}

// startBG starts a background transfer in dir to server s.
func (rb *remoteBed) startBG(dir string, s *topo.Node, background bool) (*topo.Proc, error) {
	args := rb.bgHelperArgs(dir, s, background)
	if background && rb.m.Lanes {
		return rb.phone.StartCommand(rb.cfg.Lanes, append([]string{"run", "--lane", "background", "--socket", rb.sock, "--",
			rb.cfg.Lanes, "lab", "helper"}, args...)...)
	}
	return rb.phone.Start(args...)
}

// share is server s's bytes in dir over [from, to) as a share of the link.
func (rb *remoteBed) share(dir string, s *topo.Node, from, to time.Duration) float64 {
	l := rb.up
	if dir == "download" {
		l = rb.down
	}
	c := capacity(l, from, to)
	if c <= 0 {
		return 0
	}
	return float64(rb.meter.bytes(dir, s.Addr, from, to)) / c
}

// transfer runs one foreground GET or POST to fgsrv.
func (rb *remoteBed) transfer(ctx context.Context, dir string, sizeKB int) (RemoteTrial, error) {
	tr := RemoteTrial{Dir: dir, SizeKB: sizeKB, Offset: time.Since(rb.base).Seconds()}
	res, err := foregroundTransfer(ctx, rb.phone, dir, "http://"+rb.fg.Addr.String()+":80", sizeKB)
	if err != nil {
		return tr, err
	}
	tr.Seconds, tr.Error = res.Seconds, res.Error
	return tr, nil
}

// run plays the schedule on the bed.
func (rb *remoteBed) run(ctx context.Context, bgDir string, order []lbePair) (RemoteRun, error) {
	c := rb.cfg
	r := RemoteRun{BGDir: bgDir, Method: rb.m.ID, Transport: rb.transport}
	var bg *topo.Proc
	var err error
	if rb.m.BG {
		if bg, err = rb.startBG(bgDir, rb.bg, true); err != nil {
			return r, err
		}
		defer bg.Kill()
	}
	probeFrom, probeTo := aloneWindow(c.Warmup)
	if r.ProbeMs, r.ProbeLost, err = rb.probe(ctx, probeFrom, probeTo); err != nil {
		return r, err
	}
	if rb.m.BG && rb.transport == TransportTCPAppCC {
		if r.BGSocketCC, err = appSocketCC(ctx, bg); err != nil {
			return r, err
		}
	}
	r.BGAlone = rb.share(bgDir, rb.bg, probeFrom, probeTo)
	r.AloneFrom, r.AloneTo = probeFrom.Seconds(), probeTo.Seconds()
	at := c.Warmup
	for _, p := range order {
		onTime, err := rb.until(ctx, at)
		if err != nil {
			return r, err
		}
		tr, err := rb.transfer(ctx, p.dir, p.size)
		if err != nil {
			return r, err
		}
		tr.Late = !onTime
		r.Trials = append(r.Trials, tr)
		at += c.Slot
	}
	steadyAt := c.steadyAt(len(order))
	if !rb.m.BG {
		return r, rb.steady(ctx, &r, bgDir, steadyAt)
	}
	// An interactive CUBIC bulk flow in the background's direction.
	if _, err := rb.until(ctx, at); err != nil {
		return r, err
	}
	fg, err := rb.startBG(bgDir, rb.fg, false)
	if err != nil {
		return r, err
	}
	settle := c.BulkFor / 4
	if err := testbed.SleepCtx(ctx, c.BulkFor); err != nil {
		return r, err
	}
	rb.endBulk(fg)
	r.BGUnderBulk = rb.share(bgDir, rb.bg, at+settle, at+c.BulkFor)
	r.FGBulk = rb.share(bgDir, rb.fg, at+settle, at+c.BulkFor)
	// A second background flow joins the first (which has run all along),
	// once the bulk flow's last packets have left the link's queue.
	if err := testbed.SleepCtx(ctx, c.QueueTime); err != nil {
		return r, err
	}
	at = sinceBase(rb.up)
	bg2, err := rb.startBG(bgDir, rb.bg2, true)
	if err != nil {
		return r, err
	}
	defer bg2.Kill()
	if _, err := rb.until(ctx, at+c.JainFor); err != nil {
		return r, err
	}
	from, to := at+c.JainFor/3, at+c.JainFor
	r.JainShares = [2]float64{rb.share(bgDir, rb.bg, from, to), rb.share(bgDir, rb.bg2, from, to)}
	r.Jain = testbed.Jain(r.JainShares[:])
	r.JainFrom = at.Seconds()
	r.Timeline = rb.timeline(bgDir, at+c.JainFor)
	bg2.Kill()
	return r, rb.steady(ctx, &r, bgDir, max(steadyAt, sinceBase(rb.up)))
}

// aloneWindow is when the background alone is measured (its share of the
// link, and the probe): from 3 s (a third of a shorter warmup), when the
// daemon and the transfer have started and slow start is over, to 2.5 s
// before the first foreground transfer, which the probes' late answers
// (waited for) would otherwise delay. A longer --warmup lengthens it.
func aloneWindow(warmup time.Duration) (from, to time.Duration) {
	return min(3*time.Second, warmup/3), warmup - 2500*time.Millisecond
}

// endBulk ends the interactive bulk flow at once: its process (the helper
// waits for no SIGTERM) and its sockets, so that no orphan goes on
// draining megabytes of send buffer into the link while the next step runs.
func (rb *remoteBed) endBulk(p *topo.Proc) {
	p.Kill()
	_, _ = rb.phone.Run("ss", "-K", "-t", "dst", rb.fg.Addr.String())
}

// RunRemote runs every link, background direction, method, transport and
// round.
func RunRemote(ctx context.Context, env *testbed.Env, c *RemoteConfig) ([]RemoteRun, error) {
	cases := remoteCases(c.Methods, c.BGTransports)
	rng := rand.New(rand.NewSource(c.Seed))
	var pairs []lbePair
	for _, d := range c.FGDirs {
		for _, s := range c.SizesKB {
			pairs = append(pairs, lbePair{d, s})
		}
	}
	var runs []RemoteRun
	for round := 0; round < c.Reps; round++ {
		for _, link := range c.Links {
			for _, bgDir := range c.BGDirs {
				// one transfer order per (round, link, direction), the same
				// for every method: paired with the trace's offsets
				order := append([]lbePair(nil), pairs...)
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
				for _, ci := range rng.Perm(len(cases)) {
					r, err := runRemoteCase(ctx, env, c, link, bgDir, round, cases[ci], order)
					if err != nil {
						return runs, err
					}
					runs = append(runs, r)
				}
			}
		}
	}
	return runs, nil
}

// runRemoteCase runs one testbed: case cs on link, background in bgDir.
func runRemoteCase(ctx context.Context, env *testbed.Env, c *RemoteConfig, link, bgDir string, round int, cs remoteCase, order []lbePair) (RemoteRun, error) {
	m := cs.Method
	what := m.ID
	if cs.Transport != "" {
		what += " over " + cs.Transport
	}
	env.Printf("round %d/%d link %s background %s method %s (%s)\n", round+1, c.Reps, link, bgDir, what, m.Name)
	rb, err := newRemoteBed(ctx, env, c, link, cs)
	if err != nil {
		return RemoteRun{}, fmt.Errorf("%s %s %s: %w", link, bgDir, what, err)
	}
	defer rb.bed.Close()
	name := fmt.Sprintf("%s-%s-%s-r%d", link, bgDir, m.ID, round+1)
	if cs.Transport != "" && len(c.BGTransports) > 1 {
		name = fmt.Sprintf("%s-%s-%s-%s-r%d", link, bgDir, cs.Transport, m.ID, round+1)
	}
	if err := rb.monitor(name); err != nil {
		return RemoteRun{}, err
	}
	r, err := rb.run(ctx, bgDir, order)
	if err != nil {
		return r, fmt.Errorf("%s %s %s: %w", link, bgDir, what, err)
	}
	r.Link, r.Round = link, round
	return r, nil
}
