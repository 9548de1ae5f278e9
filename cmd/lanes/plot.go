// plot.go: `lanes plot FILE`, cwnd, RTT and throughput of each flow over
// time from a `lanes monitor --json/--csv` file (samples) or a `lanes
// monitor --events --probe --json` file (every ACK), drawn to PNG and SVG.
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/tcpmon"
)

func init() {
	register(&command{path: "plot", summary: "draw cwnd, RTT and throughput per flow from a monitor file (PNG and SVG)",
		args: "FILE", nargs: exactArgs(1, "exactly one monitor file"), setup: plotCmd})
}

func plotCmd(fs *pflag.FlagSet, e *env) runFunc {
	out := fs.String("output", "", "write PREFIX.png and PREFIX.svg (default: FILE without its extension)")
	top := fs.Int("top", 8, "plot the N flows that moved the most bytes")
	match := fs.String("match", "", "only flows whose local->remote text contains this")
	title := fs.String("title", "", "figure title (default: the file name)")
	smooth := fs.Duration("smooth", 100*time.Millisecond, "throughput over this window of bytes_acked (0: the monitor's per-sample rate)")
	return func(_ context.Context, args []string) error {
		return runPlot(e, args[0], *out, *top, *match, *title, *smooth)
	}
}

func runPlot(e *env, path, out string, top int, match, title string, smooth time.Duration) error {
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
	t := title
	if t == "" {
		t = "TCP flows from " + path
	}
	fig := tcpmon.FlowFigure(flows, tcpmon.FigureOptions{Title: t, Top: top, Match: match, Smooth: smooth})
	if len(fig.Panels[0].Series) == 0 {
		return fmt.Errorf("%s: no flow matches %q", path, match)
	}
	prefix := out
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
