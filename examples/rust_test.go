// rust_test.go: the Rust client (clients/rust, std only) built offline by
// cargo with its unit tests, and its example application rt_echo run
// against a realtime lane with lanes-rtd in a fresh namespace as
// TestRTEcho runs rt-echo; then run as an ungranted user (nobody).
package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestRustClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a crate and runs traffic between namespaces")
	}
	testutil.RequireRoot(t)
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		t.Skip("no cargo on PATH")
	}
	dir := publicDir(t)
	src := filepath.Join(dir, "src") // a copy: cargo writes Cargo.lock beside the sources
	if out, err := exec.Command("cp", "-r", "../clients/rust", src).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(10*time.Minute))
	defer cancel()
	for _, args := range [][]string{{"test", "--offline", "--quiet"}, {"build", "--offline", "--quiet", "--release", "--example", "rt_echo"}} {
		cmd := exec.CommandContext(ctx, cargo, args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+filepath.Join(dir, "target"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cargo %v: %v\n%s", args, err, out)
		}
	}
	bin := filepath.Join(dir, "target", "release", "examples", "rt_echo")
	b := newBed(t, buildRTD(t))
	b.checkEchoApp(t, []string{bin})
	b.checkNotGranted(t, []string{bin})
	checkUnavailable(t, []string{bin})
}
