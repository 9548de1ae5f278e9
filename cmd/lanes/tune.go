// tune.go: `lanes tune`, kernel settings that matter to real-time tasks.
// `lanes tune` shows the preemption model, HZ and RT throttling (the same
// report `lanes doctor` prints); `lanes tune preempt none|voluntary|full|lazy`
// switches the PREEMPT_DYNAMIC mode where the kernel allows it and says how
// to revert.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lanes-net/lanes/internal/sched"
)

func init() {
	register(&command{
		name:    "tune",
		summary: "show or switch kernel real-time settings (preemption model)",
		usage:   "[--json] | preempt none|voluntary|full|lazy",
		run:     runTune,
	})
}

func runTune(_ context.Context, e *env, args []string) error {
	sub, rest := splitSubcommand(args)
	switch sub {
	case "":
		fs := flag.NewFlagSet("tune", flag.ContinueOnError)
		fs.SetOutput(e.stderr)
		asJSON := fs.Bool("json", false, "JSON output")
		if err := fs.Parse(rest); err != nil {
			return usageErrorf("%v", err)
		}
		k := sched.ReadKernelRT()
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(k)
		}
		WriteKernelRT(e.stdout, k)
		return nil
	case "preempt":
		if len(rest) != 1 {
			return usageErrorf("tune preempt needs one mode: none, voluntary, full or lazy")
		}
		mode := rest[0]
		prev, err := sched.SetPreempt(mode)
		if err != nil {
			return fmt.Errorf("preempt %s: %w", mode, err)
		}
		fmt.Fprintf(e.stdout, "preemption model: %s -> %s (until reboot)\n", prev, mode)
		if prev != "" && prev != "unknown" {
			fmt.Fprintf(e.stdout, "revert with: lanes tune preempt %s\n", prev)
		}
		fmt.Fprintf(e.stdout, "make it permanent with preempt=%s on the kernel command line\n", mode)
		return nil
	}
	return usageErrorf("unknown tune target %q", sub)
}

// WriteKernelRT prints the real-time part of the kernel report (used by
// `lanes tune`; `lanes doctor` may print sched.ReadKernelRT() its own way).
func WriteKernelRT(w io.Writer, k sched.KernelRT) {
	pm := k.PreemptModel + " (from " + k.PreemptSource + ")"
	if k.PreemptDynamic {
		pm += ", PREEMPT_DYNAMIC"
		if len(k.PreemptModes) > 0 {
			pm += ": " + strings.Join(k.PreemptModes, " ")
		}
	}
	fmt.Fprintf(w, "kernel          %s\n", k.Release)
	fmt.Fprintf(w, "preemption      %s\n", pm)
	if k.PreemptNote != "" {
		fmt.Fprintf(w, "                note: %s\n", k.PreemptNote)
	}
	fmt.Fprintf(w, "HZ              %d (%s)\n", k.HZ, k.HZSource)
	fmt.Fprintf(w, "RT throttling   %s\n", k.RTThrottle())
	fmt.Fprintf(w, "RT group sched  %v\n", k.RTGroupSched)
	fmt.Fprintf(w, "proc connector  %v\n", k.ProcConnector)
}
