// client_test.go: the Go client and the C header against a real lane in a
// fresh network namespace (loopback receiver).
package rtclient_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/rtclient"
	"github.com/lanes-net/lanes/internal/rtlane/rtlanetest"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestGoClient(t *testing.T) {
	testutil.RequireRoot(t)
	sock, rx := rtlanetest.Start(t)
	c, err := rtclient.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.SendWithin(1, rx.Addr, time.Second, []byte("hello"))
	if err != nil || !res.Admitted {
		t.Fatalf("send: %+v %v", res, err)
	}
	a, err := rx.Read()
	if err != nil || string(a.Payload) != "hello" || a.Kernel == 0 || a.Kernel > a.User {
		t.Fatalf("receive: %q kernel %d user %d %v", a.Payload, a.Kernel, a.User, err)
	}
	if res, _ := c.Send(1, rx.Addr, rtclient.Monotonic()-1, []byte("late")); res.Admitted || res.ReasonString() != "own-deadline-unmeetable" {
		t.Errorf("past deadline: %+v", res)
	}
	if js, err := c.Stats(); err != nil || !strings.Contains(string(js), `"admitted":1`) {
		t.Errorf("stats: %s %v", js, err)
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
