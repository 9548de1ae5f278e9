// cli_test.go: every command behaves like the Linux tools people know:
// -h prints help on stdout with rc 0, a bad flag is a usage error (rc 2),
// and no help text leaks a sentinel default.
package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func allCommands(c *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{c}
	for _, k := range c.Commands() {
		out = append(out, allCommands(k)...)
	}
	return out
}

func runCLI(args ...string) (stdout, stderr string, rc int) {
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	rc = runMain(context.Background(), e, args)
	return out.String(), errb.String(), rc
}

func TestEveryCommandHelpAndBadFlag(t *testing.T) {
	root := buildTree(&env{getenv: func(string) string { return "" }})
	n := 0
	for _, c := range allCommands(root) {
		path := strings.Fields(c.CommandPath())[1:]
		name := strings.Join(append([]string{"lanes"}, path...), " ")
		if c.DisableFlagParsing { // internal helpers take raw arguments
			continue
		}
		for _, h := range []string{"-h", "--help"} {
			out, errOut, rc := runCLI(append(append([]string{}, path...), h)...)
			if rc != 0 || !strings.Contains(out, "Usage:") || errOut != "" {
				t.Errorf("%s %s: rc %d, stdout %q, stderr %q; want help on stdout, rc 0", name, h, rc, trim(out), errOut)
			}
			if strings.Contains(out, "(default -") {
				t.Errorf("%s %s: a sentinel default leaks: %s", name, h, out)
			}
		}
		if _, errOut, rc := runCLI(append(append([]string{}, path...), "--no-such-flag")...); rc != 2 || !strings.Contains(errOut, "--help") {
			t.Errorf("%s --no-such-flag: rc %d, stderr %q; want a usage error, rc 2", name, rc, errOut)
		}
		n++
	}
	if n < 25 {
		t.Errorf("only %d commands checked", n)
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	// GNU style: flags anywhere; a usage error for a missing argument.
	if _, errOut, rc := runCLI("lab", "report", "/nonexistent", "--help"); rc != 0 {
		t.Errorf("flag after argument: rc %d (%s)", rc, errOut)
	}
	if _, _, rc := runCLI("lab", "report"); rc != 2 {
		t.Errorf("lab report without DIR: rc %d, want 2", rc)
	}
	if _, _, rc := runCLI("no-such-command"); rc != 2 {
		t.Errorf("unknown command: rc %d, want 2", rc)
	}
	if _, _, rc := runCLI("lab", "no-such"); rc != 2 {
		t.Errorf("unknown subcommand: rc %d, want 2", rc)
	}
}

func TestVersion(t *testing.T) {
	for _, a := range []string{"--version", "version"} {
		out, _, rc := runCLI(a)
		if rc != 0 || !strings.HasPrefix(out, "lanes ") {
			t.Errorf("lanes %s: rc %d, %q", a, rc, out)
		}
	}
}

func TestMoveUsage(t *testing.T) {
	for _, args := range [][]string{{"move", "123"}, {"move", "--lane", "background"}, {"move", "--lane", "background", "12", "--cgroup", "x"},
		{"move", "--lane", "nowhere", "12"}, {"move", "--lane", "background", "abc"}} {
		if _, errOut, rc := runCLI(args...); rc != 2 {
			t.Errorf("%v: rc %d (%s), want 2", args, rc, errOut)
		}
	}
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// --quick exists only where it shortens the run, and says how.
func TestQuickOnlyWhereItShortens(t *testing.T) {
	if out, _, rc := runCLI("lab", "run", "lbe", "--help"); rc != 0 || !strings.Contains(out, "--quick") || !strings.Contains(out, "2 repetitions") {
		t.Errorf("lbe --help: rc %d\n%s", rc, out)
	}
	if _, _, rc := runCLI("lab", "run", "tun-probe", "--quick"); rc != 2 {
		t.Errorf("tun-probe (short already) --quick: rc %d, want a usage error", rc)
	}
}

// Into a pipe or file the live monitor prints plain tables, no escape codes.
func TestMonitorPlainWhenNotATerminal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sock_diag of every socket needs root")
	}
	out, errOut, rc := runCLI("monitor", "--count", "3", "--interval", "20ms", "--socket", "/nonexistent/lanes.sock")
	if rc != 0 || !strings.Contains(out, "LANE") || strings.Contains(out, "\x1b") {
		t.Errorf("rc %d, stderr %q, stdout %q", rc, errOut, trim(out))
	}
}

// Client commands, the monitor included, take the socket from LANES_SOCKET.
func TestLanesSocketEnv(t *testing.T) {
	for _, args := range [][]string{{"status"}, {"monitor", "--lane", "background", "--count", "1"}} {
		var out, errb bytes.Buffer
		e := &env{stdout: &out, stderr: &errb, getenv: func(k string) string {
			if k == "LANES_SOCKET" {
				return "/nonexistent/from-env.sock"
			}
			return ""
		}}
		if rc := runMain(context.Background(), e, args); rc == 0 || !strings.Contains(errb.String(), "/nonexistent/from-env.sock") {
			t.Errorf("%v: rc %d, stderr %q", args, rc, errb.String())
		}
	}
}

// `lanes status --wait D` keeps trying a daemon that does not answer yet
// for D, then fails as plain `lanes status` does at once.
func TestStatusWaitsForDaemon(t *testing.T) {
	sock := t.TempDir() + "/lanes.sock"
	start := time.Now()
	_, errOut, rc := runCLI("status", "--socket", sock)
	if rc != 1 || !strings.Contains(errOut, "the daemon is not running: start it (systemctl start lanes); no answer at "+sock) {
		t.Fatalf("status without a daemon: rc %d, %q", rc, errOut)
	}
	alone := time.Since(start)
	start = time.Now()
	_, errOut, rc = runCLI("status", "--socket", sock, "--wait", "700ms")
	waited := time.Since(start)
	if rc != 1 || !strings.Contains(errOut, "the daemon is not running: start it (systemctl start lanes); no answer at "+sock) {
		t.Fatalf("status --wait 700ms without a daemon: rc %d, %q", rc, errOut)
	}
	if waited < 700*time.Millisecond {
		t.Errorf("status --wait 700ms gave up after %v", waited)
	}
	t.Logf("without a daemon: status failed after %v, status --wait 700ms after %v", alone, waited)
}
