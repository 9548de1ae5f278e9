// Table tests of the estimator's variants (estimatorRules): each rule on
// and off over the replay that measured it, the two directions' choices,
// and a restart that keeps them.
package coop

import (
	"math"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

// ruleCase is one variant: the rules with it on or off (the others as the
// measurement had them), a replay, what the replay reads and the range
// that reading must fall in with the rule off and on.
type ruleCase struct {
	name    string
	rules   func(on bool) estimatorRules
	start   time.Time
	seq     []groupSample
	read    func(e *rateEstimator, drainedAt int) float64
	off, on [2]float64 // [low, high]
}

// foreignQueueStart is a start behind someone else's standing queue (the
// lab's coop-mixed downloads): two intervals of the flows' slow start,
// then a queue at 1.4x while the group delivers 10 % less each interval.
func foreignQueueStart() []groupSample {
	seq := []groupSample{{goodput: 1e6, inflation: 1}, {goodput: 1e6, inflation: 1}}
	g := 8e6
	for range 14 {
		seq = append(seq, groupSample{goodput: g, inflation: 1.4})
		g *= 0.9
	}
	return seq
}

// mixedCatchUp is the downlink's start in coop-mixed: the recovery's
// intervals recorded as the best, then 19.9 Mbit/s of in-order bytes at
// 1.25x while the interfaces received 13.2, and the drain
// (TestMixedStartDrainsToWhatArrived).
var mixedCatchUp = []groupSample{
	{goodput: 0.7e6, inflation: 1.00}, {goodput: 3.9e6, inflation: 1.07},
	{goodput: 7.9e6, inflation: 1.49},
	{goodput: 10.5e6, judged: 9.6e6, inflation: 1.45},
	{goodput: 10.7e6, inflation: 1.48},
	{goodput: 11.5e6, judged: 9.4e6, inflation: 1.16},
	{goodput: 19.9e6, judged: 13.2e6, inflation: 1.25},
	{goodput: 13.0e6, inflation: 1.31},
	{goodput: 13.0e6, inflation: 1.31},
}

// startupCatchUp is a 16-download start whose catch-up comes one interval
// before startup's exit (TestStartupBestNotFromCatchUp).
var startupCatchUp = []groupSample{
	{goodput: 2e6, inflation: 1.00}, {goodput: 5e6, inflation: 1.02}, {goodput: 7e6, inflation: 1.03},
	{goodput: 8e6, inflation: 1.03},
	{goodput: 12e6, inflation: 1.03}, {goodput: 16e6, inflation: 1.04},
	{goodput: 18e6, judged: 18.6e6, inflation: 1.05}, {goodput: 19.0e6, inflation: 1.04},
	{goodput: 23.3e6, judged: 16.7e6, inflation: 1.05},
	{goodput: 19.2e6, judged: 19.9e6, inflation: 1.12},
	{goodput: 19.2e6, inflation: 1.08}, {goodput: 19.3e6, inflation: 1.07}, {goodput: 19.2e6, inflation: 1.08},
}

var ruleCases = []ruleCase{
	{
		// the drain comes in the queue's settleIntervals + drainIntervals-th
		// interval, not after startup's maxSettleIntervals and cruise
		name:  "drainUnsettledStartup",
		rules: func(on bool) estimatorRules { return estimatorRules{drainUnsettledStartup: on} },
		start: t0, seq: foreignQueueStart(),
		read: func(_ *rateEstimator, drainedAt int) float64 { return float64(drainedAt - 2) },
		on:   [2]float64{settleIntervals + drainIntervals, settleIntervals + drainIntervals},
		off:  [2]float64{maxSettleIntervals + 1, math.Inf(1)},
	},
	{
		// the drain restarts from what arrived, not the recovery's best
		name: "catchUpToArrivals",
		rules: func(on bool) estimatorRules {
			return estimatorRules{drainUnsettledStartup: true, catchUpToArrivals: on}
		},
		start: t0.Add(8500 * time.Millisecond), seq: mixedCatchUp,
		read: func(e *rateEstimator, _ int) float64 { return e.drainBest },
		on:   [2]float64{13.0e6, 13.2e6},
		off:  [2]float64{10.5e6, 11.5e6},
	},
	{
		// cruise's best is the exit's interval, not the catch-up before it
		name: "bestWithinArrivals",
		rules: func(on bool) estimatorRules {
			return estimatorRules{drainUnsettledStartup: true, catchUpToArrivals: true, bestWithinArrivals: on}
		},
		start: t0.Add(200 * time.Millisecond), seq: startupCatchUp,
		read: func(e *rateEstimator, _ int) float64 { return e.best() },
		on:   [2]float64{19.0e6, 19.3e6},
		off:  [2]float64{23.3e6, 23.3e6},
	},
}

// replayRules feeds seq from start; it returns the estimator and the
// 1-based interval of its first drain (math.MaxInt: none).
func replayRules(rules estimatorRules, start time.Time, seq []groupSample) (*rateEstimator, int) {
	e := newRateEstimator(120_000, 2e9, 500*time.Millisecond, rules)
	drainedAt := math.MaxInt
	now := start
	for i, s := range seq {
		s.minRTT = 256 * time.Millisecond
		e.update(now, s)
		if e.drained && drainedAt == math.MaxInt {
			drainedAt = i + 1
		}
		now = now.Add(500 * time.Millisecond)
	}
	return &e, drainedAt
}

func TestEstimatorRules(t *testing.T) {
	for _, c := range ruleCases {
		for _, on := range []bool{false, true} {
			e, drainedAt := replayRules(c.rules(on), c.start, c.seq)
			got := c.read(e, drainedAt)
			t.Logf("%s %v: %.4g", c.name, on, got)
			want := c.off
			if on {
				want = c.on
			}
			if got < want[0] || got > want[1] {
				t.Errorf("%s %v: read %.4g, want %.4g..%.4g", c.name, on, got, want[0], want[1])
			}
		}
	}
}

// TestDirectionRules: the uploads' estimator keeps none of the variants,
// the downloads' all three, and a restart (the fallback's hold) keeps
// them.
func TestDirectionRules(t *testing.T) {
	up, down := newDirections(Options{Config: config.DefaultCoop()})
	for _, c := range []struct {
		name string
		d    *direction
		want estimatorRules
	}{
		{"uploads", &up, estimatorRules{}},
		{"downloads", &down, estimatorRules{drainUnsettledStartup: true, catchUpToArrivals: true, bestWithinArrivals: true}},
	} {
		if c.d.est.rules != c.want {
			t.Errorf("%s: rules %+v, want %+v", c.name, c.d.est.rules, c.want)
		}
		c.d.est.restart()
		if c.d.est.rules != c.want {
			t.Errorf("%s after a restart: rules %+v, want %+v", c.name, c.d.est.rules, c.want)
		}
	}
}
