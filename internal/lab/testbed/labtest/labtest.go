// Package labtest holds what the lab's test packages share: an Env that
// logs to the test and a lanes binary with the daemon.
package labtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// TestEnv is a quick run's Env that logs to the test.
func TestEnv(t *testing.T) *testbed.Env {
	return &testbed.Env{Out: testWriter{t}, Quick: true, RealTime: emu.DefaultRealTimePriority}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// LanesBinary returns a lanes binary with the daemon: $LANES_BIN, or one
// built from this tree.
func LanesBinary(t *testing.T) string {
	if b := os.Getenv("LANES_BIN"); b != "" {
		return b
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the lanes binary (set LANES_BIN)")
	}
	out := filepath.Join(t.TempDir(), "lanes")
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/lanes-net/lanes/cmd/lanes")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build lanes: %v\n%s", err, b)
	}
	return out
}
