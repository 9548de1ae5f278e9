// feedback.go: `lanes lab run lbe-feedback`, the LW-LBE paper's feedback-
// delay analysis (§5.5) measured.
//
// The background upload runs alone; then a foreground upload starts (t0).
// Feedback delay = time from the foreground's first packet leaving the
// uplink until the background flow's share of what the uplink delivers
// falls below 10% (bins of 100 ms, share = background bytes / all bytes
// leaving the phone's uplink in the bin; resolution one bin). It includes
// the foreground's own slow start: a work-conserving priority lets the
// background fill what a small foreground window leaves idle. An IP-layer
// priority (lanes' background lane, the task-based prioritiser, pfifo_fast
// bands) yields within a packet time or so; plain TCP background traffic
// never yields (it keeps about a fair share). Printed beside them: the
// paper's analytic estimate for TCP Nice, n = ceil(log2 w) halvings, one
// delayed-ACK timeout (200 ms) each: w = 65 gives 1.4 s; and the same
// formula for the background flow's cwnd measured here (ss) at t0.
package lbe

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// flowMeter bins the bytes leaving the phone's uplink: background flow vs
// the rest.
type flowMeter struct {
	src   netip.Addr
	mu    sync.Mutex
	bg    emu.FlowKey
	hasBG bool
	t0    time.Time
	first time.Time   // first foreground (non-background) packet after t0
	bins  [][2]uint64 // [background, other] bytes per bin
}

const meterBin = 100 * time.Millisecond

func (m *flowMeter) setBG(k emu.FlowKey) {
	m.mu.Lock()
	m.bg, m.hasBG = k, true
	m.mu.Unlock()
}

func (m *flowMeter) start(t0 time.Time) {
	m.mu.Lock()
	m.t0, m.bins, m.first = t0, nil, time.Time{}
	m.mu.Unlock()
}

func (m *flowMeter) see(b []byte) {
	if len(b) < 20 || netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}) != m.src {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.t0.IsZero() || now.Before(m.t0) {
		return
	}
	i := int(now.Sub(m.t0) / meterBin)
	for len(m.bins) <= i {
		m.bins = append(m.bins, [2]uint64{})
	}
	k, ok := emu.FlowOf(b)
	c := 1
	if ok && m.hasBG && k == m.bg {
		c = 0
	} else if m.first.IsZero() {
		m.first = now
	}
	m.bins[i][c] += uint64(binary.BigEndian.Uint16(b[2:]))
}

// feedbackDelay returns the time from the foreground's first packet on the
// uplink to the end of the first bin whose background share is below 10%
// (-1: never), and the share per bin (-1: nothing delivered).
func (m *flowMeter) feedbackDelay() (time.Duration, []float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var shares []float64
	found := time.Duration(-1)
	for i, b := range m.bins {
		tot := b[0] + b[1]
		sh := -1.0
		if tot > 0 {
			sh = float64(b[0]) / float64(tot)
		}
		shares = append(shares, sh)
		if found < 0 && tot > 0 && b[1] > 0 && sh < 0.10 && !m.first.IsZero() {
			found = m.t0.Add(time.Duration(i+1) * meterBin).Sub(m.first)
		}
	}
	return found, shares
}

// FeedbackTrial is one measured reaction.
type FeedbackTrial struct {
	Method   string    `json:"method"`
	Round    int       `json:"round"`
	DelayS   float64   `json:"feedback_delay_s"` // -1: never below 10% during the transfer
	FgS      float64   `json:"foreground_s"`
	BgCwnd   int       `json:"bg_cwnd_at_start"`
	NiceEstS float64   `json:"tcp_nice_estimate_s"` // ceil(log2 cwnd) x 200 ms
	Shares   []float64 `json:"bg_share_per_100ms"`
}

var cwndRe = regexp.MustCompile(`cwnd:(\d+)`)

func nan() float64 { return math.NaN() }

// NiceEstimate is the paper's t = ceil(log2 w) x T_delay with T_delay = 200 ms.
func NiceEstimate(w int) time.Duration {
	if w <= 1 {
		return 0
	}
	return time.Duration(math.Ceil(math.Log2(float64(w)))) * 200 * time.Millisecond
}

func init() {
	testbed.Register(testbed.Experiment{Name: "lbe-feedback", Summary: "LW-LBE §5.5: how fast background traffic yields to a new foreground transfer",
		Quick: "2 repetitions",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			c := &LBEConfig{}
			methods, sizes, _, reps := lbeFlags(fs, c)
			*methods, *sizes, *reps = "2,3,4,5", "1000", 5
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				if env.Quick {
					*reps = 2
				}
				if err := parseLBE(c, LBEMethods, *methods, *sizes, "upload", *reps); err != nil {
					return nil, err
				}
				return runFeedback(ctx, env, c)
			}
		}, Plot: plotFeedback})
}

