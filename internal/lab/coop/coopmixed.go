// coopmixed.go: the coop-mixed experiment (docs/papers.md §001 open problem 4): N
// hosts, the first --plain of them without lanes, against the same hosts
// all plain TCP. lanes hosts know only each other, so their caps leave room
// the plain hosts take, until the safety fallback stops capping: the lanes
// hosts must get at least what they get as plain TCP, and the total must
// not fall below all-plain.
//
// Which flow wins the simultaneous slow starts at the drop-tail AP (one
// reaches a window of 300-600 segments, the rest ~60, and CUBIC at 256 ms
// keeps that order for tens of seconds) differs from run to run and sets
// most of one run's ratio, so --reps repeats the settings, alternated, and
// a pooled row divides the lanes hosts' goodput summed over the
// repetitions by the same hosts' all-TCP goodput summed.
package coop

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

func init() {
	testbed.Register(testbed.Experiment{Name: "coop-mixed", Summary: "6 hosts, 2 without lanes: lanes never clearly worse (safety fallback, docs/papers.md §001 open problem 4)",
		Quick: "30 s per mode",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			m := &mixedExp{}
			m.c.register(fs)
			fs.IntVar(&m.hosts, "hosts", 6, "hosts")
			fs.IntVar(&m.plain, "plain", 2, "hosts without lanes")
			fs.DurationVar(&m.dur, "duration", 60*time.Second, "length of each run")
			fs.DurationVar(&m.warm, "warmup", 5*time.Second, "left out of the statistics")
			fs.BoolVar(&m.noSafety, "no-safety", true, "also run the mixed setting with the safety fallback off")
			fs.StringVar(&m.direction, "direction", "up", "every host uploads (up) or downloads (down: the AP's downlink is shared, lanes caps receive windows)")
			fs.IntVar(&m.reps, "reps", 1, "repetitions of the settings, alternated; with more than one, a pooled row per setting")
			return m.run
		}})
}

// mixedExp is one coop-mixed invocation.
type mixedExp struct {
	c                coopCommon
	hosts, plain     int
	dur, warm        time.Duration
	noSafety         bool
	direction        string
	reps             int
	lanesH, plainH   []int              // the hosts that run lanes in the mixed settings, and the others
	lanesSum, tcpSum map[string]float64 // lanes hosts' mean goodput summed over reps, per setting
}

