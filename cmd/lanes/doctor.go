// doctor.go: `lanes doctor`, which kernel features lanes uses are present on
// this machine and what lanes does without each.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/rledbat"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/sched"
)

func init() {
	register(&command{path: "doctor", summary: "probe the kernel features lanes uses and say what it does without each",
		setup: func(fs *pflag.FlagSet, e *env) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			verbose := fs.BoolP("verbose", "v", false, "every line whole (default: 100 columns)")
			return func(context.Context, []string) error { return runDoctor(e, *asJSON, *verbose) }
		}})
}

// errNotRoot: the probes load BPF programs and create qdiscs, which only
// root (CAP_BPF, CAP_NET_ADMIN) may; as another user every probe would fail
// and be misreported as a missing kernel feature.
var errNotRoot = errors.New("run as root: the probes load BPF programs and create qdiscs in a scratch namespace")

func runDoctor(e *env, asJSON, verbose bool) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	r := features.Probe()
	k := sched.ReadKernelRT()
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			*features.Report
			Scheduler        sched.KernelRT `json:"scheduler"`
			RealtimeDataPath string         `json:"realtime_data_path"`
			ProcessEvents    string         `json:"process_events"`
		}{r, k, realtimeDataPath(), processEvents()})
	}
	out := e.stdout
	if !verbose {
		fw := newFitWriter(e.stdout)
		defer fw.Close()
		out = fw
	}
	missingNeeded := writeDoctor(out, r, k, verbose)
	if missingNeeded > 0 {
		return fmt.Errorf("%d needed feature(s) missing: lanes cannot manage traffic here", missingNeeded)
	}
	return nil
}

// writeDoctor writes the report for people, ending with the verdict, and
// says how many needed features are missing.
func writeDoctor(w io.Writer, r *features.Report, k sched.KernelRT, verbose bool) int {
	fmt.Fprintf(w, "kernel %s\n\n", r.Kernel)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "feature\tstate\twithout it / detail")
	missingNeeded := 0
	for _, f := range r.Features {
		state := "yes"
		note := f.Detail
		if !f.Present {
			state = "no"
			if f.Needed {
				state = "NO (needed)"
				missingNeeded++
			}
			if f.Fallback != "" {
				note = f.Fallback
			}
		}
		if f.Use != "" && (f.Present || f.Fallback == "") {
			note = f.Use
		}
		name := f.Name
		if !verbose {
			name = stripParens(name) // the table's first column stays narrow
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, state, note)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nbackground uploads held back by: %s\n", uploadProtection(r))
	fmt.Fprintf(w, "background downloads held back by: %s\n", downloadProtection(r))
	fmt.Fprintf(w, "realtime data path: %s\n", realtimeDataPath())
	fmt.Fprintf(w, "process events for exe:/comm: rules and tasks: %s\n", processEvents())
	dyn := ""
	switch {
	case k.PreemptDynamic && len(k.PreemptModes) > 0:
		dyn = fmt.Sprintf(", switchable at run time (%s; `lanes tune preempt MODE`)", strings.Join(k.PreemptModes, " "))
	case k.PreemptDynamic:
		dyn = ", PREEMPT_DYNAMIC kernel"
	}
	if k.PreemptNote != "" {
		dyn += "\n  note: " + k.PreemptNote
	}
	fmt.Fprintf(w, "\nscheduler: preemption %s (from %s)%s\n", k.PreemptModel, k.PreemptSource, dyn)
	fmt.Fprintf(w, "  HZ %d (%s); RT throttling: %s; proc connector: %v\n", k.HZ, k.HZSource, k.RTThrottle(), k.ProcConnector)
	fmt.Fprintf(w, "\n%s\n", verdict(r, missingNeeded, rtlane.FindHelper() != ""))
	return missingNeeded
}