// runFeedback runs every background method's trials, round by round, and
// tabulates the feedback delays.
func runFeedback(ctx context.Context, env *testbed.Env, c *LBEConfig) (*testbed.Result, error) {
	r := &testbed.Result{Experiment: "lbe-feedback", Started: time.Now(), Params: map[string]any{"config": c}}
	if err := checkTraces(c); err != nil {
		return nil, err
	}
	dropUnavailable(c, r)
	var trials []FeedbackTrial
	bg := 0
	for _, m := range c.Methods {
		if m.BG {
			bg++
		}
	}
	prog := env.NewProgress(c.Reps * bg)
	for round := 0; round < c.Reps; round++ {
		for _, m := range c.Methods {
			if !m.BG {
				continue
			}
			prog.Step("round %d/%d method %s (%s)", round+1, c.Reps, m.ID, m.Name)
			ft, err := feedbackTrial(ctx, env, c, m)
			if err != nil {
				return nil, fmt.Errorf("method %s: %w", m.ID, err)
			}
			ft.Round = round
			trials = append(trials, ft)
		}
	}
	r.Tables = []testbed.Table{feedbackTable(c, trials)}
	r.Data = map[string]any{"trials": trials}
	r.Notes = append(r.Notes, fmt.Sprintf("foreground: one %d KB upload per trial; bins of %v; links as lbe", c.SizesKB[0], meterBin))
	r.Duration = time.Since(r.Started)
	return r, nil
}

// feedbackTable is one row per method: its feedback delays' spread, the
// trials that never yielded, the background's cwnd at the start, TCP
// Nice's estimate for it and the foreground's time; and the paper's row.
func feedbackTable(c *LBEConfig, trials []FeedbackTrial) testbed.Table {
	t := testbed.Table{Title: "Feedback delay: foreground upload start -> background share below 10%",
		Columns: []string{"method", "feedback delay, s: " + testbed.SpreadName(c.Reps), "never yielded", "bg cwnd at start", "TCP Nice estimate for that cwnd", "foreground time, s"}}
	for _, m := range c.Methods {
		var ds, fg, ne []float64
		never, cw := 0, 0
		for _, ft := range trials {
			if ft.Method != m.ID {
				continue
			}
			if ft.DelayS < 0 {
				never++
			} else {
				ds = append(ds, ft.DelayS)
			}
			fg = append(fg, ft.FgS)
			ne = append(ne, ft.NiceEstS)
			cw = ft.BgCwnd
		}
		if len(fg) == 0 {
			continue
		}
		d := "-"
		if len(ds) > 0 {
			d = testbed.Summarize(ds).SpreadText("%.2f")
		}
		t.Rows = append(t.Rows, []string{"(" + m.ID + ") " + m.Name, d, fmt.Sprintf("%d of %d", never, len(fg)),
			strconv.Itoa(cw), fmt.Sprintf("%.1f s", testbed.Summarize(ne).Mean), fmt.Sprintf("%.2f", testbed.Summarize(fg).Mean)})
	}
	t.Rows = append(t.Rows, []string{"paper: TCP Nice, w = 65 (analytic)", fmt.Sprintf("%.1f", NiceEstimate(65).Seconds()), "", "65", "1.4 s", ""})
	return t
}

func feedbackTrial(ctx context.Context, env *testbed.Env, c *LBEConfig, m LBEMethod) (FeedbackTrial, error) {
	ft := FeedbackTrial{Method: m.ID}
	lb, err := newLBEBed(ctx, env, c, m)
	if err != nil {
		return ft, err
	}
	defer lb.Close()
	if err := testbed.SleepCtx(ctx, c.Warmup); err != nil {
		return ft, err
	}
	if out, err := lb.phone.Run("ss", "-tin", "dst", lb.bgFlow.Dst.Addr().String()); err == nil {
		if mm := cwndRe.FindStringSubmatch(out); mm != nil {
			ft.BgCwnd, _ = strconv.Atoi(mm[1])
			ft.NiceEstS = NiceEstimate(ft.BgCwnd).Seconds()
		}
	}
	lb.meter.start(time.Now())
	tr, err := lb.transfer(ctx, "upload", c.SizesKB[0])
	if err != nil {
		return ft, err
	}
	ft.FgS = tr.Seconds
	d, shares := lb.meter.feedbackDelay()
	ft.DelayS = d.Seconds()
	if d < 0 {
		ft.DelayS = -1
	}
	ft.Shares = shares
	return ft, nil
}
