// lberemote_steady.go: lbe-remote's last steps (--steady-for), the
// background beside a steady foreground in the background's direction at
// --steady-share of the link's mean rate, with the probe every 100 ms:
// one step per kind of --steady-fg, one after the other (a TCP stream to
// or from fgsrv paced by the kernel, SO_MAX_PACING_RATE; a constant-rate
// UDP stream, lberemote_udpfg.go). Every step starts at the same offset
// into the links for every method, the no-background method included:
// its probe is the foreground alone, the pair of every method's step of
// the same kind. Figures: the background's bytes ÷ what the foreground
// left of the link's capacity (the idle capacity), and the probe's p95
// against the foreground alone. Then, as long again, the churn step: a
// foreground that opens a connection to fgsrv every 300 ms (a 1 KB GET
// each), the background's bytes ÷ the idle capacity beside it.
package lbe

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

// steadySettle is how long the steady foreground runs before the
// measurement window opens (its slow start, the background's reaction).
const steadySettle = 3 * time.Second

// steadyAt is the offset into the links of the steady step: after the
// transfers, the bulk step and the join step, and the queue's drain.
func (c *RemoteConfig) steadyAt(transfers int) time.Duration {
	return c.Warmup + time.Duration(transfers)*c.Slot + c.BulkFor + c.QueueTime + c.JainFor + 2*time.Second
}

// RemoteSteady is one steady step's figures: the probe, the
// foreground's share of the link, the background's bytes ÷ the idle
// capacity and that capacity, the daemon's background state.
type RemoteSteady struct {
	Kind      string    `json:"foreground"` // SteadyTCP or SteadyUDP
	ProbeMs   []float64 `json:"probe_rtt_ms,omitempty"`
	ProbeLost int       `json:"probe_lost,omitempty"`
	FG        float64   `json:"fg_share,omitempty"`
	Idle      float64   `json:"bg_of_idle,omitempty"`
	From      float64   `json:"from_s,omitempty"`
	// IdleMbps: the capacity the foreground left idle, Mbit/s (the
	// denominator of Idle).
	IdleMbps float64       `json:"idle_mbps,omitempty"`
	Signal   *RemoteSignal `json:"signal,omitempty"`
	// RateMbps: the foreground's pace, Mbit/s.
	RateMbps float64 `json:"fg_rate_mbps,omitempty"`
	// PageS: the pageload kind's page completion times, s, in start order.
	PageS []float64 `json:"page_s,omitempty"`
}

// SteadyOfStep: a traced link's steady foreground is paced at a share of
// the link's capacity over the step (RemoteConfig.SteadyOf).
const SteadyOfStep = "step"

// steadyRate is the steady foreground's pace from offset at on link l,
// bytes/s: SteadyShare of the link's rate; on a trace, of its capacity
// over the step (SteadyOfStep) or of the whole trace's mean rate.
func (c *RemoteConfig) steadyRate(l *emu.Link, at time.Duration) int {
	tr := l.Config().Trace
	switch {
	case tr == nil:
		return int(c.SteadyShare * capacity(l, 0, time.Second))
	case c.SteadyOf == SteadyOfStep:
		span := steadySettle + c.SteadyFor
		return int(c.SteadyShare * capacity(l, at, at+span) / span.Seconds())
	}
	return int(c.SteadyShare * tr.MeanRate() / 8)
}

// steadyKinds are the configuration's steady foregrounds (TCP if none).
func (c *RemoteConfig) steadyKinds() []string {
	if len(c.SteadyFG) == 0 {
		return []string{SteadyTCP}
	}
	return c.SteadyFG
}

// steadyStepLen is one steady step's length: the settling, the window,
// and 2 s for the link's queue to drain before the next step.
func (c *RemoteConfig) steadyStepLen() time.Duration {
	return steadySettle + c.SteadyFor + 2*time.Second
}

// steady plays the steady steps, one per foreground kind, then the churn
// step, into r (nothing with SteadyFor 0).
func (rb *remoteBed) steady(ctx context.Context, r *RemoteRun, dir string, at time.Duration) error {
	c := rb.cfg
	if c.SteadyFor <= 0 {
		return nil
	}
	l := rb.up
	if dir == "download" {
		l = rb.down
	}
	for _, kind := range c.steadyKinds() {
		s, err := rb.steadyStep(ctx, l, kind, dir, at)
		r.Steady = append(r.Steady, s)
		if err != nil {
			return err
		}
		at += c.steadyStepLen()
	}
	return rb.churn(ctx, r, dir, l, at)
}

