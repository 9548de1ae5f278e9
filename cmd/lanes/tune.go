// tune.go: `lanes tune`, kernel settings that matter to real-time tasks.
// `lanes tune` shows the preemption model, HZ and RT throttling (the same
// report `lanes doctor` prints); `lanes tune preempt none|voluntary|full|lazy`
// switches the PREEMPT_DYNAMIC mode where the kernel allows it and says how
// to revert.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/sched"
)

func init() {
	register(&command{path: "tune", summary: "show or switch kernel real-time settings (preemption model)",
		setup: func(fs *pflag.FlagSet, e *env) runFunc {
			asJSON := fs.Bool("json", false, "JSON output")
			return func(context.Context, []string) error {
				k := sched.ReadKernelRT()
				if *asJSON {
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(k)
				}
				WriteKernelRT(e.stdout, k)
				return nil
			}
		}})
	register(&command{path: "tune preempt", summary: "switch the PREEMPT_DYNAMIC preemption model until reboot (the modes this kernel offers: lanes tune)",
		args: "none|voluntary|full|lazy", nargs: exactArgs(1, "one mode: none, voluntary, full or lazy"),
		setup: func(_ *pflag.FlagSet, e *env) runFunc {
			return func(_ context.Context, args []string) error { return tunePreempt(e, args[0]) }
		}})
}

func tunePreempt(e *env, mode string) error {
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
