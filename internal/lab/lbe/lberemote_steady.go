// lberemote_steady.go: lbe-remote's last step (--steady-for), the
// background beside a steady foreground: a TCP stream to or from fgsrv in
// the background's direction, paced by the kernel (SO_MAX_PACING_RATE) at
// --steady-share of the link's mean rate, with the probe every 100 ms.
// The step starts at the same offset into the links for every method
// (after the join step's end), the no-background method included: its
// probe is the foreground alone, the pair of every method's. Figures:
// the background's bytes ÷ what the foreground left of the link's
// capacity (the idle capacity), and the probe's p95 against the
// foreground alone. Then, as long again, the churn step: a foreground
// that opens a connection to fgsrv every 300 ms (a 1 KB GET each), the
// background's bytes ÷ the idle capacity beside it.
package lbe

import (
	"context"
	"strconv"
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

// steady plays the steady step into r (nothing with SteadyFor 0).
func (rb *remoteBed) steady(ctx context.Context, r *RemoteRun, dir string, at time.Duration) error {
	c := rb.cfg
	if c.SteadyFor <= 0 {
		return nil
	}
	if _, err := rb.until(ctx, at); err != nil {
		return err
	}
	l := rb.up
	if dir == "download" {
		l = rb.down
	}
	rate := int(c.SteadyShare * capacity(l, 0, time.Second)) // bytes/s: a share of the mean rate
	if tr := l.Config().Trace; tr != nil {
		rate = int(c.SteadyShare * tr.MeanRate() / 8)
	}
	fg, err := rb.phone.Start(steadyArgs(dir, rb.fg, rate)...)
	if err != nil {
		return err
	}
	defer rb.endBulk(fg)
	from := at + steadySettle
	to := from + c.SteadyFor
	if _, err := rb.until(ctx, from); err != nil {
		return err
	}
	signal := rb.sampleSignal(ctx)
	r.SteadyProbeMs, r.SteadyProbeLost, err = rb.probe(ctx, from, to)
	r.SteadySignal = signal()
	if err != nil {
		return err
	}
	capBytes := capacity(l, from, to)
	fgBytes := float64(rb.meter.bytes(dir, rb.fg.Addr, from, to))
	r.SteadyFG = fgBytes / capBytes
	if idle := capBytes - fgBytes; idle > 0 && rb.m.BG {
		r.SteadyIdle = float64(rb.meter.bytes(dir, rb.bg.Addr, from, to)) / idle
		r.SteadyIdleMbps = idle * 8 / c.SteadyFor.Seconds() / 1e6
	}
	r.SteadyFrom = from.Seconds()
	rb.endBulk(fg)
	return rb.churn(ctx, r, dir, l, to+2*time.Second)
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

// steadyTable is the steady step's table (nil without it).
func steadyTable(cells []remoteCell, c *RemoteConfig) *testbed.Table {
	if c.SteadyFor <= 0 {
		return nil
	}
	t := testbed.Table{Title: "Beside a steady foreground (a TCP stream paced at " + pcts(c.SteadyShare) +
		" of the link in the background's direction, over " + c.SteadyFor.String() + " after " + steadySettle.String() +
		"): the background's bytes ÷ the capacity the foreground left idle, and that idle capacity, Mbit/s; the foreground's share; the probe's p95 and its difference to the foreground alone (no background, paired), ms; probes lost of sent; then beside a foreground opening a connection every " + churnEvery.String() + ": the background's bytes ÷ the idle capacity",
		Columns: []string{"link", "background", "transport", "method", "bg ÷ idle", "idle Mbit/s", "fg share", "probe p95", "p95 − fg alone", "probes lost", "churn: bg ÷ idle"}}
	for _, x := range cells {
		row := []string{x.Link, x.BGDir, orDash(x.Transport), x.Method}
		idle, idleMbps, churn := "-", "-", "-"
		if x.Method != "none" {
			idle, churn = f2(x.SteadyIdle), f2(x.ChurnIdle)
		}
		if x.nSteadyIdle > 0 {
			idleMbps = f1(x.SteadyIdleMbps)
		}
		t.Rows = append(t.Rows, append(row, idle, idleMbps, pcts(x.SteadyFG), f1(x.SteadyP95), f1(x.SteadyInfl95), strconv.Itoa(x.SteadyLost)+" of "+strconv.Itoa(x.SteadySent), churn))
	}
	return &t
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
