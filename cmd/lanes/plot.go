// plot.go: `lanes plot FILE`, cwnd, RTT and throughput of each flow over
// time from a `lanes monitor --json/--csv` file (samples) or a `lanes
// monitor --events --probe --json` file (every ACK), drawn to PNG and SVG.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/plot"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

func init() {
	register(&command{
		name:    "plot",
		summary: "draw cwnd, RTT and throughput per flow from a monitor file (PNG and SVG)",
		usage:   "[--output PREFIX] [--top N] [--match TEXT] [--smooth D] [--title T] FILE",
		run:     runPlot,
	})
}

func runPlot(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	out := fs.String("output", "", "write PREFIX.png and PREFIX.svg (default: FILE without its extension)")
	top := fs.Int("top", 8, "plot the N flows that moved the most bytes")
	match := fs.String("match", "", "only flows whose local->remote text contains this")
	title := fs.String("title", "", "figure title (default: the file name)")
	smooth := fs.Duration("smooth", 100*time.Millisecond, "throughput over this window of bytes_acked (0: the monitor's per-sample rate)")
	if err := fs.Parse(args); err != nil {
		return usageErrorf("%v", err)
	}
	if fs.NArg() != 1 {
		return usageErrorf("want exactly one monitor file")
	}
	path := fs.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var flows []tcpmon.Flow
	if tcpmon.IsEventFile(data[:min(len(data), 4096)]) {
		// An event-mode trace: per-ACK cwnd and srtt of each flow.
		evs, err := tcpmon.ReadEvents(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		flows = tcpmon.ProbeFlows(evs)
		if len(flows) == 0 {
			return fmt.Errorf("%s: no probe events (record with --events --probe --json)", path)
		}
	} else if flows, err = tcpmon.ReadFlows(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(flows) == 0 {
		return fmt.Errorf("%s: no flow records", path)
	}
	t := *title
	if t == "" {
		t = "TCP flows from " + path
	}
	fig := flowFigure(flows, t, *top, *match, *smooth)
	if len(fig.Panels[0].Series) == 0 {
		return fmt.Errorf("%s: no flow matches %q", path, *match)
	}
	prefix := *out
	if prefix == "" {
		prefix = strings.TrimSuffix(path, ".json")
		prefix = strings.TrimSuffix(strings.TrimSuffix(prefix, ".jsonl"), ".csv")
	}
	for _, ext := range []string{".png", ".svg"} {
		if err := fig.Save(prefix + ext); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "wrote %s\n", prefix+ext)
	}
	return nil
}

// flowFigure groups flow samples by socket and makes the three panels.
func flowFigure(flows []tcpmon.Flow, title string, top int, match string, smooth time.Duration) *plot.Figure {
	type series struct {
		name         string
		x, cwnd, rtt []float64
		thr, acked   []float64
		bytes        uint64
	}
	t0 := flows[0].Time
	for _, f := range flows {
		if f.Time.Before(t0) {
			t0 = f.Time
		}
	}
	by := map[string]*series{}
	var order []string
	for i := range flows {
		f := &flows[i]
		if match != "" && !strings.Contains(f.Key(), match) {
			continue
		}
		if f.CAState == "" {
			continue // no tcp_info: a closing socket's time-wait remains
		}
		key := f.Key()
		if f.Cookie != 0 {
			key = fmt.Sprintf("%d", f.Cookie)
		}
		s := by[key]
		if s == nil {
			name := f.Src + "->" + f.Dst
			if i := strings.LastIndex(f.Src, ":"); i >= 0 {
				name = f.Src[i:] + "->" + f.Dst // local port is enough
			}
			if f.Comm != "" {
				name = f.Comm + " " + name
			}
			s = &series{name: name}
			by[key] = s
			order = append(order, key)
		}
		x := f.Time.Sub(t0).Seconds()
		s.x = append(s.x, x)
		s.cwnd = append(s.cwnd, float64(f.Cwnd))
		s.rtt = append(s.rtt, float64(f.SRTT)/1000)
		s.thr = append(s.thr, f.Throughput/1e6)
		s.acked = append(s.acked, float64(f.BytesAcked))
		s.bytes = max(s.bytes, f.BytesAcked+f.BytesRecv)
	}
	sort.SliceStable(order, func(i, j int) bool { return by[order[i]].bytes > by[order[j]].bytes })
	if top > 0 && len(order) > top {
		order = order[:top]
	}
	fig := &plot.Figure{Title: title, XLabel: "time", XUnit: "s", Panels: []plot.Panel{
		{YLabel: "cwnd", Unit: "segments"},
		{YLabel: "smoothed RTT", Unit: "ms"},
		{YLabel: "throughput", Unit: "Mbit/s"},
	}}
	for _, k := range order {
		s := by[k]
		if smooth > 0 {
			s.thr = windowRate(s.x, s.acked, smooth.Seconds())
		}
		fig.Panels[0].Series = append(fig.Panels[0].Series, plot.Series{Name: s.name, X: s.x, Y: s.cwnd})
		fig.Panels[1].Series = append(fig.Panels[1].Series, plot.Series{Name: s.name, X: s.x, Y: s.rtt})
		fig.Panels[2].Series = append(fig.Panels[2].Series, plot.Series{Name: s.name, X: s.x, Y: s.thr})
	}
	return fig
}

// windowRate is the rate of a cumulative byte counter over a trailing
// window, in Mbit/s: at each sample, the bytes since the latest sample at
// least window earlier (or the first one) over the time between them. The
// first half window of a flow has no value (NaN): a rate over a few
// microseconds of its initial burst means nothing.
func windowRate(x, bytes []float64, window float64) []float64 {
	out := make([]float64, len(x))
	j := 0
	for i := range x {
		for j+1 < i && x[i]-x[j+1] >= window {
			j++
		}
		if dt := x[i] - x[j]; i > 0 && dt > 0 && x[i]-x[0] >= window/2 {
			out[i] = (bytes[i] - bytes[j]) * 8 / dt / 1e6
		} else {
			out[i] = math.NaN()
		}
	}
	return out
}