// steadyStep plays one steady step from offset at on link l: the
// foreground of kind at --steady-share of the link's mean rate.
func (rb *remoteBed) steadyStep(ctx context.Context, l *emu.Link, kind, dir string, at time.Duration) (RemoteSteady, error) {
	c := rb.cfg
	s := RemoteSteady{Kind: kind}
	if _, err := rb.until(ctx, at); err != nil {
		return s, err
	}
	rate := c.steadyRate(l, at)
	s.RateMbps = float64(rate) * 8 / 1e6
	stop, err := rb.startSteadyFG(ctx, kind, dir, rate, &s)
	if err != nil {
		return s, err
	}
	stopOnce := sync.OnceFunc(stop)
	defer stopOnce()
	from := at + steadySettle
	to := from + c.SteadyFor
	if _, err := rb.until(ctx, from); err != nil {
		return s, err
	}
	signal := rb.sampleSignal(ctx)
	s.ProbeMs, s.ProbeLost, err = rb.probe(ctx, from, to)
	s.Signal = signal()
	if err != nil {
		return s, err
	}
	stopOnce() // its figures (pageload's pages) into s
	capBytes := capacity(l, from, to)
	fgBytes := float64(rb.meter.bytes(dir, rb.fg.Addr, from, to))
	s.FG = fgBytes / capBytes
	if idle := capBytes - fgBytes; idle > 0 && rb.m.BG {
		s.Idle = float64(rb.meter.bytes(dir, rb.bg.Addr, from, to)) / idle
		s.IdleMbps = idle * 8 / c.SteadyFor.Seconds() / 1e6
	}
	s.From = from.Seconds()
	return s, nil
}

// churnEvery is the churn step's time between foreground connections.
const churnEvery = 300 * time.Millisecond

// churn plays the churn step from offset at into r.
func (rb *remoteBed) churn(ctx context.Context, r *RemoteRun, dir string, l *emu.Link, at time.Duration) error {
	if _, err := rb.until(ctx, at); err != nil {
		return err
	}
	fg, err := rb.phone.Start("churn", "--url", "http://"+rb.fg.Addr.String()+":80", "--every", churnEvery.String())
	if err != nil {
		return err
	}
	defer rb.endBulk(fg)
	from := at + time.Second
	to := from + rb.cfg.SteadyFor
	if _, err := rb.until(ctx, from); err != nil {
		return err
	}
	signal := rb.sampleSignal(ctx)
	_, err = rb.until(ctx, to)
	r.ChurnSignal = signal()
	if err != nil {
		return err
	}
	capBytes := capacity(l, from, to)
	fgBytes := float64(rb.meter.bytes(dir, rb.fg.Addr, from, to))
	if idle := capBytes - fgBytes; idle > 0 && rb.m.BG {
		r.ChurnIdle = float64(rb.meter.bytes(dir, rb.bg.Addr, from, to)) / idle
	}
	return nil
}

// steadyArgs is the helper running the steady foreground stream in dir to
// or from server s, paced at rate bytes/s.
func steadyArgs(dir string, s *topo.Node, rate int) []string {
	url := "http://" + s.Addr.String() + ":80"
	if dir == "download" {
		return []string{"get", "--url", url, "--bytes", "100000000000", "--timeout", "1h", "--rate", strconv.Itoa(rate)}
	}
	return []string{"bulk", "--url", url, "--rate", strconv.Itoa(rate)}
}

// steadyCell is one steady foreground kind's summary in a cell: bg ÷
// idle, the idle capacity, the foreground's share, the probe's p95 and
// its difference to the no-background run's, probes lost and sent, the
// daemon's background state; paired with the no-background run's step,
// the background's bytes ÷ what the foreground alone left idle (IdleAlone)
// and the foreground's bytes ÷ its bytes alone (FGOfAlone).
type steadyCell struct {
	Kind                     string
	Idle, FG, P95, Infl95    float64
	Lost, Sent               int
	Signal                   signalSum
	IdleMbps                 float64
	IdleAlone, FGOfAlone     float64
	runs, nIdleMbps, nInfl95 int
	nAlone                   int
	// PageOfAlone: pageload's mean page time ÷ the paired run's.
	PageOfAlone float64
	nPage       int
}

// addSteady adds run r's steady steps to the cell, each paired with the
// no-background run's step of the same kind (if hasBase).
func (c *remoteCell) addSteady(r, base RemoteRun, hasBase bool) {
	for _, s := range r.Steady {
		i := slices.IndexFunc(c.Steady, func(x steadyCell) bool { return x.Kind == s.Kind })
		if i < 0 {
			c.Steady = append(c.Steady, steadyCell{Kind: s.Kind})
			i = len(c.Steady) - 1
		}
		var b *RemoteSteady
		if hasBase {
			if j := slices.IndexFunc(base.Steady, func(x RemoteSteady) bool { return x.Kind == s.Kind }); j >= 0 {
				b = &base.Steady[j]
			}
		}
		c.Steady[i].add(s, b)
	}
}

