// Package testbed is what lanes' lab experiments share: hosts as network
// namespaces joined by emulated links (internal/lab/emu, internal/lab/topo),
// the helper programs that run traffic inside them, statistics, congestion
// control setup, and the results and figures an experiment writes.
//
// An experiment registers itself from an init function:
//
//	func init() {
//		testbed.Register(testbed.Experiment{Name: "coop", Summary: "...",
//			Setup: func(fs *flag.FlagSet) testbed.RunFunc {
//				n := fs.Int("hosts", 8, "number of hosts")
//				return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) { ... }
//			}})
//	}
//
// `lanes lab run NAME [flags]` parses the flags, calls the RunFunc, prints
// the Result's tables and writes results/<name>-<time>/ (see WriteResult).
// internal/lab links every experiment in; the experiments depend on this
// API and never on each other.
package testbed

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// Version is the lanes version recorded with every result (set by main).
var Version = "dev"

// RunFunc runs one configured experiment.
type RunFunc func(ctx context.Context, env *Env) (*Result, error)

// Experiment is one `lanes lab run NAME`.
type Experiment struct {
	Name    string
	Summary string
	// Setup registers the experiment's flags on fs and returns the function
	// that runs it with the parsed values.
	Setup func(fs *flag.FlagSet) RunFunc
	// Quick says what --quick shortens (e.g. "2 repetitions"); empty: the
	// experiment is short already and has no --quick.
	Quick string
	// Plot, if set, draws figures from a result (its Data as stored in
	// result.json); WriteResult and `lanes lab report` save them as PNG and
	// SVG beside the JSON.
	Plot func(r *Result) ([]Figure, error)
	// Tables, if set, computes the result's tables again from its stored
	// Params and Data, so `lanes lab report` prints a stored run with the
	// current summary (columns added since it ran included).
	Tables func(r *Result) ([]Table, error)
}

var (
	regMu sync.Mutex
	reg   = map[string]Experiment{}
)

// Register adds an experiment; a duplicate name panics.
func Register(e Experiment) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := reg[e.Name]; dup {
		panic("lab: duplicate experiment " + e.Name)
	}
	reg[e.Name] = e
}

// Lookup finds an experiment by name.
func Lookup(name string) (Experiment, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	e, ok := reg[name]
	return e, ok
}

// List returns the experiments sorted by name.
func List() []Experiment {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]Experiment, 0, len(reg))
	for _, e := range reg {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Env is what an experiment may use of the outside world.
type Env struct {
	Out   io.Writer    // progress lines and tables for the user
	Log   *slog.Logger // diagnostics
	Quick bool         // shortened run (demo, tests)
	// Exe is the lanes binary that helpers and the daemon run as
	// (default: this executable). Tests set it to the test binary.
	Exe string
	// Policy is a lanes policy file for the daemons a run starts (recorded
	// with the results). Empty: experiments write their own.
	Policy string
	// RealTime is the SCHED_FIFO priority of the lab process while a bed
	// runs (emu/realtime.go); 0 leaves it at normal priority.
	RealTime int

	LastPolicy string // the policy an experiment generated, for the record
}

// Progress reports a run's steps: the current one, how many are done, the
// time spent and an estimate of the time left (from the steps done so far).
type Progress struct {
	env         *Env
	total, done int
	start       time.Time
}

// NewProgress starts reporting a run of total steps.
func (e *Env) NewProgress(total int) *Progress {
	return &Progress{env: e, total: total, start: time.Now()}
}

// Step announces the next step; the previous one counts as done.
func (p *Progress) Step(format string, a ...any) {
	el := time.Since(p.start)
	eta := "ETA after the first step"
	if p.done > 0 {
		left := time.Duration(float64(el) / float64(p.done) * float64(max(p.total-p.done, 0)))
		eta = "ETA " + left.Round(time.Second).String()
	}
	p.env.Printf("[%d/%d %s elapsed, %s] %s\n", p.done+1, p.total, el.Round(time.Second), eta, fmt.Sprintf(format, a...))
	p.done++
}

// Printf writes a progress line.
func (e *Env) Printf(format string, a ...any) {
	if e.Out != nil {
		fmt.Fprintf(e.Out, format, a...)
	}
}

// Result is what an experiment returns; WriteResult stores it.
type Result struct {
	Experiment string         `json:"experiment"`
	Started    time.Time      `json:"started"`
	Duration   time.Duration  `json:"duration_ns"`
	Params     map[string]any `json:"params"`
	Tables     []Table        `json:"tables"`
	Notes      []string       `json:"notes,omitempty"`
	// Failures are checks of the run that failed (`lanes lab run` exits
	// non-zero after writing the results).
	Failures    []string     `json:"failures,omitempty"`
	Data        any          `json:"data,omitempty"`        // experiment-specific raw results
	Environment *Environment `json:"environment,omitempty"` // written to environment.json
}

// Table is a result table; cells are preformatted strings.
type Table struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}
