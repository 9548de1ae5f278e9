// lbeflags.go: the flags of lbe and lbe-overhead (methods, sizes,
// directions, repetitions), their parsing, and the methods and traces
// this machine cannot run, dropped with a note.
package lbe

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/traces"
)

// lbeFlags registers the flags lbe, lbe-overhead and lbe-feedback share.
func lbeFlags(fs *flag.FlagSet, c *LBEConfig) (methods, sizes, dirs *string, reps *int) {
	fs.StringVar(&c.UpTrace, "up-trace", "TMobile-UMTS-driving.up", "uplink mahimahi trace, a name in the traces folder or a path (empty: --up-rate)")
	fs.StringVar(&c.DownTrace, "down-trace", "TMobile-UMTS-driving.down", "downlink mahimahi trace, a name in the traces folder or a path (empty: --down-rate)")
	fs.Float64Var(&c.UpRate, "up-rate", 0, "fixed uplink rate, bit/s (with --up-trace '')")
	fs.Float64Var(&c.DownRate, "down-rate", 0, "fixed downlink rate, bit/s (with --down-trace '')")
	fs.DurationVar(&c.Delay, "delay", 50*time.Millisecond, "one-way delay each direction")
	fs.IntVar(&c.DownQueuePackets, "down-queue", 100, "downlink queue, packets")
	fs.DurationVar(&c.Warmup, "warmup", 5*time.Second, "background upload time before the first transfer")
	fs.DurationVar(&c.Pause, "pause", 500*time.Millisecond, "pause between transfers")
	fs.DurationVar(&c.Slot, "slot", 0, "paired schedule: transfer i starts at warmup + i x slot into the links for every method (0: one after another with --pause)")
	fs.StringVar(&c.CC, "cc", "cubic", "congestion control of every host")
	fs.Int64Var(&c.Seed, "seed", 1, "seed for the order of methods and transfers")
	fs.StringVar(&c.Lanes, "lanes", "", "lanes binary for methods 4 and 6 (default: this executable)")
	reps = fs.Int("reps", 20, "repetitions (the paper used 100)")
	sizes = fs.String("sizes", "1,10,100,400,1000", "foreground sizes, KB")
	dirs = fs.String("dirs", "download,upload", "foreground directions")
	methods = fs.String("methods", "1,2,3,4,5,6", "methods to run")
	return
}

func parseLBE(c *LBEConfig, all []LBEMethod, methods, sizes, dirs string, reps int) error {
	c.Reps = reps
	c.SizesKB, c.Dirs, c.Methods = nil, nil, nil
	for _, s := range strings.Split(sizes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v <= 0 {
			return fmt.Errorf("bad size %q", s)
		}
		c.SizesKB = append(c.SizesKB, v)
	}
	for _, d := range strings.Split(dirs, ",") {
		d = strings.TrimSpace(d)
		if d != "download" && d != "upload" {
			return fmt.Errorf("bad direction %q (download or upload)", d)
		}
		c.Dirs = append(c.Dirs, d)
	}
	for _, id := range strings.Split(methods, ",") {
		found := false
		for _, m := range all {
			if m.ID == strings.TrimSpace(id) {
				c.Methods = append(c.Methods, m)
				found = true
			}
		}
		if !found {
			return fmt.Errorf("unknown method %q", id)
		}
	}
	if c.Lanes == "" {
		c.Lanes, _ = os.Executable()
	}
	return nil
}

// dropUnavailable removes the lanes methods when the lanes binary has no
// daemon, with a note.
func dropUnavailable(c *LBEConfig, r *testbed.Result) {
	if testbed.LanesAvailable(c.Lanes) {
		return
	}
	var keep []LBEMethod
	for _, m := range c.Methods {
		if m.Kind == "lanes" {
			r.Notes = append(r.Notes, fmt.Sprintf("method %s skipped: %s has no working `daemon` command", m.ID, c.Lanes))
			continue
		}
		keep = append(keep, m)
	}
	c.Methods = keep
}

// checkTraces fails early, before any testbed is built, when a trace the
// configuration names cannot be found (see internal/traces for where).
func checkTraces(c *LBEConfig) error {
	for _, name := range []string{c.UpTrace, c.DownTrace} {
		if name == "" {
			continue
		}
		if _, err := traces.Path(name); err != nil {
			return err
		}
	}
	return nil
}

func orRate(trace string, rate float64) string {
	if trace != "" {
		return filepath.Base(trace)
	}
	return fmt.Sprintf("%.2f Mbit/s", rate/1e6)
}
