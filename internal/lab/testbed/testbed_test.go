// testbed_test.go: pure-logic tests of the testbed (statistics, results,
// registry, progress; no root needed) and the helper dispatch for the
// integration tests.
package testbed

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{1, 2, 3, 4, 5})
	if s.N != 5 || s.Mean != 3 || s.P50 != 3 || s.Min != 1 || s.Max != 5 {
		t.Errorf("summary %+v", s)
	}
	// sd = sqrt(2.5), t(4) = 2.776: CI = 2.776*1.5811/sqrt(5) = 1.963
	if math.Abs(s.CI95-1.963) > 0.005 {
		t.Errorf("CI95 %.4f, want 1.963", s.CI95)
	}
	if p := Percentile([]float64{0, 10}, 95); math.Abs(p-9.5) > 1e-9 {
		t.Errorf("p95 of {0,10} = %v", p)
	}
	if z := Summarize(nil); z.N != 0 {
		t.Errorf("empty summary %+v", z)
	}
}

func TestResultRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := &Result{Experiment: "x", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Params: map[string]any{"a": 1},
		Tables:      []Table{{Title: "T", Columns: []string{"a", "b"}, Rows: [][]string{{"1", "2"}}}},
		Environment: &Environment{Kernel: "k"}, Notes: []string{"n"}}
	out, err := WriteResult(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(out) != "x-20260102-030405" {
		t.Errorf("folder %s", out)
	}
	for _, f := range []string{"result.json", "environment.json", "results.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "results.md"))
	if !strings.Contains(string(md), "| a | b |\n| --- | --- |\n| 1 | 2 |") {
		t.Errorf("markdown:\n%s", md)
	}
	back, err := ReadResult(out)
	if err != nil || back.Tables[0].Rows[0][1] != "2" {
		t.Errorf("read back %+v %v", back, err)
	}
	out2, _ := WriteResult(dir, r)
	if out2 == out {
		t.Error("second result overwrote the first")
	}
	var b strings.Builder
	WriteText(&b, r.Tables[0])
	if b.String() != "T\na  b\n1  2\n" {
		t.Errorf("text table %q", b.String())
	}
}

func TestRegistry(t *testing.T) {
	Register(Experiment{Name: "registry-test-b"})
	Register(Experiment{Name: "registry-test-a"})
	if _, ok := Lookup("registry-test-a"); !ok {
		t.Error("registered experiment not found")
	}
	var names []string
	for _, e := range List() {
		if strings.HasPrefix(e.Name, "registry-test-") {
			names = append(names, e.Name)
		}
	}
	if strings.Join(names, " ") != "registry-test-a registry-test-b" {
		t.Errorf("List: %v, want sorted by name", names)
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	Register(Experiment{Name: "registry-test-a"})
}

func TestParamTable(t *testing.T) {
	tb := ParamTable(map[string]any{"reps": 2, "config": &struct {
		UpTrace string `json:"up_trace"`
		SizesKB []int  `json:"sizes_kb"`
	}{UpTrace: "TMobile-UMTS-driving.up", SizesKB: []int{100, 400}}})
	rows := map[string]string{}
	for _, r := range tb.Rows {
		rows[r[0]] = r[1]
	}
	if rows["reps"] != "2" || rows["config.up_trace"] != "TMobile-UMTS-driving.up" || !strings.Contains(rows["config.sizes_kb"], "100, 400") {
		t.Errorf("rows: %v", rows)
	}
}

func TestProgressETA(t *testing.T) {
	var b strings.Builder
	p := (&Env{Out: &b}).NewProgress(3)
	p.Step("first")
	p.Step("second %d", 2)
	out := b.String()
	if !strings.Contains(out, "[1/3 ") || !strings.Contains(out, "ETA after the first step] first") ||
		!strings.Contains(out, "[2/3 ") || !strings.Contains(out, "ETA ") || !strings.Contains(out, "] second 2") {
		t.Errorf("progress:\n%s", out)
	}
}

// TestEnv is labtest.TestEnv, which this package's tests cannot import.
func testEnv(t *testing.T) *Env {
	return &Env{Out: testWriter{t}, Quick: true, RealTime: emu.DefaultRealTimePriority}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// TestMain lets the test binary act as the lab's helper programs, which
// topologies start as `ip netns exec NS <this binary> lab helper ...`.
func TestMain(m *testing.M) {
	if os.Getenv("LANES_LAB_HELPER") == "1" {
		os.Exit(HelperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}
