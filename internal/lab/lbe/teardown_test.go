// teardown_test.go: a run's namespaces and helper processes disappear when
// its context ends (root).
package lbe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/procstat"
	"github.com/lanes-net/lanes/internal/testutil"
)

func nsExists(name string) bool {
	_, err := os.Stat("/var/run/netns/" + name)
	return err == nil
}

// TestSetupTeardown: a run's namespaces and processes disappear when its
// context is cancelled (what Ctrl-C/SIGTERM do to `lanes lab run`).
func TestSetupTeardown(t *testing.T) {
	testutil.RequireRoot(t)
	c := &LBEConfig{UpRate: 2e6, DownRate: 4e6, Delay: 10 * time.Millisecond, DownQueuePackets: 100,
		Warmup: 30 * time.Second, CC: "cubic", Reps: 1, SizesKB: []int{10}, Dirs: []string{"upload"},
		Methods: []LBEMethod{LBEMethods[1]}}
	ctx, cancel := context.WithCancel(context.Background())
	var seen []string
	var pids []int
	done := make(chan error, 1)
	go func() { _, _, err := RunLBE(ctx, labtest.TestEnv(t), c); done <- err }()
	// Wait until the testbed is up with its background uploader running.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(pids) < 3 {
		seen, pids = nil, nil
		ents, _ := os.ReadDir("/var/run/netns")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), topo.NSPrefix+strconv.Itoa(os.Getpid())+"-") {
				seen = append(seen, e.Name())
			}
		}
		pids = helperPids(t)
		time.Sleep(200 * time.Millisecond)
	}
	if len(seen) != 3 || len(pids) < 3 {
		cancel()
		t.Fatalf("testbed not up: namespaces %v, helper pids %v", seen, pids)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run ended with %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop within 20 s of cancellation")
	}
	for _, n := range seen {
		if nsExists(n) {
			t.Errorf("namespace %s left behind", n)
		}
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			if st, _ := procstat.Read(p); st.State != 'Z' {
				t.Errorf("helper process %d left running", p)
			}
		}
	}
}

// helperPids lists this test binary's helper children (LANES_LAB_HELPER=1).
func helperPids(t *testing.T) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	me := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(b, []byte("LANES_LAB_HELPER=1")) {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PPID == me {
			out = append(out, pid)
		}
	}
	return out
}