func (m *mixedExp) run(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
	if env.Quick {
		m.dur = 30 * time.Second
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	r := &testbed.Result{Experiment: "coop-mixed", Started: time.Now(), Params: m.c.params()}
	r.Params["hosts"], r.Params["plain"], r.Params["duration"], r.Params["direction"], r.Params["reps"] = m.hosts, m.plain, m.dur.String(), m.direction, m.reps
	t := testbed.Table{Title: fmt.Sprintf("coop-mixed: %d hosts, %d without lanes, %sloading (goodput Mbit/s; the same hosts are grouped in every setting)", m.hosts, m.plain, m.direction),
		Columns: []string{"setting", "total", "lanes hosts (mean)", "lanes hosts / all tcp", "plain hosts (mean)", "Jain 200ms", "Jain run", "RTT p50 ms", "capping stopped", "capping", "why not"}}
	settings := []string{"all tcp", "mixed"}
	if m.noSafety {
		settings = append(settings, "mixed, no safety")
	}
	data := map[string]any{}
	m.lanesSum, m.tcpSum = map[string]float64{}, map[string]float64{}
	for rep := 1; rep <= m.reps; rep++ {
		lanesTCP := 0.0
		for _, mode := range settings {
			name := mode
			if m.reps > 1 {
				name = fmt.Sprintf("%s #%d", mode, rep)
			}
			row, stats, s, lanesMean, err := m.setting(ctx, env, mode, lanesTCP)
			if err != nil {
				return nil, err
			}
			if mode == "all tcp" {
				lanesTCP = lanesMean
			} else {
				m.lanesSum[mode] += lanesMean
				m.tcpSum[mode] += lanesTCP
			}
			t.Rows = append(t.Rows, append([]string{name}, row...))
			data[name] = map[string]any{"stats": stats, "series": s}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	t.Rows = append(t.Rows, m.pooledRows(settings[1:])...)
	r.Tables = []testbed.Table{t}
	r.Notes = []string{"plain hosts are the first --plain hosts; lanes hosts know only each other, so without the safety fallback they cap to a share of the AP the plain hosts do not respect",
		"lanes hosts / all tcp: the lanes hosts' mean goodput over the same hosts' in the all-tcp setting of the same repetition; pooled: summed over the repetitions; capping stopped: the lanes hosts whose daemon reported capping off after capping (the safety fallback), and when (s from the start of the run; the statistics leave out the first --warmup)"}
	r.Data = data
	r.Environment = testbed.CaptureEnvironment(nil, env, nil)
	r.Duration = time.Since(r.Started)
	return r, nil
}

// check validates the flags and sets the direction and host groups.
func (m *mixedExp) check() error {
	if m.plain < 0 || m.plain > m.hosts {
		return fmt.Errorf("--plain %d out of range", m.plain)
	}
	if m.reps < 1 {
		return fmt.Errorf("--reps %d: at least 1", m.reps)
	}
	dirs, err := parseDirections(m.direction)
	if err != nil || len(dirs) != 1 {
		return fmt.Errorf("--direction %q: want up or down", m.direction)
	}
	m.c.down = dirs[0] == "down"
	m.lanesH, m.plainH = nil, nil
	for i := 0; i < m.hosts; i++ {
		if i >= m.plain {
			m.lanesH = append(m.lanesH, i)
		} else {
			m.plainH = append(m.plainH, i)
		}
	}
	return nil
}

// pooledRows are the lanes hosts' goodput over their all-TCP goodput,
// each summed over the repetitions (with more than one).
func (m *mixedExp) pooledRows(modes []string) [][]string {
	if m.reps < 2 {
		return nil
	}
	var rows [][]string
	for _, mode := range modes {
		ratio := "-"
		if m.tcpSum[mode] > 0 {
			ratio = fmt.Sprintf("%.2f", m.lanesSum[mode]/m.tcpSum[mode])
		}
		rows = append(rows, []string{fmt.Sprintf("%s, pooled (%d)", mode, m.reps), "", mbit(m.lanesSum[mode] / float64(m.reps)), ratio, "", "", "", "", "", "", ""})
	}
	return rows
}

// mixedEnd is what the lanes hosts' daemons reported at a run's end.
type mixedEnd struct {
	capping, total int
	why            map[string]int
}

// setting runs one setting and returns its table row (after the setting's
// name), statistics, series and the lanes hosts' mean goodput; lanesTCP is
// the same hosts' mean in this repetition's all-TCP run (0: this is it).
func (m *mixedExp) setting(ctx context.Context, env *testbed.Env, mode string, lanesTCP float64) ([]string, coopStats, *coopSeries, float64, error) {
	s, end, err := m.runSetting(ctx, env, mode)
	if err != nil {
		return nil, coopStats{}, nil, 0, fmt.Errorf("coop-mixed %s: %w", mode, err)
	}
	from, to := m.warm.Seconds(), m.dur.Seconds()+1
	all := s.stats(allHosts(m.hosts), from, to)
	meanOf := func(h []int) float64 { return s.stats(h, from, to).TotalMbit / float64(max(len(h), 1)) }
	lanesMean := meanOf(m.lanesH)
	ratio, plainS := "-", "-"
	if lanesTCP > 0 && len(m.lanesH) > 0 {
		ratio = fmt.Sprintf("%.2f", lanesMean/lanesTCP)
	}
	if len(m.plainH) > 0 {
		plainS = mbit(meanOf(m.plainH))
	}
	lanesS := "-"
	if len(m.lanesH) > 0 {
		lanesS = mbit(lanesMean)
	}
	capS, whyS, stopS := "-", "", "-"
	if mode != "all tcp" {
		stopS = stopsText(cappingStops(s, m.lanesH))
	}
	if end.total > 0 {
		capS = fmt.Sprintf("%d/%d at end", end.capping, end.total)
		var ws []string
		for k := range end.why {
			ws = append(ws, k)
		}
		sort.Strings(ws)
		whyS = strings.Join(ws, "; ")
	}
	row := []string{mbit(all.TotalMbit), lanesS, ratio, plainS, fmt.Sprintf("%.3f", all.JainStep),
		fmt.Sprintf("%.3f", all.JainRun), fmt.Sprintf("%.0f", all.RTTms), stopS, capS, whyS}
	return row, all, s, lanesMean, nil
}

// runSetting builds the bed of one setting, runs every host's transfer
// for the duration and reads the daemons' capping state at the end.
func (m *mixedExp) runSetting(ctx context.Context, env *testbed.Env, mode string) (*coopSeries, mixedEnd, error) {
	end := mixedEnd{why: map[string]int{}}
	bc, err := m.c.bed(m.hosts, func(i int) bool { return mode != "all tcp" && i >= m.plain })
	if err != nil {
		return nil, end, err
	}
	if mode == "mixed, no safety" {
		bc.Coop.Safety.Enabled = false
	}
	env.Printf("coop-mixed %s: %v...\n", mode, m.dur)
	cb, err := newCoopBed(ctx, env, bc)
	if err != nil {
		return nil, end, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := cb.startFlows(rctx, allHosts(m.hosts)); err != nil {
		cb.Close()
		return nil, end, err
	}
	s, err := cb.record(ctx, 200*time.Millisecond, m.dur, nil)
	if err == nil {
		err = m.readEnd(cb, &end)
	}
	cancel()
	if cerr := cb.Close(); err == nil {
		err = cerr
	}
	return s, end, err
}

// readEnd reads every lanes host's capping state for the bed's direction.
func (m *mixedExp) readEnd(cb *coopBed, end *mixedEnd) error {
	for _, h := range cb.hosts {
		if h.api == nil {
			continue
		}
		st, err := h.coopStatus()
		if err != nil {
			return err
		}
		end.total++
		on, reason := st.Capping, st.Reason
		if m.c.down {
			on, reason = st.Down.Capping, st.Down.Reason
		}
		if on {
			end.capping++
		} else {
			end.why[reason]++
		}
	}
	return nil
}
