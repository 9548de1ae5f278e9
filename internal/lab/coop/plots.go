// plots.go: the coop experiments' figures (cwnd and caps per run, Jain and
// caps versus N), drawn from a result's JSON.
//
// An experiment with a Plot function gets its figures drawn by WriteResult
// and redrawn by `lanes lab report DIR`, always from the stored result.json
// (Result.Data decoded again), so a figure never shows what the JSON lacks.
package coop

import (
	"fmt"
	"math"
	"sort"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/plot"
)

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
					capS.Y = append(capS.Y, math.NaN())
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
	return math.NaN()
}
