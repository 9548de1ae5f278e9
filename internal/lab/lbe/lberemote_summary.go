// lberemote_summary.go: lbe-remote's runs summarized per link, direction
// and method (the foreground's time against its time alone, the
// background's share, the probe's delay percentiles) and the tables.
package lbe

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// remoteCell is one (link, background direction, transport, method) summary.
type remoteCell struct {
	Link, BGDir, Method  string
	Transport            string             // "" without background
	P50, P95             float64            // probe RTT, ms
	Infl50, Infl95       float64            // above no background, ms
	ProbeLost, ProbeSent int                // over the rounds
	BGSocketCC           string             // tcp-app-cc: the socket's congestion control after the app's call (rounds that differ: joined with "/")
	FCTRatio             map[string]float64 // "dir size" -> mean ratio to no background
	FCTSeconds           map[string]float64 // "dir size" -> mean completion time, s (the transfers that completed)
	fctDone              map[string]int     // completed transfers behind FCTSeconds
	// AloneCapMbps: the link's capacity over the alone window, Mbit/s
	// (from the run's timeline; the runs without background have none).
	AloneCapMbps             float64
	nAloneCap                int
	BGAlone, BGUnder, FGBulk float64
	// AloneVsCubic: BGAlone ÷ the CUBIC background's of the same link,
	// direction and round (paired), mean over the rounds that had one.
	AloneVsCubic float64
	Jain         float64
	Late         int
	// Steady: the steady steps' figures, one per foreground kind in the
	// runs' order; ChurnIdle, ChurnSignal: the churn step's.
	Steady      []steadyCell
	ChurnIdle   float64
	ChurnSignal signalSum
}

