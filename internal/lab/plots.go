// plots.go: figures drawn from a result's JSON (PNG and SVG beside it, linked
// from results.md).
//
// An experiment with a Plot function gets its figures drawn by WriteResult
// and redrawn by `lanes lab report DIR`, always from the stored result.json
// (Result.Data decoded again), so a figure never shows what the JSON lacks.
package lab

import (
	"fmt"
	"math"
	"sort"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/plot"
)

// plotLBE draws completion time and CPU against size, one line per method,
// one panel per direction (the paper's figures 6–9, 11–12).
func plotLBE(r *testbed.Result) ([]testbed.Figure, error) {
	var d struct {
		Cells []LBECell `json:"cells"`
	}
	if err := testbed.DecodeData(r, &d); err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	methods := map[string]bool{}
	for _, c := range d.Cells {
		dirs[c.Dir], methods[c.Method] = true, true
	}
	names := map[string]string{"1": "(1) no bg, 8 KB", "2": "(2) bg, no LBE, 8 KB", "3": "(3) task LBE, 1.5 KB",
		"4": "(4) lanes, 1.5 KB", "5": "(5) pfifo_fast, 1.5 KB", "6": "(6) lanes, 8 KB", "1s": "(1s) no bg, 1.5 KB"}
	var ms []string
	for m := range methods {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	// Each method keeps its colour in every panel; its points carry marks
	// and error bars (95% CI, or the range for few repetitions); the paper's
	// published values are marks alone in the colour of the same method.
	colour := map[string]int{}
	for i, m := range ms {
		colour[m] = i
	}
	mk := func(title, ylabel, unit string, val func(LBECell) (float64, float64, float64), paper bool) *plot.Figure {
		f := &plot.Figure{Title: title, XLabel: "foreground size", XUnit: "KB"}
		for _, dir := range []string{"download", "upload"} {
			if !dirs[dir] {
				continue
			}
			p := plot.Panel{YLabel: dir + " " + ylabel, Unit: unit}
			for _, m := range ms {
				s := plot.Series{Name: names[m], Marker: true, Color: plot.Palette[colour[m]%len(plot.Palette)]}
				for _, c := range d.Cells {
					if c.Dir == dir && c.Method == m && c.Time.N > 0 {
						y, lo, hi := val(c)
						s.X, s.Y = append(s.X, float64(c.SizeKB)), append(s.Y, y)
						s.YLo, s.YHi = append(s.YLo, lo), append(s.YHi, hi)
					}
				}
				if len(s.X) > 0 {
					p.Series = append(p.Series, s)
				}
			}
			if paper {
				for _, pp := range paperLBEPoints {
					if pp.dir == dir && methods[pp.method] {
						p.Series = append(p.Series, plot.Series{Name: "paper " + names[pp.method], NoLine: true,
							X: []float64{pp.sizeKB}, Y: []float64{pp.seconds}, Color: plot.Palette[colour[pp.method]%len(plot.Palette)]})
					}
				}
			}
			f.Panels = append(f.Panels, p)
		}
		return f
	}
	n := 0
	for _, c := range d.Cells {
		n = max(n, c.Time.N)
	}
	return []testbed.Figure{
		{Name: "times", Fig: mk(r.Experiment+": foreground completion time, "+testbed.SpreadName(n), "time", "s", func(c LBECell) (float64, float64, float64) { return c.Time.Spread() }, true)},
		{Name: "times-p95", Fig: mk(r.Experiment+": foreground completion time (p95)", "time", "s", func(c LBECell) (float64, float64, float64) {
			return c.Time.P95, math.NaN(), math.NaN()
		}, false)},
		{Name: "cpu", Fig: mk(r.Experiment+": CPU of the phone's tasks per transfer, "+testbed.SpreadName(n), "CPU", "ms", func(c LBECell) (float64, float64, float64) { return c.CPU.Spread() }, false)},
	}, nil
}

// paperLBEPoints are the LW-LBE paper's figures given as numbers in its
// text (fig. 6, 400 KB download): LW-LBE 3.68 s, task-based 4.04 s.
var paperLBEPoints = []struct {
	dir     string
	sizeKB  float64
	method  string
	seconds float64
}{{"download", 400, "4", 3.68}, {"download", 400, "3", 4.04}}

// plotFeedback draws the background's share of the uplink after the
// foreground starts, first trial of each method.
func plotFeedback(r *testbed.Result) ([]testbed.Figure, error) {
	var d struct {
		Trials []FeedbackTrial `json:"trials"`
	}
	if err := testbed.DecodeData(r, &d); err != nil {
		return nil, err
	}
	p := plot.Panel{YLabel: "background share of uplink", Unit: "%", YMin: 0, YMax: 100}
	seen := map[string]bool{}
	for _, t := range d.Trials {
		if seen[t.Method] {
			continue
		}
		seen[t.Method] = true
		s := plot.Series{Name: "method " + t.Method}
		for i, sh := range t.Shares {
			s.X = append(s.X, float64(i+1)*meterBin.Seconds())
			if sh < 0 {
				s.Y = append(s.Y, nan())
			} else {
				s.Y = append(s.Y, sh*100)
			}
		}
		p.Series = append(p.Series, s)
	}
	return []testbed.Figure{{Name: "background-share", Fig: &plot.Figure{Title: "lbe-feedback: background share after the foreground upload starts",
		XLabel: "time since start", XUnit: "s", Panels: []plot.Panel{p}}}}, nil
}

// plotCoop draws, for every N and mode of a coop result, each host's cwnd
// over time (segments; the largest of its uploads, TCP monitor every
// 200 ms) and, for lanes, the cap the daemons applied (the hosts' median).
func plotCoop(r *testbed.Result) ([]testbed.Figure, error) {
	var runs []coopRun
	if err := testbed.DecodeData(r, &runs); err != nil {
		return nil, err
	}
	var figs []testbed.Figure
	for _, run := range runs {
		s := run.Series
		if s == nil || len(s.Samples) == 0 {
			continue
		}
		p := plot.Panel{YLabel: "cwnd", Unit: "segments"}
		for i := range s.Samples[0] {
			sr := plot.Series{Name: fmt.Sprintf("h%d", i+1), X: s.T}
			for _, row := range s.Samples {
				sr.Y = append(sr.Y, positiveOrNaN(float64(row[i].Cwnd)))
			}
			p.Series = append(p.Series, sr)
		}
		if run.Mode == "lanes" {
			capS := plot.Series{Name: "cap (hosts' median)", X: s.T}
			for _, row := range s.Samples {
				var caps []float64
				for _, h := range row {
					if h.Cap > 0 {
						caps = append(caps, float64(h.Cap))
					}
				}
				if len(caps) == 0 {
					capS.Y = append(capS.Y, nan())
					continue
				}
				sort.Float64s(caps)
				capS.Y = append(capS.Y, caps[len(caps)/2])
			}
			p.Series = append(p.Series, capS)
		}
		title := fmt.Sprintf("coop N=%d, %s: each host's cwnd", run.N, run.Mode)
		name := fmt.Sprintf("cwnd-n%d-%s", run.N, run.Mode)
		if run.Dir == "down" {
			title = fmt.Sprintf("coop down N=%d, %s: the server's cwnd to each host", run.N, run.Mode)
			name += "-down"
		}
		if run.Mode == "lanes" {
			title += " and the daemons' cap"
		}
		figs = append(figs, testbed.Figure{Name: name,
			Fig: &plot.Figure{Title: title, XLabel: "time", XUnit: "s", Panels: []plot.Panel{p}}})
	}
	var up, down []coopRun
	for _, run := range runs {
		if run.Dir == "down" {
			down = append(down, run)
		} else {
			up = append(up, run)
		}
	}
	if f := coopVersusN(up); f != nil {
		figs = append(figs, testbed.Figure{Name: "versus-n", Fig: f})
	}
	if f := coopVersusN(down); f != nil {
		f.Title += " (downloads)"
		figs = append(figs, testbed.Figure{Name: "versus-n-down", Fig: f})
	}
	return figs, nil
}

// paperCoopCaps is the paper's table 2 (20 Mbit/s, 256 ms RTT, the coop
// experiment's defaults): the cap for N = 5..8 senders, segments.
var paperCoopCaps = map[int]float64{5: 69, 6: 57, 7: 49, 8: 43}

// coopVersusN draws total goodput, Jain's index and the applied cap against
// N for each mode, marked points, with the paper's caps beside ours.
func coopVersusN(runs []coopRun) *plot.Figure {
	ns := map[int]bool{}
	for _, r := range runs {
		ns[r.N] = true
	}
	if len(ns) < 2 {
		return nil
	}
	total := plot.Panel{YLabel: "total goodput", Unit: "Mbit/s"}
	jain := plot.Panel{YLabel: "Jain's index", YMin: 0, YMax: 1}
	caps := plot.Panel{YLabel: "cap", Unit: "segments"}
	for i, mode := range []string{"tcp", "lanes"} {
		col := plot.Palette[i]
		t := plot.Series{Name: mode, Marker: true, Color: col}
		j := plot.Series{Name: mode, Marker: true, Color: col}
		c := plot.Series{Name: "lanes (median applied)", Marker: true, Color: col}
		for _, r := range runs {
			if r.Mode != mode {
				continue
			}
			t.X, t.Y = append(t.X, float64(r.N)), append(t.Y, r.Stats.TotalMbit)
			j.X, j.Y = append(j.X, float64(r.N)), append(j.Y, r.Stats.JainRun)
			if r.Cap > 0 {
				c.X, c.Y = append(c.X, float64(r.N)), append(c.Y, float64(r.Cap))
			}
		}
		if len(t.X) > 0 {
			total.Series, jain.Series = append(total.Series, t), append(jain.Series, j)
		}
		if len(c.X) > 0 {
			caps.Series = append(caps.Series, c)
		}
	}
	paper := plot.Series{Name: "paper, table 2", NoLine: true, Color: plot.Palette[1]}
	for n := 5; n <= 8; n++ {
		if ns[n] {
			paper.X, paper.Y = append(paper.X, float64(n)), append(paper.Y, paperCoopCaps[n])
		}
	}
	if len(paper.X) > 0 {
		caps.Series = append(caps.Series, paper)
	}
	return &plot.Figure{Title: "coop: goodput, fairness and cap against N", XLabel: "N (senders)",
		Panels: []plot.Panel{total, jain, caps}}
}

func positiveOrNaN(v float64) float64 {
	if v > 0 {
		return v
	}
	return nan()
}
