// lberemote_plots.go: the figures of lbe-remote, drawn from its stored runs
// (`lanes lab report DIR` draws them again):
//   - fct-bg-DIR: foreground completion time / no background against size,
//     one panel per link and foreground direction, one line per method
//     (mean over rounds, bars min–max), with the goal (1.10);
//   - rtt-bg-DIR: the probe's RTT by percentile under background alone, one
//     panel per link, one line per method (no background included);
//   - timeline-LINK-DIR: throughput over the whole schedule of round 1, one
//     panel per method: the link's capacity, the background flow, the
//     foreground (transfers, then the interactive bulk flow) and the second
//     background flow (latecomer fairness).
//
// A run with several background transports draws each figure once per
// transport (no background, their common base, in each), its name ending
// in -TRANSPORT except for tcp's.
package lbe

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/plot"
)

// shortLink is a link's name short enough for a panel's vertical label.
func shortLink(l string) string { return strings.TrimSuffix(l, "-short") }

// remoteColour is a method's colour in every figure.
func remoteColour(m string) color.RGBA { return plot.Palette[methodIndex(m)%len(plot.Palette)] }

var remoteGrey = color.RGBA{0x99, 0x99, 0x99, 0xff}

func plotRemote(r *testbed.Result) ([]testbed.Figure, error) {
	var d struct {
		Runs []RemoteRun `json:"runs"`
	}
	if err := testbed.DecodeData(r, &d); err != nil {
		return nil, err
	}
	var links, dirs, methods, transports []string
	seen := map[*[]string]map[string]bool{&links: {}, &dirs: {}, &methods: {}, &transports: {}}
	add := func(list *[]string, v string) {
		if !seen[list][v] {
			seen[list][v] = true
			*list = append(*list, v)
		}
	}
	for _, x := range d.Runs {
		add(&links, x.Link)
		add(&dirs, x.BGDir)
		add(&methods, x.Method)
		if x.Method != "none" {
			add(&transports, plotTransport(x))
		}
	}
	sort.SliceStable(methods, func(i, j int) bool { return methodIndex(methods[i]) < methodIndex(methods[j]) })
	var figs []testbed.Figure
	for _, t := range transports {
		figs = append(figs, remoteFigures(transportRuns(d.Runs, t), t, links, dirs, methods)...)
	}
	return figs, nil
}

// plotTransport is run x's background transport (tcp for runs stored
// before transports were an axis, which had none).
func plotTransport(x RemoteRun) string {
	if x.Transport == "" {
		return TransportTCP
	}
	return x.Transport
}

// transportRuns are the runs over transport t and those without background.
func transportRuns(runs []RemoteRun, t string) []RemoteRun {
	var out []RemoteRun
	for _, x := range runs {
		if x.Method == "none" || plotTransport(x) == t {
			out = append(out, x)
		}
	}
	return out
}

// remoteFigures are the figures of the runs over transport t.
func remoteFigures(runs []RemoteRun, t string, links, dirs, methods []string) []testbed.Figure {
	suffix, over := "", ""
	if t != TransportTCP {
		suffix, over = "-"+t, " over "+t
	}
	var figs []testbed.Figure
	for _, dir := range dirs {
		figs = append(figs, testbed.Figure{Name: "fct-bg-" + dir + suffix, Fig: remoteFCTFigure(runs, links, dir+over, dir, methods)},
			testbed.Figure{Name: "rtt-bg-" + dir + suffix, Fig: remoteRTTFigure(runs, links, dir+over, dir, methods)})
	}
	for _, link := range links {
		for _, dir := range dirs {
			if f := remoteTimeline(runs, link, dir+over, dir, methods); f != nil {
				figs = append(figs, testbed.Figure{Name: "timeline-" + link + "-" + dir + suffix, Fig: f})
			}
		}
	}
	return figs
}

