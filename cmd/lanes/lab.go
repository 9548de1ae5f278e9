//go:build !nolab

// lab.go: `lanes lab`, the emulated-link testbed and the papers' experiments.
//
//	lanes lab list                      experiments
//	lanes lab run NAME [--results DIR] [--quick] [--json] [experiment flags]
//	lanes lab report DIR                print a stored result again, redraw its figures
//	lanes lab demo                      short lbe run with the paper's numbers
//	lanes lab clean                     remove namespaces of dead lab runs
//	lanes lab helper ...                traffic programs run inside hosts (internal)
//
// Built unless -tags nolab (the device builds of make cross leave the lab
// out; docs/ARCHITECTURE.md has the sizes).
//
// Experiments define their flags on a standard flag.FlagSet (internal/lab);
// pflag takes them over, so they parse GNU style like every other flag.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	_ "github.com/lanes-net/lanes/internal/lab" // links every experiment in
	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

func init() {
	register(&command{path: "lab", summary: "emulated-link testbed and the papers' experiments"})
	register(&command{path: "lab list", summary: "list the experiments", setup: func(_ *pflag.FlagSet, e *env) runFunc {
		return func(context.Context, []string) error {
			for _, x := range testbed.List() {
				fmt.Fprintf(e.stdout, "%-14s %s\n", x.Name, x.Summary)
			}
			return nil
		}
	}})
	register(&command{path: "lab run", summary: "run an experiment (one subcommand each; see 'lanes lab list')",
		children: experimentCommands})
	register(&command{path: "lab demo", summary: "short lbe run with the paper's numbers (make demo)",
		setup: func(fs *pflag.FlagSet, e *env) runFunc { return labRunCmd(fs, e, mustExperiment("lbe"), true) }})
	register(&command{path: "lab report", summary: "print a stored result again and redraw its figures", args: "DIR",
		nargs: exactArgs(1, "one results folder"), setup: func(_ *pflag.FlagSet, e *env) runFunc {
			return func(_ context.Context, args []string) error {
				r, err := testbed.ReadResult(args[0])
				if err != nil {
					return err
				}
				if err := testbed.RedoTables(r); err != nil {
					return err
				}
				printTables(e, r)
				files, err := testbed.DrawPlots(args[0], r)
				for _, f := range files {
					fmt.Fprintf(e.stderr, "drew %s\n", f)
				}
				return err
			}
		}})
	register(&command{path: "lab clean", summary: "remove the network namespaces of dead lab runs",
		setup: func(_ *pflag.FlagSet, e *env) runFunc {
			return func(context.Context, []string) error {
				names, err := topo.Clean()
				for _, n := range names {
					fmt.Fprintf(e.stdout, "removed netns %s\n", n)
				}
				return err
			}
		}})
	register(&command{path: "lab helper", summary: "traffic programs run inside lab hosts (internal)", hidden: true,
		rawArgs: true, nargs: anyArgs, setup: func(*pflag.FlagSet, *env) runFunc {
			return func(_ context.Context, args []string) error {
				if code := testbed.HelperMain(args); code != 0 {
					return fmt.Errorf("helper failed (exit %d)", code)
				}
				return nil
			}
		}})
}

func mustExperiment(name string) testbed.Experiment {
	x, ok := testbed.Lookup(name)
	if !ok {
		panic("lanes: no experiment " + name)
	}
	return x
}

// experimentCommands makes `lanes lab run NAME` for every experiment, with
// the experiment's own flags beside the common ones.
func experimentCommands(e *env) []*cobra.Command {
	var out []*cobra.Command
	for _, x := range testbed.List() {
		c := &command{path: "lab run " + x.Name, summary: x.Summary,
			setup: func(fs *pflag.FlagSet, e *env) runFunc { return labRunCmd(fs, e, x, false) }}
		out = append(out, c.cobra(e, x.Name))
	}
	return out
}

// labRunCmd defines the common and the experiment's flags and returns the run.
func labRunCmd(fs *pflag.FlagSet, e *env, x testbed.Experiment, demo bool) runFunc {
	results := fs.String("results", "results", "folder for results/<experiment>-<time>/")
	quick := new(bool)
	*quick = demo
	if x.Quick != "" && !demo {
		fs.BoolVar(quick, "quick", false, "shortened run: "+x.Quick)
	}
	asJSON := fs.Bool("json", false, "print the result as JSON")
	policy := fs.String("policy", "", "lanes policy file for runs that start the daemon (recorded)")
	rtPrio := fs.Int("realtime-priority", emu.DefaultRealTimePriority, "SCHED_FIFO priority of the lab process while the emulator runs, so a busy machine cannot delay its packets (0: normal priority)")
	gofs := flag.NewFlagSet(x.Name, flag.ContinueOnError)
	gofs.SetOutput(io.Discard)
	runFn := x.Setup(gofs)
	if demo {
		if err := gofs.Set("demo", "true"); err != nil {
			panic(err)
		}
	} else {
		fs.AddGoFlagSet(gofs)
	}
	return func(ctx context.Context, _ []string) error {
		testbed.Version = version
		lenv := &testbed.Env{Out: e.stdout, Log: slog.New(slog.NewTextHandler(e.stderr, nil)), Quick: *quick, Policy: *policy, RealTime: *rtPrio}
		if *asJSON {
			lenv.Out = e.stderr
		}
		r, err := runFn(ctx, lenv)
		if err != nil {
			return fmt.Errorf("%s: %w", x.Name, err)
		}
		dir, werr := testbed.WriteResult(*results, r)
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(r)
		} else {
			printTables(e, r)
		}
		if werr != nil {
			return werr
		}
		fmt.Fprintf(e.stderr, "results in %s\n", dir)
		if len(r.Failures) > 0 {
			return fmt.Errorf("%s: check failed: %s", x.Name, strings.Join(r.Failures, "; "))
		}
		return nil
	}
}

func printTables(e *env, r *testbed.Result) {
	for i, t := range r.Tables {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		testbed.WriteText(e.stdout, t)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(e.stdout)
		for _, n := range r.Notes {
			fmt.Fprintf(e.stdout, "note: %s\n", strings.TrimSpace(n))
		}
	}
}
