//go:build !nolab

// lab_test.go: `lanes lab` command handling (no root: list, report, usage).
package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

func TestLabCommand(t *testing.T) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb}
	if code := runMain(context.Background(), e, []string{"lab", "list"}); code != 0 {
		t.Fatalf("lab list: exit %d: %s", code, errb.String())
	}
	for _, name := range []string{"lbe", "lbe-overhead", "lbe-feedback", "accuracy"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("lab list lacks %s:\n%s", name, out.String())
		}
	}
	if code := runMain(context.Background(), e, []string{"lab", "run", "no-such"}); code != 2 {
		t.Errorf("unknown experiment: exit %d, want 2", code)
	}
	dir, err := testbed.WriteResult(t.TempDir(), &testbed.Result{Experiment: "x", Started: time.Now(),
		Tables: []testbed.Table{{Title: "T", Columns: []string{"a"}, Rows: [][]string{{"42"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := runMain(context.Background(), e, []string{"lab", "report", dir}); code != 0 || !strings.Contains(out.String(), "42") {
		t.Errorf("lab report: exit %d, output %q", code, out.String())
	}
}