// add adds one run's step s; b is the paired no-background step (or nil).
func (x *steadyCell) add(s RemoteSteady, b *RemoteSteady) {
	x.runs++
	if len(s.ProbeMs) > 0 {
		x.P95 += pctl(s.ProbeMs, .95)
		if b != nil && len(b.ProbeMs) > 0 {
			x.Infl95 += pctl(s.ProbeMs, .95) - pctl(b.ProbeMs, .95)
			x.nInfl95++
		}
	}
	if s.IdleMbps > 0 {
		x.IdleMbps += s.IdleMbps
		x.nIdleMbps++
	}
	if b != nil && b.FG > 0 && b.FG < 1 {
		// the same window of the same link (paired): bytes as shares of
		// its capacity; a background that slows the foreground does not
		// widen its own denominator
		x.IdleAlone += s.Idle * (1 - s.FG) / (1 - b.FG)
		x.FGOfAlone += s.FG / b.FG
		x.nAlone++
	}
	if b != nil {
		if r := pageOfAlone(s.PageS, b.PageS); r > 0 {
			x.PageOfAlone += r
			x.nPage++
		}
	}
	x.Idle += s.Idle
	x.FG += s.FG
	x.Lost += s.ProbeLost
	x.Sent += s.ProbeLost + len(s.ProbeMs)
	x.Signal.add(s.Signal)
}

// average turns the sums into means over the runs with this step.
func (x *steadyCell) average() {
	f := float64(max(x.runs, 1))
	x.Idle, x.FG, x.P95 = x.Idle/f, x.FG/f, x.P95/f
	if x.nInfl95 > 0 {
		x.Infl95 /= float64(x.nInfl95)
	}
	if x.nIdleMbps > 0 {
		x.IdleMbps /= float64(x.nIdleMbps)
	}
	if x.nPage > 0 {
		x.PageOfAlone /= float64(x.nPage)
	}
	if x.nAlone > 0 {
		x.IdleAlone /= float64(x.nAlone)
		x.FGOfAlone /= float64(x.nAlone)
	}
}

// steadyFGText names a steady foreground kind in the tables.
func steadyFGText(kind, share string) string {
	switch kind {
	case SteadyUDP:
		return "UDP at " + share
	case SteadyAppPaced:
		return "TCP app-paced at " + share
	case SteadyVideo:
		return "video at " + share
	case SteadyPageLoad:
		return "page loads"
	case SteadyOpposite:
		return "bulk, other way"
	}
	return "TCP paced at " + share
}

// steadyTable is the steady steps' table, a row per cell and foreground
// kind (nil without the step).
func steadyTable(cells []remoteCell, c *RemoteConfig) *testbed.Table {
	if c.SteadyFor <= 0 {
		return nil
	}
	t := testbed.Table{Title: "Beside a steady foreground in the background's direction (a TCP stream paced at, or a constant-rate UDP stream of, " + pcts(c.SteadyShare) +
		" of the link" + steadyOfText(c.SteadyOf) + ", each a step of its own, over " + c.SteadyFor.String() + " after " + steadySettle.String() +
		"): the background's bytes ÷ the capacity the foreground left idle, and that idle capacity, Mbit/s; the background's bytes ÷ the capacity the same foreground left idle alone (no background, paired: a background that slows the foreground does not widen its own denominator) and the foreground's bytes ÷ its bytes alone; the foreground's share; the probe's p95 and its difference to the same foreground alone (no background, paired), ms; probes lost of sent; page loads' mean completion time ÷ the same alone; then (on each cell's first row) beside a foreground opening a connection every " + churnEvery.String() + ": the background's bytes ÷ the idle capacity",
		Columns: []string{"link", "background", "transport", "method", "steady fg", "bg ÷ idle", "idle Mbit/s", "bg ÷ idle alone", "fg ÷ fg alone", "fg share", "probe p95", "p95 − fg alone", "probes lost", "pages ÷ alone", "churn: bg ÷ idle"}}
	for _, x := range cells {
		for i, s := range x.Steady {
			row := []string{x.Link, x.BGDir, orDash(x.Transport), x.Method, steadyFGText(s.Kind, pcts(c.SteadyShare))}
			idle, idleMbps, churn, alone, fgAlone := "-", "-", "-", "-", "-"
			if x.Method != "none" {
				idle, churn = f2(s.Idle), f2(x.ChurnIdle)
				if s.nAlone > 0 {
					alone, fgAlone = f2(s.IdleAlone), f2(s.FGOfAlone)
				}
			}
			if i > 0 {
				churn = ""
			}
			if s.nIdleMbps > 0 {
				idleMbps = f1(s.IdleMbps)
			}
			pages := "-"
			if s.nPage > 0 {
				pages = f2(s.PageOfAlone)
			}
			t.Rows = append(t.Rows, append(row, idle, idleMbps, alone, fgAlone, pcts(s.FG), f1(s.P95), f1(s.Infl95),
				strconv.Itoa(s.Lost)+" of "+strconv.Itoa(s.Sent), pages, churn))
		}
	}
	return &t
}

// steadyOfText says what a traced link's share is of.
func steadyOfText(of string) string {
	if of == SteadyOfStep {
		return " (a trace: of its capacity over the step)"
	}
	return " (a trace: of its mean rate)"
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
