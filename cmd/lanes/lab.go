// lab.go: `lanes lab`, the emulated-link testbed and the papers' experiments.
//
//	lanes lab list                      experiments
//	lanes lab run NAME [--results DIR] [--quick] [--json] [experiment flags]
//	lanes lab report DIR                print a stored result again, redraw its figures
//	lanes lab demo                      short lbe run with the paper's numbers
//	lanes lab clean                     remove namespaces of dead lab runs
//	lanes lab helper ...                traffic programs run inside hosts (internal)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/lanes-net/lanes/internal/lab"
	"github.com/lanes-net/lanes/internal/lab/topo"
)

func init() {
	register(&command{name: "lab", summary: "emulated-link testbed and the papers' experiments",
		usage: "list | run NAME [--results DIR] [--quick] [--json] [flags] | report DIR | demo | clean",
		run:   runLab})
}

func runLab(ctx context.Context, e *env, args []string) error {
	lab.Version = version
	sub, rest := splitSubcommand(args)
	switch sub {
	case "list", "":
		for _, x := range lab.List() {
			fmt.Fprintf(e.stdout, "%-14s %s\n", x.Name, x.Summary)
		}
		return nil
	case "run":
		name, rest2 := splitSubcommand(rest)
		if name == "" {
			return usageErrorf("lab run needs an experiment name (see 'lanes lab list')")
		}
		return labRun(ctx, e, name, rest2, false)
	case "demo":
		return labRun(ctx, e, "lbe", append([]string{"--demo"}, rest...), true)
	case "report":
		if len(rest) != 1 {
			return usageErrorf("lab report needs a results folder")
		}
		r, err := lab.ReadResult(rest[0])
		if err != nil {
			return err
		}
		printTables(e, r)
		files, err := lab.DrawPlots(rest[0], r)
		for _, f := range files {
			fmt.Fprintf(e.stderr, "drew %s\n", f)
		}
		return err
	case "clean":
		names, err := topo.Clean()
		for _, n := range names {
			fmt.Fprintf(e.stdout, "removed netns %s\n", n)
		}
		return err
	case "helper":
		if code := lab.HelperMain(rest); code != 0 {
			return fmt.Errorf("helper failed (exit %d)", code)
		}
		return nil
	}
	return usageErrorf("unknown lab subcommand %q", sub)
}

func labRun(ctx context.Context, e *env, name string, args []string, demo bool) error {
	x, ok := lab.Lookup(name)
	if !ok {
		return usageErrorf("unknown experiment %q (see 'lanes lab list')", name)
	}
	fs := flag.NewFlagSet("lab run "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	results := fs.String("results", "results", "folder for results/<experiment>-<time>/")
	quick := fs.Bool("quick", demo, "shortened run")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	policy := fs.String("policy", "", "lanes policy file for runs that start the daemon (recorded)")
	runFn := x.Setup(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageErrorf("%v", err)
	}
	lenv := &lab.Env{Out: e.stderr, Log: slog.New(slog.NewTextHandler(e.stderr, nil)), Quick: *quick, Policy: *policy}
	if *asJSON {
		lenv.Out = e.stderr
	} else {
		lenv.Out = e.stdout
	}
	r, err := runFn(ctx, lenv)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	dir, werr := lab.WriteResult(*results, r)
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
	return nil
}

func printTables(e *env, r *lab.Result) {
	for i, t := range r.Tables {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		lab.WriteText(e.stdout, t)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(e.stdout)
		for _, n := range r.Notes {
			fmt.Fprintf(e.stdout, "note: %s\n", strings.TrimSpace(n))
		}
	}
}
