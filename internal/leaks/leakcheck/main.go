// leakcheck fails (exit 1) when lanes left anything on this machine: the
// last step of `make test` (package leaks says what it looks for).
//
// A run that was killed (a session cut off, a CI job cancelled) cannot
// clean up after itself, and what it left is not the next run's leak. So
// `make test` first saves what is already there (-save FILE) and ends with
// -since FILE: only what appeared during the run fails it; what was there
// before is listed, not counted. Files are checked the same way without a
// baseline: the tests run with TMPDIR in a fresh directory (-tmp DIR), and
// whatever is left in it fails the run.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/leaks"
)

func main() {
	save := flag.String("save", "", "write the leftovers present now to `FILE` and exit (the baseline for -since)")
	since := flag.String("since", "", "fail only on leftovers not listed in `FILE` (written by -save before the run)")
	tmp := flag.String("tmp", "", "also fail on anything left in `DIR` (the TMPDIR the tests ran with, empty before), then remove it")
	flag.Parse()
	left := leaks.Find()
	if *save != "" {
		if err := os.WriteFile(*save, []byte(strings.Join(left, "\n")), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "leakcheck:", err)
			os.Exit(2)
		}
		report("present before this run (not counted against it)", left)
		return
	}
	before, err := baseline(*since)
	if err != nil {
		fmt.Fprintln(os.Stderr, "leakcheck:", err)
		os.Exit(2)
	}
	old, added := leaks.Split(left, before)
	added = settled(added, before)
	if *tmp != "" {
		added = append(added, leaks.TempFiles(*tmp)...)
		_ = os.RemoveAll(*tmp)
	}
	report("present before this run (not counted against it)", old)
	if len(added) == 0 {
		fmt.Println("leakcheck: nothing of lanes left on this machine by this run")
		return
	}
	fmt.Fprintf(os.Stderr, "leakcheck: %d leftovers of lanes on this machine:\n", len(added))
	for _, l := range added {
		fmt.Fprintln(os.Stderr, "  "+l)
	}
	os.Exit(1)
}

// settle is how long leftovers may take to go before they count: the
// kernel frees a struct_ops map and its programs after an RCU tasks-trace
// grace period, after the daemon that held them has exited (a run's last
// test ends just before this check).
const settle = 15 * time.Second

// settled re-reads the machine until what the run added is gone or settle
// has passed, and returns what is left then.
func settled(added, before []string) []string {
	start := time.Now()
	for len(added) > 0 && time.Since(start) < settle {
		time.Sleep(250 * time.Millisecond)
		_, added = leaks.Split(leaks.Find(), before)
		if len(added) == 0 {
			fmt.Printf("leakcheck: the kernel released the run's last objects %.1f s after the tests ended\n", time.Since(start).Seconds())
		}
	}
	return added
}

// baseline reads a -save file; no file named means an empty baseline.
func baseline(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\n"), nil
}

func report(what string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(os.Stderr, "leakcheck: %d leftovers of lanes %s:\n", len(items), what)
	for _, l := range items {
		fmt.Fprintln(os.Stderr, "  "+l)
	}
}
