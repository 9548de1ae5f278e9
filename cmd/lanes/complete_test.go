// Tests of shell completion as the completion scripts ask for it
// (`lanes __complete ARGS... WORD`): lane names for --lane, lists for
// comma-separated flags, files by extension for a policy.
package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func complete(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if rc := runMain(context.Background(), e, append([]string{"__complete"}, args...)); rc != 0 {
		t.Fatalf("__complete %q: rc %d: %s", args, rc, errb.String())
	}
	var vals []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		name, _, _ := strings.Cut(l, "\t")
		vals = append(vals, name)
	}
	return vals
}

func TestCompleteFlagValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the values, then the directive cobra's scripts read
	}{
		{[]string{"run", "--lane", ""}, "realtime interactive background :4"},
		{[]string{"move", "--lane", ""}, "realtime interactive background :4"},
		{[]string{"register", "--lane", ""}, "realtime interactive background :4"},
		{[]string{"monitor", "--lane", "background,"}, "background,realtime background,interactive :6"},
		{[]string{"daemon", "--log-level", ""}, "debug info warn error :4"},
		{[]string{"daemon", "--policy", ""}, "yaml yml :8"},
		{[]string{"latency", "--policy", ""}, "other fifo rr idle keep :4"},
	} {
		if got := strings.Join(complete(t, tc.args...), " "); got != tc.want {
			t.Errorf("lanes %s<TAB>: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}