// verdict is doctor's last line: whether lanes works here, with which
// lanes, and what is missing for the rest ("lanes will work here: all
// lanes", "...: interactive, background; without lanes-rtd: no realtime
// lane").
func verdict(r *features.Report, missingNeeded int, rtd bool) string {
	if missingNeeded > 0 {
		var names []string
		for _, f := range r.Features {
			if f.Needed && !f.Present {
				names = append(names, f.Name)
			}
		}
		return "lanes will NOT work here: missing " + strings.Join(names, ", ")
	}
	lanes := "all lanes"
	var without []string
	if !rtd {
		lanes = "interactive, background"
		without = append(without, "without "+rtlane.HelperName+": no realtime lane")
	}
	if !r.Has(features.LedbatFeature) && !r.Has(features.SockopsFeature) {
		without = append(without, "without struct_ops and sock_ops: background uploads held back on the device only")
	}
	if !r.Has(features.WindowClampFeature) && !r.Has(features.PidfdFeature) {
		without = append(without, "without a window clamp: background downloads not held back")
	}
	return "lanes will work here: " + strings.Join(append([]string{lanes}, without...), "; ")
}

// realtimeDataPath says where the daemon runs the realtime lane's data
// path: lanes-rtd, installed with this lanes; without it the realtime lane
// is unavailable (docs/realtime.md "The data path process").
func realtimeDataPath() string {
	if p := rtlane.FindHelper(); p != "" {
		return "lanes-rtd (" + p + "), outside Go's runtime"
	}
	return "none: no " + rtlane.HelperName + " beside this executable or in ../libexec/lanes/, so the realtime lane is unavailable (everything else runs)"
}

// processEvents names the source of process events the daemon's task
// engine takes here, and why not the proc connector where it is another.
func processEvents() string {
	mode, connErr, err := sched.ProbeEventSource()
	switch {
	case err != nil:
		return fmt.Sprintf("%s: no event source (%v)", mode, err)
	case connErr != nil:
		return fmt.Sprintf("%s (the lanes process event programs; no proc connector: %v)", mode, connErr)
	}
	return mode + " (the proc connector)"
}

// uploadProtection says how this kernel lets LEDBAT++ hold background
// uploads: as their congestion control (struct_ops), else its window as
// their cwnd clamp from sock_ops' RTT callbacks, else not at all.
func uploadProtection(r *features.Report) string {
	switch {
	case r.Has(features.LedbatFeature):
		return "LEDBAT++ as their congestion control (struct_ops)"
	case r.Has(features.SockopsFeature):
		return fmt.Sprintf("cwnd clamp: LEDBAT++'s window from sock_ops over the system's congestion control (no struct_ops congestion control: %s)", featureDetail(r, features.LedbatFeature))
	}
	return fmt.Sprintf("none (struct_ops: %s; sock_ops: %s)", featureDetail(r, features.LedbatFeature), featureDetail(r, features.SockopsFeature))
}

// featureDetail is a probed feature's detail (its error where absent).
func featureDetail(r *features.Report, name string) string {
	for _, f := range r.Features {
		if f.Name == name {
			return f.Detail
		}
	}
	return "not probed"
}

// downloadProtection says which rLEDBAT this kernel allows: in BPF
// (sock_ops sets TCP_WINDOW_CLAMP, 5.11+), from the daemon (pidfd_getfd),
// or none, and why.
func downloadProtection(r *features.Report) string {
	detail := func(name string) string { return featureDetail(r, name) }
	switch {
	case r.Has(features.WindowClampFeature):
		return "rLEDBAT in BPF (sock_ops, at every segment sent)"
	case r.Has(features.PidfdFeature):
		return fmt.Sprintf("rLEDBAT from the daemon every %v (pidfd_getfd + TCP_WINDOW_CLAMP; BPF: %s)", rledbat.DefaultInterval, detail(features.WindowClampFeature))
	}
	return fmt.Sprintf("none (BPF: %s; daemon: %s)", detail(features.WindowClampFeature), detail(features.PidfdFeature))
}
