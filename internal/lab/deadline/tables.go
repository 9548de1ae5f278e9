// tables.go: a run's records summarized per flow and stage (the paper's
// five timestamps: generation, queue, transmission, delivery, total), the
// misses and drops counted, and the tables beside the paper's figures.
package deadline

import (
	"fmt"
	"math"
	"strings"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

type stageByFlow map[string][2]float64 // flow name -> {mean, max} µs

type dlCounts struct {
	Sent     int `json:"sent"`
	Refused  int `json:"refused"`
	Dropped  int `json:"dropped"`
	Lost     int `json:"lost"`
	Late     int `json:"late"` // arrived (kernel) after the deadline
	Misses   int `json:"misses"`
	Received int `json:"received"`
}

var dlStages = []string{"generation", "queue", "transmission", "delivery", "total"}

// The paper's tables 2 (proposed) and 3 (Linux default), µs, {A mean, A max, B mean, B max}.
var dlPaper = map[string]map[string][4]float64{
	"lanes": {
		"generation": {6.6, 31, 6.8, 31}, "queue": {2.8, 23, 2.8, 23}, "transmission": {99.4, 213, 102.0, 177},
		"delivery": {37.7, 928, 40.3, 158}, "total": {146.5, 999, 151.9, 306}},
	"default": {
		"generation": {10.3, 86, 10.5, 57}, "queue": {11582, 12317, 11464.7, 12311}, "transmission": {2660.7, 2957, 2574.1, 2848},
		"delivery": {51.8, 564, 42.4, 464}, "total": {14305.6, 15397, 14091.6, 15236}},
}

func (r *dlRun) summarize(flows []dlFlow) {
	r.Stages = map[string]stageByFlow{}
	r.Counts = map[string]dlCounts{}
	for _, st := range dlStages {
		r.Stages[st] = stageByFlow{}
	}
	for _, f := range flows {
		var c dlCounts
		vals := map[string][]float64{}
		for _, x := range r.Records {
			if x.Flow != f.ID {
				continue
			}
			c.Sent++
			switch {
			case x.Refused != "":
				c.Refused++
			case x.Dropped:
				c.Dropped++
			case x.Arrive == 0:
				c.Lost++
			default:
				c.Received++
				if x.Arrive > x.Deadline {
					c.Late++
				}
			}
			if x.Refused != "" || x.Dropped || x.Arrive == 0 {
				continue
			}
			us := func(a, b int64) float64 { return float64(b-a) / 1e3 }
			if x.Enqueue != 0 {
				vals["generation"] = append(vals["generation"], us(x.Send, x.Enqueue))
				if x.Dequeue != 0 {
					vals["queue"] = append(vals["queue"], us(x.Enqueue, x.Dequeue))
					vals["transmission"] = append(vals["transmission"], us(x.Dequeue, x.Arrive))
				}
			}
			vals["delivery"] = append(vals["delivery"], us(x.Arrive, x.Receive))
			vals["total"] = append(vals["total"], us(x.Send, x.Receive))
		}
		// A refusal is the paper's SIGURG: not sent, sender told at once.
		// A miss is a promise broken: accepted (or, without admission
		// control, sent) but dropped, lost or late.
		c.Misses = c.Dropped + c.Lost + c.Late
		r.Counts[f.Name] = c
		for _, st := range dlStages {
			v := vals[st]
			if len(v) == 0 {
				r.Stages[st][f.Name] = [2]float64{math.NaN(), math.NaN()}
				continue
			}
			var sum, mx float64
			for _, x := range v {
				sum += x
				mx = math.Max(mx, x)
			}
			r.Stages[st][f.Name] = [2]float64{sum / float64(len(v)), mx}
		}
	}
}

func (r *dlRun) countLine(flows []dlFlow) string {
	s := ""
	for _, f := range flows {
		c := r.Counts[f.Name]
		s += fmt.Sprintf(" %s: %d sent, %d refused, %d dropped, %d lost, %d late;", f.Name, c.Sent, c.Refused, c.Dropped, c.Lost, c.Late)
	}
	return s
}

func fmtUS(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if v >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// stageTable is the paper's table 2 or 3 with its numbers beside ours.
func stageTable(title string, r *dlRun, paper map[string][4]float64) testbed.Table {
	t := testbed.Table{Title: title, Columns: []string{"stage (µs)", "A mean", "A max", "B mean", "B max", "paper A mean", "paper A max", "paper B mean", "paper B max"}}
	for _, st := range dlStages {
		a, b := r.Stages[st]["A"], r.Stages[st]["B"]
		row := []string{st, fmtUS(a[0]), fmtUS(a[1]), fmtUS(b[0]), fmtUS(b[1])}
		pp := paper[st]
		for _, v := range pp {
			row = append(row, fmtUS(v))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func countTable(title string, runs []*dlRun, flows []dlFlow) testbed.Table {
	t := testbed.Table{Title: title, Columns: []string{"config", "flow", "sent", "refused", "dropped", "lost", "late", "misses", "miss %", "refused+missed %"}}
	for _, r := range runs {
		for _, f := range flows {
			c := r.Counts[f.Name]
			pct, all := 0.0, 0.0
			if c.Sent > 0 {
				pct = 100 * float64(c.Misses) / float64(c.Sent)
				all = 100 * float64(c.Misses+c.Refused) / float64(c.Sent)
			}
			t.Rows = append(t.Rows, []string{r.Config, f.Name, fmt.Sprint(c.Sent), fmt.Sprint(c.Refused), fmt.Sprint(c.Dropped),
				fmt.Sprint(c.Lost), fmt.Sprint(c.Late), fmt.Sprint(c.Misses), fmt.Sprintf("%.2f", pct), fmt.Sprintf("%.2f", all)})
		}
	}
	return t
}

// residenceNote is the lane's residence (admission -> release) of r's
// delivered datagrams, every flow together: mean, p99 and max, the figure
// docs/realtime.md gives for lanes-rtd (the stage tables give mean and max
// per flow only).
func residenceNote(r *dlRun, flows []dlFlow) string {
	var names []string
	for _, f := range flows {
		names = append(names, f.Name)
	}
	v := pairValues(r, 0)
	mean, p99, mx := meanP99Max(v)
	return fmt.Sprintf("lanes: residence (admission -> release) of flows %s together, %d datagrams: mean %s, p99 %s, max %s µs",
		strings.Join(names, ", "), len(v), fmtUS(mean), fmtUS(p99), fmtUS(mx))
}
