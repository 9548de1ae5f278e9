// lanesd.go: lanes as a user runs it, for tests: the built binary and its
// daemon managing a link of a test's namespace.
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/client"
)

// BuildLanes builds cmd/lanes of the module at root (the repository's
// root, relative to the test's package directory) into a directory of the
// test's and returns its path.
func BuildLanes(t testing.TB, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lanes")
	goTool, err := filepath.Abs(filepath.Join(root, "scripts", "go"))
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/lanes")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build lanes: %v\n%s", err, out)
	}
	return bin
}

// StartLanesDaemon runs bin's daemon in ns managing link (with the
// interface keys ifaceKeys, e.g. "mode: shaped") and returns its API
// socket once it answers. At the test's end it is stopped with SIGTERM,
// so it removes what it installed.
func StartLanesDaemon(t testing.TB, ns *NetNS, bin, link string, ifaceKeys ...string) string {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	policy := fmt.Sprintf("interfaces:\n  - name: %s\n", link)
	for _, k := range ifaceKeys {
		policy += "    " + k + "\n"
	}
	if err := os.WriteFile(pol, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "lanes.sock")
	cmd := ns.Command(bin, "daemon", "--policy", pol, "--socket", sock)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopLanesDaemon(cmd) })
	for deadline := time.Now().Add(Patience(60 * time.Second)); ; {
		if c, err := client.Dial(sock); err == nil {
			err = c.Ping()
			c.Close()
			if err == nil {
				return sock
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not come up:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopLanesDaemon asks the daemon to stop and kills it if it has not
// within 20 s.
func stopLanesDaemon(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
