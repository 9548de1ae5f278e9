// A reload asked for the moment the daemon says it runs (systemd may send
// `systemctl reload` right after READY=1) reloads the policy and never ends
// the daemon: SIGHUP is caught before readiness is announced.
package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// hupOnReady is a daemon's stderr that sends it SIGHUP from the very write
// that carries "lanes daemon running".
type hupOnReady struct {
	syncBuf
	pid  int
	sent bool
}

func (h *hupOnReady) Write(p []byte) (int, error) {
	n, err := h.syncBuf.Write(p)
	if !h.sent && strings.Contains(string(p), "lanes daemon running") {
		h.sent = true
		_ = syscall.Kill(h.pid, syscall.SIGHUP)
	}
	return n, err
}

func TestReloadRightAfterReady(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	testutil.RequireRoot(t)
	p := testutil.NewVethPair(t)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(devicePolicy(p.LinkA)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"daemon", "--policy", pol, "--socket", filepath.Join(dir, "lanes.sock")}
	for round := 0; round < 3; round++ {
		cmd := p.A.Command(lanesBin, args...)
		cmd.Env = append(os.Environ(), "STATE_DIRECTORY="+stateDir(t, p.A))
		out := &hupOnReady{}
		cmd.Stderr = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out.pid = cmd.Process.Pid
		d := &proc{cmd: cmd, out: &out.syncBuf}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { // a failed round: end it, and reset what it left
			_ = cmd.Process.Kill()
			<-exited
			if !cmd.ProcessState.Success() {
				stopDaemon(t, p.A, d, args)
			}
		})
		reloaded := false
		for deadline := time.Now().Add(testutil.Patience(20 * time.Second)); !reloaded && time.Now().Before(deadline); {
			select {
			case <-exited:
				t.Fatalf("round %d: the daemon ended on a SIGHUP right after it said it runs: %v\n%s", round, cmd.ProcessState, out.String())
			case <-time.After(20 * time.Millisecond):
			}
			reloaded = strings.Contains(out.String(), "policy reloaded")
		}
		if !reloaded {
			t.Fatalf("round %d: no reload after SIGHUP:\n%s", round, out.String())
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if !cmd.ProcessState.Success() {
			t.Errorf("round %d: the daemon's stop: %v\n%s", round, cmd.ProcessState, out.String())
		}
	}
}
