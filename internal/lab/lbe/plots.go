// plots.go: the lbe experiments' figures (completion time and CPU per
// method and size, the background share after a foreground start), drawn
// from a result's JSON.
//
// An experiment with a Plot function gets its figures drawn by WriteResult
// and redrawn by `lanes lab report DIR`, always from the stored result.json
// (Result.Data decoded again), so a figure never shows what the JSON lacks.
package lbe

import (
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
						p.Series = append(p.Series, plot.Series{Name: "paper: " + pp.paperName + " (fig. 6)", NoLine: true,
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
// text (fig. 6, 400 KB download): LW-LBE 3.68 s, task-based 4.04 s. Each is
// drawn in the colour of the method here that corresponds, and named by
// the paper's method: the point is the paper's measurement, not lanes'.
var paperLBEPoints = []struct {
	dir       string
	sizeKB    float64
	method    string
	paperName string
	seconds   float64
}{{"download", 400, "4", "LW-LBE", 3.68}, {"download", 400, "3", "task-based LBE", 4.04}}

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
