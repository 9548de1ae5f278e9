// figure.go: FlowFigure, the cwnd / RTT / throughput figure of sampled or
// traced flows (internal/plot), shared by `lanes plot` and the lab.
package tcpmon

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/plot"
)

// FigureOptions shapes FlowFigure.
type FigureOptions struct {
	Title string
	Top   int    // plot the Top flows that moved the most bytes (0: all)
	Match string // only flows whose "src->dst" contains this
	// Smooth computes throughput from bytes_acked over this trailing
	// window instead of using each sample's own rate (0).
	Smooth time.Duration
}

// FlowFigure draws flow samples (or ProbeFlows of an event trace) as three
// panels over time: cwnd, smoothed RTT and throughput, one line per socket.
// It is what `lanes plot` draws; the lab uses it for its TCP figures.
func FlowFigure(flows []Flow, o FigureOptions) *plot.Figure {
	title, top, match, smooth := o.Title, o.Top, o.Match, o.Smooth
	type series struct {
		who          legendName
		held         int // samples held back: by the yield, or queued behind the other lanes
		x, cwnd, rtt []float64
		thr, acked   []float64
		bytes        uint64
	}
	var t0 time.Time
	if len(flows) > 0 {
		t0 = flows[0].Time
	}
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
			key = strconv.FormatUint(f.Cookie, 10)
		}
		s := by[key]
		if s == nil {
			s = &series{}
			by[key] = s
			order = append(order, key)
		}
		s.who = legendOf(f, s.who)
		if f.Held || f.Queued {
			s.held++
		}
		x := f.Time.Sub(t0).Seconds()
		s.x = append(s.x, x)
		s.cwnd = append(s.cwnd, float64(f.Cwnd))
		rtt := float64(f.SRTT) / 1000
		if f.SRTT == 0 {
			rtt = math.NaN() // no RTT sample yet (handshake)
		}
		s.rtt = append(s.rtt, rtt)
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
	names := map[string]int{}
	for _, k := range order {
		s := by[k]
		if s.held > 0 { // its srtt there is its wait behind the foreground
			s.who.held = (100*s.held + len(s.x)/2) / len(s.x)
		}
		names[s.who.String()]++
	}
	for _, k := range order {
		s := by[k]
		name := s.who.String()
		if names[name] > 1 { // two flows alike: their local ports tell them apart
			name += " (" + s.who.localPort + ")"
		}
		if smooth > 0 {
			s.thr = windowRate(s.x, s.acked, smooth.Seconds())
		}
		fig.Panels[0].Series = append(fig.Panels[0].Series, plot.Series{Name: name, X: s.x, Y: s.cwnd})
		fig.Panels[1].Series = append(fig.Panels[1].Series, plot.Series{Name: name, X: s.x, Y: s.rtt})
		fig.Panels[2].Series = append(fig.Panels[2].Series, plot.Series{Name: name, X: s.x, Y: s.thr})
	}
	return fig
}

// legendName is what a flow's legend entry says: its process, its lane
// (with the share of its samples it was held back, by the yield or queued
// behind the other lanes) and where it goes
// ("restic · background (held 40%) → 10.0.0.2:443"); the local port only
// where that leaves two entries alike, or nothing else is known.
type legendName struct {
	comm, lane, dst, localPort string
	held                       int // % of its samples held back
}

// legendOf updates a flow's legend from one more of its samples: the
// latest known process and lane (a flow moved by `lanes move` shows the
// lane it ended in).
func legendOf(f *Flow, n legendName) legendName {
	if f.Comm != "" {
		n.comm = f.Comm
	}
	if f.Lane != lane.Unset {
		n.lane = f.Lane.String()
	}
	n.dst = f.Dst
	if i := strings.LastIndex(f.Src, ":"); i >= 0 {
		n.localPort = f.Src[i:]
	}
	return n
}

func (n legendName) String() string {
	var parts []string
	l := n.lane
	if n.held > 0 { // its srtt while held is its wait behind the foreground
		l += fmt.Sprintf(" (held %d%%)", n.held)
	}
	for _, p := range []string{n.comm, l} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		parts = append(parts, n.localPort)
	}
	return strings.Join(parts, " · ") + " → " + n.dst
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
