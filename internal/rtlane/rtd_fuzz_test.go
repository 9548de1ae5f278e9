// rtd_fuzz_test.go: lanes-rtd's C, fuzzed and unit-tested. The fuzz
// target (rtd/fuzz/fuzz_rtd.c) runs under libFuzzer with ASan and UBSan
// for FUZZ_TIME seconds (60 in make test, 600 in make fuzz) and fails on
// a crash, a sanitizer report or a leaked descriptor; the core's tests
// (rtd/test/core_test.c) run under the sanitizers where clang has them.
package rtlane

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/rtlane/rtdbuild"
	"github.com/lanes-net/lanes/internal/testutil"
)

// clang returns the clang on PATH, or skips the test.
func clang(t *testing.T) string {
	c, err := exec.LookPath("clang")
	if err != nil {
		t.Skip("no clang: the fuzz target and the sanitizer builds need it (scripts/deps.sh test installs it)")
	}
	return c
}

// fuzzTime is FUZZ_TIME (seconds), 60 by default.
func fuzzTime(t *testing.T) int {
	if v := os.Getenv("FUZZ_TIME"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FUZZ_TIME=%q: want seconds", v)
		}
		return n
	}
	return 60
}

// TestFuzzRtd runs lanes-rtd's fuzz target: clients' messages with and
// without descriptors and the daemon's control messages through the real
// loop, a descriptor leak after any input aborting it. It printed, 60 s
// at load 10 on 2 CPUs: about 1,100 inputs/s; with the N1b fix undone it
// stops within seconds on the leaked descriptor.
func TestFuzzRtd(t *testing.T) {
	if testing.Short() {
		t.Skip("fuzzing: not in -short")
	}
	testutil.RequireRoot(t) // the target runs in a network namespace of its own
	cc := clang(t)
	dir := t.TempDir()
	bin, err := rtdbuild.BuildWith(dir, cc, "fuzz/fuzz_rtd.c", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all")
	if err != nil {
		t.Fatal(err)
	}
	corpus := filepath.Join(dir, "corpus")
	if err := os.Mkdir(corpus, 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := filepath.Join(rtdbuild.RtdDir(), "fuzz", "seeds")
	secs := fuzzTime(t)
	cmd := exec.Command(bin, "-max_total_time="+strconv.Itoa(secs), "-print_final_stats=1", "-timeout=10",
		"-rss_limit_mb=4096", "-artifact_prefix="+dir+"/", corpus, seeds)
	out, err := cmd.CombinedOutput()
	stats := regexp.MustCompile(`stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb):\s+(\d+)`).FindAllStringSubmatch(string(out), -1)
	var figs []string
	for _, m := range stats {
		figs = append(figs, m[1]+" "+m[2])
	}
	t.Logf("lanes-rtd fuzzed for %d s: %s", secs, strings.Join(figs, ", "))
	if err != nil || strings.Contains(string(out), "ERROR:") || strings.Contains(string(out), "runtime error") {
		lines := strings.Split(string(out), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		arts, _ := filepath.Glob(filepath.Join(dir, "crash-*"))
		t.Fatalf("the fuzz target failed (%v; inputs %v):\n%s", err, arts, strings.Join(lines, "\n"))
	}
}

// TestRtdCore runs the C unit tests of lanes-rtd's core (admission and its
// refusals, the deadline horizon, the shares, the pool, the destination
// table, pacing, shutdown): under ASan and UBSan with clang, else with cc.
func TestRtdCore(t *testing.T) {
	testutil.RequireRoot(t) // SO_SNDBUFFORCE on the test's control socket
	dir := t.TempDir()
	cc, extra := rtdbuild.CC(), []string{"-fwrapv"}
	if c, err := exec.LookPath("clang"); err == nil {
		cc, extra = c, []string{"-fsanitize=address,undefined", "-fno-sanitize-recover=all"}
	}
	bin, err := rtdbuild.BuildWith(dir, cc, "test/core_test.c", extra...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("rtd/test/core_test.c: %v", err)
	}
}