// remoteFCTFigure: completion time ÷ the paired no-background transfer.
func remoteFCTFigure(runs []RemoteRun, links []string, what, bgDir string, methods []string) *plot.Figure {
	const yMax = 3
	f := &plot.Figure{Title: fmt.Sprintf("lbe-remote, background %s: foreground completion time / no background (clipped at %d)", what, yMax),
		XLabel: "foreground size", XUnit: "KB", PanelHeight: 170}
	base := map[string]RemoteRun{}
	for _, x := range runs {
		if x.Method == "none" && x.BGDir == bgDir {
			base[fmt.Sprint(x.Link, x.Round)] = x
		}
	}
	for _, link := range links {
		for _, fgDir := range []string{"download", "upload"} {
			p := plot.Panel{YLabel: shortLink(link) + " fg " + map[string]string{"download": "get", "upload": "post"}[fgDir], Unit: "x", YMin: 0, YMax: yMax}
			var sizes []float64
			for _, m := range methods {
				if m == "none" {
					continue
				}
				ratios := map[int][]float64{}
				for _, x := range runs {
					b, ok := base[fmt.Sprint(x.Link, x.Round)]
					if x.Link != link || x.BGDir != bgDir || x.Method != m || !ok {
						continue
					}
					for i, t := range x.Trials {
						if t.Dir == fgDir && i < len(b.Trials) && t.Error == "" && b.Trials[i].Error == "" && b.Trials[i].Seconds > 0 {
							ratios[t.SizeKB] = append(ratios[t.SizeKB], t.Seconds/b.Trials[i].Seconds)
						}
					}
				}
				s := plot.Series{Name: m, Marker: true, Color: remoteColour(m)}
				var ks []int
				for k := range ratios {
					ks = append(ks, k)
				}
				sort.Ints(ks)
				for _, k := range ks {
					v := ratios[k]
					lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
					for _, x := range v {
						lo, hi, sum = math.Min(lo, x), math.Max(hi, x), sum+x
					}
					s.X, s.Y = append(s.X, float64(k)), append(s.Y, sum/float64(len(v)))
					s.YLo, s.YHi = append(s.YLo, lo), append(s.YHi, hi)
					sizes = append(sizes, float64(k))
				}
				if len(s.X) > 0 {
					p.Series = append(p.Series, s)
				}
			}
			if len(sizes) > 0 {
				sort.Float64s(sizes)
				p.Series = append(p.Series, plot.Series{Name: "goal 1.10", Color: remoteGrey,
					X: []float64{sizes[0], sizes[len(sizes)-1]}, Y: []float64{1.1, 1.1}})
			}
			f.Panels = append(f.Panels, p)
		}
	}
	return f
}

// remoteRTTFigure: probe RTT by percentile, all rounds pooled.
func remoteRTTFigure(runs []RemoteRun, links []string, what, bgDir string, methods []string) *plot.Figure {
	const yMax = 300
	f := &plot.Figure{Title: fmt.Sprintf("lbe-remote, background %s alone: probe RTT by percentile (clipped at %d ms)", what, yMax),
		XLabel: "percentile", XUnit: "%", PanelHeight: 160}
	for _, link := range links {
		p := plot.Panel{YLabel: shortLink(link), Unit: "ms", YMin: 0, YMax: yMax}
		for _, m := range methods {
			var v []float64
			for _, x := range runs {
				if x.Link == link && x.BGDir == bgDir && x.Method == m {
					v = append(v, x.ProbeMs...)
				}
			}
			if len(v) == 0 {
				continue
			}
			s := plot.Series{Name: m, Color: remoteColour(m)}
			for q := 0.0; q <= 100; q += 2.5 {
				s.X, s.Y = append(s.X, q), append(s.Y, pctl(v, q/100))
			}
			p.Series = append(p.Series, s)
		}
		f.Panels = append(f.Panels, p)
	}
	return f
}

// remoteTimeline: throughput over round 1's schedule, one panel per method.
func remoteTimeline(runs []RemoteRun, link, what, bgDir string, methods []string) *plot.Figure {
	f := &plot.Figure{Title: fmt.Sprintf("lbe-remote, %s, background %s: throughput in the background's direction (round 1)", link, what),
		XLabel: "time since the links started", XUnit: "s", PanelHeight: 140}
	bin := timelineBin.Seconds()
	for _, m := range methods {
		for _, x := range runs {
			if x.Link != link || x.BGDir != bgDir || x.Method != m || x.Round != 0 || len(x.Timeline) == 0 {
				continue
			}
			p := plot.Panel{YLabel: strings.TrimSpace(m), Unit: "Mbit/s"}
			for _, k := range []struct {
				key, name string
				col       color.RGBA
			}{{"capacity", "link", remoteGrey}, {"bg", "background", plot.Palette[0]},
				{"fg", "foreground", plot.Palette[3]}, {"bg2", fmt.Sprintf("2nd bg (from %.0f s)", x.JainFrom), plot.Palette[2]}} {
				s := plot.Series{Name: k.name, Color: k.col}
				for i, v := range x.Timeline[k.key] {
					s.X, s.Y = append(s.X, (float64(i)+0.5)*bin), append(s.Y, v)
				}
				p.Series = append(p.Series, s)
			}
			f.Panels = append(f.Panels, p)
		}
	}
	if len(f.Panels) == 0 {
		return nil
	}
	return f
}
