// daemon_test.go: `lanes daemon`'s help and man page list only what an
// admin uses; the lab's switches (internal/experiments) are hidden flags
// that still parse.
package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/daemon"
	"github.com/lanes-net/lanes/internal/experiments"
)

func TestDaemonHelpWithoutExperiments(t *testing.T) {
	out, _, rc := runCLI("daemon", "--help")
	if rc != 0 {
		t.Fatalf("daemon --help: rc %d", rc)
	}
	// roff writes a flag's hyphens as \-
	page := strings.ReplaceAll(readPage(t, filepath.Join(genManPages(t), "man1", "lanes-daemon.1")), `\-`, "-")
	if !strings.Contains(page, "--without") {
		t.Fatal("lanes-daemon(1) lacks --without: the page is not read as written")
	}
	for _, n := range experiments.Names {
		if strings.Contains(out, "--"+n) {
			t.Errorf("daemon --help lists the experiment --%s", n)
		}
		if strings.Contains(page, n) {
			t.Errorf("lanes-daemon(1) lists the experiment --%s", n)
		}
	}
}

func TestDaemonExperimentsParse(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	if _, errOut, rc := runCLI("daemon", "--check", "--socket", sock, "--share-rule-off", "nosuch"); rc != 2 ||
		!strings.Contains(errOut, `"nosuch"`) {
		t.Errorf("--share-rule-off nosuch: rc %d, stderr %q; want a usage error naming it", rc, errOut)
	}
	out, errOut, rc := runCLI("daemon", "--check", "--socket", sock, "--untold-held", "--share-rule-off", "slope",
		"--bg-udp-rule-off", "all", "--bg-udp-keep-tokens", "--struct-ops-by-update", "--allow-non-root-policy")
	if rc != 0 || !strings.Contains(out, ": ok") {
		t.Errorf("every experiment with --check: rc %d, stdout %q, stderr %q; want the policy ok", rc, out, errOut)
	}
}

// TestDaemonWithoutRefusesUnknown: --without takes the capabilities'
// table and rledbat_daemon, lists them in its help, and refuses others.
func TestDaemonWithoutRefusesUnknown(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	if _, errOut, rc := runCLI("daemon", "--check", "--socket", sock, "--without", "nosuch"); rc != 2 ||
		!strings.Contains(errOut, `"nosuch"`) {
		t.Errorf("--without nosuch: rc %d, stderr %q; want a usage error naming it", rc, errOut)
	}
	out, _, _ := runCLI("daemon", "--help")
	for _, n := range daemon.WithoutNames() {
		if !strings.Contains(out, n+": ") {
			t.Errorf("daemon --help: --without lacks %s", n)
		}
		if _, errOut, rc := runCLI("daemon", "--check", "--socket", sock, "--without", n); rc != 0 {
			t.Errorf("--without %s: rc %d, stderr %q", n, rc, errOut)
		}
	}
}
