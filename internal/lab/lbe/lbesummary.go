// lbesummary.go: lbe's trials summarized per method, direction and size
// (median and spread of the foreground transfer's time) and the tables,
// beside the paper's figure where it gives one.
package lbe

import (
	"fmt"
	"sort"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// LBECell is one (method, direction, size) summary.
type LBECell struct {
	Method string          `json:"method"`
	Dir    string          `json:"dir"`
	SizeKB int             `json:"size_kb"`
	Time   testbed.Summary `json:"seconds"`
	CPU    testbed.Summary `json:"cpu_ms"`
	Daemon testbed.Summary `json:"daemon_cpu_ms"` // of CPU, the lanes daemon's
	Sirq   testbed.Summary `json:"softirq_ms"`
	Errors int             `json:"errors"`
}

// SummarizeLBE groups trials into cells.
func SummarizeLBE(trials []LBETrial) []LBECell {
	type key struct {
		m, d string
		s    int
	}
	groups := map[key][]LBETrial{}
	var keys []key
	for _, t := range trials {
		k := key{t.Method, t.Dir, t.SizeKB}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], t)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.d != b.d {
			return a.d < b.d
		}
		if a.s != b.s {
			return a.s < b.s
		}
		return a.m < b.m
	})
	var out []LBECell
	for _, k := range keys {
		var ts, cs, ds, ss []float64
		errs := 0
		for _, t := range groups[k] {
			if t.Error != "" {
				errs++
				continue
			}
			ts = append(ts, t.Seconds)
			cs = append(cs, t.CPUms)
			ds = append(ds, t.DaemonMs)
			ss = append(ss, t.SoftirqMs)
		}
		out = append(out, LBECell{Method: k.m, Dir: k.d, SizeKB: k.s, Time: testbed.Summarize(ts), CPU: testbed.Summarize(cs), Daemon: testbed.Summarize(ds), Sirq: testbed.Summarize(ss), Errors: errs})
	}
	return out
}

// paperLBE are the LW-LBE paper's figures given as numbers in its text
// (other points exist only as plots): 400 KB download, LW-LBE 3.68 s,
// task-based 4.04 s.
var paperLBE = map[string]string{"download/400": "(4) 3.68 s, (3) 4.04 s"}

// LBETables renders the cells: mean ± CI (median and range for few
// repetitions), p95, CPU.
func LBETables(cells []LBECell, methods []LBEMethod, withPaper bool) []testbed.Table {
	byKey := map[string]LBECell{}
	type row struct {
		d string
		s int
	}
	var rows []row
	seen := map[row]bool{}
	for _, c := range cells {
		byKey[fmt.Sprintf("%s/%d/%s", c.Dir, c.SizeKB, c.Method)] = c
		r := row{c.Dir, c.SizeKB}
		if !seen[r] {
			seen[r] = true
			rows = append(rows, r)
		}
	}
	cols := []string{"transfer"}
	for _, m := range methods {
		cols = append(cols, "("+m.ID+") "+m.Name)
	}
	mk := func(title string, f func(LBECell) string, paper bool) testbed.Table {
		t := testbed.Table{Title: title, Columns: append([]string(nil), cols...)}
		if paper {
			t.Columns = append(t.Columns, "paper")
		}
		for _, r := range rows {
			line := []string{fmt.Sprintf("%s %d KB", r.d, r.s)}
			for _, m := range methods {
				c, ok := byKey[fmt.Sprintf("%s/%d/%s", r.d, r.s, m.ID)]
				if !ok || c.Time.N == 0 {
					line = append(line, "-")
					continue
				}
				line = append(line, f(c))
			}
			if paper {
				p := paperLBE[fmt.Sprintf("%s/%d", r.d, r.s)]
				if p == "" {
					p = "-"
				}
				line = append(line, p)
			}
			t.Rows = append(t.Rows, line)
		}
		return t
	}
	n := 0
	for _, c := range cells {
		n = max(n, c.Time.N)
	}
	return []testbed.Table{
		mk("Foreground completion time, s: "+testbed.SpreadName(n), func(c LBECell) string {
			s := c.Time.SpreadText("%.2f")
			if c.Errors > 0 {
				s += fmt.Sprintf(" (%d err)", c.Errors)
			}
			return s
		}, withPaper),
		mk("Foreground completion time, s: p95", func(c LBECell) string { return fmt.Sprintf("%.2f", c.Time.P95) }, false),
		mk("CPU of the phone's tasks per transfer, ms: mean (machine softirq ms)", func(c LBECell) string {
			return fmt.Sprintf("%.1f (%.0f)", c.CPU.Mean, c.Sirq.Mean)
		}, false),
		mk("of it the lanes daemon's, ms: mean", func(c LBECell) string {
			return fmt.Sprintf("%.1f", c.Daemon.Mean)
		}, false),
	}
}
