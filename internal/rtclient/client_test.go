// client_test.go: the yield's rate, and the C header's example against a
// real lane in a fresh network namespace (loopback receiver). The client
// itself is tested in package rt.
package rtclient

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/rtlane/rtlanetest"
	"github.com/lanes-net/lanes/internal/schedtick"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestTickStale: a send yields at most once per schedtick.Every.
func TestTickStale(t *testing.T) {
	var c Client
	if !c.tickStale() {
		t.Fatal("the first send does not yield")
	}
	if c.tickStale() {
		t.Fatal("a second send at once yields again")
	}
	c.ticked.Add(-int64(schedtick.Every))
	if !c.tickStale() {
		t.Fatal("no yield schedtick.Every after the last")
	}
}

// TestCExample compiles include/lanes_rt.h's example with the C compiler
// found on PATH and runs it against the lane.
func TestCExample(t *testing.T) {
	testutil.RequireRoot(t)
	cc := ""
	for _, c := range []string{"cc", "gcc", "clang"} {
		if _, err := exec.LookPath(c); err == nil {
			cc = c
			break
		}
	}
	if cc == "" {
		t.Skip("no C compiler on PATH")
	}
	bin := filepath.Join(t.TempDir(), "rt_send")
	out, err := exec.Command(cc, "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_DEFAULT_SOURCE",
		"-I", "../../include", "testdata/rt_send.c", "-o", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
	sock, rx := rtlanetest.Start(t)
	out, err = exec.Command(bin, sock, "127.0.0.1", strings.TrimPrefix(rx.Addr.String(), "127.0.0.1:"), "5").CombinedOutput()
	if err != nil {
		t.Fatalf("rt_send: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 6 || strings.Count(string(out), " admitted ") != 5 || !strings.Contains(lines[5], "refused own-deadline-unmeetable") {
		t.Fatalf("rt_send output:\n%s", out)
	}
	for i := 0; i < 5; i++ {
		a, err := rx.Read()
		if err != nil || !strings.HasPrefix(string(a.Payload), "c-example ") {
			t.Fatalf("arrival %d: %q %v", i, a.Payload, err)
		}
	}
	_ = os.Remove(bin)
}