// windowMean is the mean of a timeline's bins (timelineBin each, from 0)
// that lie within [from, to) seconds; false if none does.
func windowMean(tl []float64, from, to float64) (float64, bool) {
	bin := timelineBin.Seconds()
	var sum float64
	n := 0
	for i, v := range tl {
		if t := float64(i) * bin; t >= from-1e-9 && t+bin <= to+1e-9 {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

func pctl(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[int(p*float64(len(s)-1))]
}

// remoteKey names one testbed's run: the transport is "" for the method
// without background, the paired base of every transport.
type remoteKey struct {
	link, dir, transport, method string
	round                        int
}

func keyOf(r RemoteRun) remoteKey {
	return remoteKey{r.Link, r.BGDir, r.Transport, r.Method, r.Round}
}

// summarizeRemote pairs each method's runs with the no-background run of
// the same link, direction and round (RTT inflation, completion ratios),
// and with the CUBIC background over the same transport (share alone).
func summarizeRemote(runs []RemoteRun) []remoteCell {
	by := map[remoteKey]RemoteRun{}
	for _, r := range runs {
		by[keyOf(r)] = r
	}
	acc := map[remoteKey]*remoteCell{}
	n, nCubic := map[remoteKey]int{}, map[remoteKey]int{}
	var order []remoteKey
	for _, r := range runs {
		k := keyOf(r)
		k.round = 0
		c := acc[k]
		if c == nil {
			c = &remoteCell{Link: r.Link, BGDir: r.BGDir, Method: r.Method, Transport: r.Transport, FCTRatio: map[string]float64{},
				FCTSeconds: map[string]float64{}, fctDone: map[string]int{}}
			acc[k] = c
			order = append(order, k)
		}
		n[k]++
		base, hasBase := by[remoteKey{r.Link, r.BGDir, "", "none", r.Round}]
		c.addRun(r, base, hasBase)
		if cu, ok := by[remoteKey{r.Link, r.BGDir, r.Transport, "cubic", r.Round}]; ok && cu.BGAlone > 0 {
			c.AloneVsCubic += r.BGAlone / cu.BGAlone
			nCubic[k]++
		}
	}
	var out []remoteCell
	for _, k := range order {
		acc[k].average(n[k], nCubic[k])
		out = append(out, *acc[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].less(out[j]) })
	return out
}

// addRun adds run r to the cell's sums; base is the paired run without
// background (if hasBase).
func (c *remoteCell) addRun(r, base RemoteRun, hasBase bool) {
	p50, p95 := pctl(r.ProbeMs, .5), pctl(r.ProbeMs, .95)
	c.P50 += p50
	c.P95 += p95
	c.ProbeLost += r.ProbeLost
	c.ProbeSent += r.ProbeLost + len(r.ProbeMs)
	if hasBase {
		c.Infl50 += p50 - pctl(base.ProbeMs, .5)
		c.Infl95 += p95 - pctl(base.ProbeMs, .95)
		for i, t := range r.Trials {
			if i < len(base.Trials) && t.Error == "" && base.Trials[i].Error == "" && base.Trials[i].Seconds > 0 {
				c.FCTRatio[fmt.Sprintf("%s %d KB", t.Dir, t.SizeKB)] += t.Seconds / base.Trials[i].Seconds
			}
		}
	}
	for _, t := range r.Trials {
		if t.Late {
			c.Late++
		}
		if t.Error == "" && t.Seconds > 0 {
			k := fmt.Sprintf("%s %d KB", t.Dir, t.SizeKB)
			c.FCTSeconds[k] += t.Seconds
			c.fctDone[k]++
		}
	}
	if v, ok := windowMean(r.Timeline["capacity"], r.AloneFrom, r.AloneTo); ok {
		c.AloneCapMbps += v
		c.nAloneCap++
	}
	c.ChurnSignal.add(r.ChurnSignal)
	c.addSteady(r, base, hasBase)
	if r.BGSocketCC != "" && !slices.Contains(strings.Split(c.BGSocketCC, "/"), r.BGSocketCC) {
		c.BGSocketCC = strings.TrimPrefix(c.BGSocketCC+"/"+r.BGSocketCC, "/")
	}
	c.ChurnIdle += r.ChurnIdle
	c.BGAlone += r.BGAlone
	c.BGUnder += r.BGUnderBulk
	c.FGBulk += r.FGBulk
	c.Jain += r.Jain
}

// average turns the sums of n runs into means (nCubic of them had a paired
// CUBIC background).
func (c *remoteCell) average(n, nCubic int) {
	f := float64(n)
	c.P50, c.P95, c.Infl50, c.Infl95 = c.P50/f, c.P95/f, c.Infl50/f, c.Infl95/f
	c.BGAlone, c.BGUnder, c.FGBulk, c.Jain = c.BGAlone/f, c.BGUnder/f, c.FGBulk/f, c.Jain/f
	c.ChurnIdle /= f
	for i := range c.Steady {
		c.Steady[i].average()
	}
	for s := range c.FCTRatio {
		c.FCTRatio[s] /= f
	}
	for s, k := range c.fctDone {
		c.FCTSeconds[s] /= float64(k)
	}
	if c.nAloneCap > 0 {
		c.AloneCapMbps /= float64(c.nAloneCap)
	}
	if nCubic > 0 {
		c.AloneVsCubic /= float64(nCubic)
	}
}

// less orders cells by link, direction, transport (no background first),
// method.
func (c remoteCell) less(d remoteCell) bool {
	if c.Link != d.Link {
		return c.Link < d.Link
	}
	if c.BGDir != d.BGDir {
		return c.BGDir < d.BGDir
	}
	if ti, tj := transportIndex(c.Transport), transportIndex(d.Transport); ti != tj {
		return ti < tj
	}
	return methodIndex(c.Method) < methodIndex(d.Method)
}

func methodIndex(id string) int {
	for i, m := range RemoteMethods {
		if m.ID == id {
			return i
		}
	}
	return len(RemoteMethods)
}

// remoteTables are the run's tables; each row names its link, background
// direction, transport ("-" without background) and method.
func remoteTables(cells []remoteCell, c *RemoteConfig) []testbed.Table {
	head := []string{"link", "background", "transport", "method"}
	rtt := testbed.Table{Title: "Foreground probe RTT under background alone, ms: p50 / p95 (inflation above no background); probes lost of sent",
		Columns: append(slices.Clone(head), "p50", "p95", "inflation p50", "inflation p95", "probes lost")}
	from, to := aloneWindow(c.Warmup)
	share := testbed.Table{Title: fmt.Sprintf("Background share of the link: alone over [%v, %v) (the link's capacity and the background's rate there, Mbit/s; the share ÷ the CUBIC background's over the same transport, paired), under an interactive CUBIC bulk flow (its share); a second background flow joining the first: Jain over [%v, %v) after it joins; the background socket's congestion control after its app asked for %s (tcp-app-cc)", from, to, c.JainFor/3, c.JainFor, appCC),
		Columns: append(slices.Clone(head), "capacity alone", "bg alone Mbit/s", "bg alone", "alone ÷ CUBIC", "bg under fg bulk", "fg bulk", "Jain", "bg socket CC")}
	fct := testbed.Table{Title: "Foreground completion time ÷ the same transfer with no background (paired, mean over rounds), and (the time itself, s)",
		Columns: slices.Clone(head)}
	var sizes []string
	for _, d := range c.FGDirs {
		for _, s := range c.SizesKB {
			sizes = append(sizes, fmt.Sprintf("%s %d KB", d, s))
		}
	}
	fct.Columns = append(append(fct.Columns, sizes...), "late starts")
	for _, x := range cells {
		row := []string{x.Link, x.BGDir, orDash(x.Transport), x.Method}
		rtt.Rows = append(rtt.Rows, append(slices.Clone(row), f1(x.P50), f1(x.P95), f1(x.Infl50), f1(x.Infl95), fmt.Sprintf("%d of %d", x.ProbeLost, x.ProbeSent)))
		fct.Rows = append(fct.Rows, fctRow(x, row, sizes))
		if x.Method == "none" {
			continue
		}
		vsCubic := "-"
		if x.AloneVsCubic > 0 {
			vsCubic = fmt.Sprintf("%.2f", x.AloneVsCubic)
		}
		capAlone, bgAlone := "-", "-"
		if x.nAloneCap > 0 {
			capAlone, bgAlone = f1(x.AloneCapMbps), f1(x.BGAlone*x.AloneCapMbps)
		}
		share.Rows = append(share.Rows, append(slices.Clone(row), capAlone, bgAlone, pcts(x.BGAlone), vsCubic, pcts(x.BGUnder), pcts(x.FGBulk), fmt.Sprintf("%.2f", x.Jain), orDash(x.BGSocketCC)))
	}
	tables := []testbed.Table{rtt, fct, share}
	if st := steadyTable(cells, c); st != nil {
		tables = append(tables, *st)
	}
	if st := signalTable(cells); st != nil {
		tables = append(tables, *st)
	}
	return tables
}

// fctRow is a cell's completion-time row: per size the ratio to no
// background (none: "-") and the time itself, then the late starts.
func fctRow(x remoteCell, row, sizes []string) []string {
	out := slices.Clone(row)
	for _, s := range sizes {
		ratio := fmt.Sprintf("%.2f", x.FCTRatio[s])
		if x.Method == "none" {
			ratio = "-"
		}
		secs := "-"
		if x.fctDone[s] > 0 {
			secs = fmt.Sprintf("%.2f s", x.FCTSeconds[s])
		}
		out = append(out, ratio+" ("+secs+")")
	}
	return append(out, strconv.Itoa(x.Late))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

func pcts(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }
