// lbe_test.go: a short lbe run that checks the ordering the paper shows.
package lbe

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/procstat"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestLBEDebug prints a one-repetition table (manual: LANES_LAB_DEBUG=1).
func TestLBEDebug(t *testing.T) {
	testutil.RequireRoot(t)
	if os.Getenv("LANES_LAB_DEBUG") == "" {
		t.Skip("manual")
	}
	c := &LBEConfig{}
	c.UpTrace = "TMobile-UMTS-driving.up"
	c.DownTrace = "TMobile-UMTS-driving.down"
	c.Delay, c.DownQueuePackets, c.Warmup, c.Pause, c.CC = 50*time.Millisecond, 100, 5*time.Second, 300*time.Millisecond, "cubic"
	if err := parseLBE(c, LBEMethods, os.Getenv("LANES_LAB_METHODS"), "100", "upload,download", 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	trials, envs, err := RunLBE(ctx, labtest.TestEnv(t), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trials {
		t.Logf("%+v", tr)
	}
	for id, e := range envs {
		t.Logf("method %s: %s\n%s", id, e.Extra["uplink_stats"], e.Nodes["phone"].Qdiscs)
	}
}

// TestLBEOrdering: with a background upload running, a 100 KB foreground
// upload takes longer without LBE (method 2) than with lanes' background
// lane (method 4) or the task-based prioritiser (method 3).
func TestLBEOrdering(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("about a minute of emulated W-CDMA")
	}
	c := &LBEConfig{UpTrace: "TMobile-UMTS-driving.up", DownTrace: "TMobile-UMTS-driving.down",
		Delay: 50 * time.Millisecond, DownQueuePackets: 100, Warmup: 4 * time.Second, Pause: 300 * time.Millisecond, CC: "cubic", Seed: 3}
	c.Lanes = labtest.LanesBinary(t)
	if err := parseLBE(c, LBEMethods, "2,3,4", "100", "upload", 2); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	trials, _, err := RunLBE(ctx, labtest.TestEnv(t), c)
	if err != nil {
		t.Fatal(err)
	}
	mean := map[string]float64{}
	for _, cell := range SummarizeLBE(trials) {
		if cell.Errors > 0 {
			t.Errorf("method %s: %d failed transfers", cell.Method, cell.Errors)
		}
		mean[cell.Method] = cell.Time.Mean
		t.Logf("method %s: upload 100 KB %.2f s (n=%d)", cell.Method, cell.Time.Mean, cell.Time.N)
	}
	if len(c.Failed) > 0 {
		t.Fatalf("methods failed to start: %v", c.Failed)
	}
	for _, id := range []string{"2", "3", "4"} {
		if mean[id] == 0 {
			t.Fatalf("no measurement for method %s", id)
		}
	}
	if !(mean["2"] > 1.2*mean["4"]) {
		t.Errorf("method 2 (no LBE) %.2f s should be clearly slower than method 4 (lanes) %.2f s", mean["2"], mean["4"])
	}
	if !(mean["2"] > 1.2*mean["3"]) {
		t.Errorf("method 2 (no LBE) %.2f s should be clearly slower than method 3 (task-based) %.2f s", mean["2"], mean["3"])
	}
}

// TestCLISignalCleanup: SIGTERM to `lanes lab run` removes every namespace
// and process the run made.
func TestCLISignalCleanup(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds the lanes binary")
	}
	bin := labtest.LanesBinary(t)
	cmd := exec.Command(bin, "lab", "run", "lbe", "--methods", "2", "--up-trace", "", "--down-trace", "",
		"--up-rate", "1000000", "--down-rate", "2000000", "--warmup", "60s", "--reps", "1", "--results", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	prefix := "lanes-lab-" + strconv.Itoa(pid) + "-"
	children := func() []int {
		var out []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if st, err := procstat.Read(p); err == nil && st.PPID == pid {
				out = append(out, p)
			}
		}
		return out
	}
	var spaces []string
	var kids []int
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && (len(spaces) < 3 || len(kids) < 3) {
		time.Sleep(200 * time.Millisecond)
		spaces = nil
		ents, _ := os.ReadDir("/var/run/netns")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				spaces = append(spaces, e.Name())
			}
		}
		kids = children()
	}
	if len(spaces) < 3 || len(kids) < 3 {
		cmd.Process.Kill()
		t.Fatalf("run not up: namespaces %v, children %v", spaces, kids)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("lanes lab run did not exit within 20 s of SIGTERM")
	}
	for _, s := range spaces {
		if _, err := os.Stat("/var/run/netns/" + s); err == nil {
			t.Errorf("namespace %s left behind", s)
		}
	}
	for _, k := range kids {
		if st, err := procstat.Read(k); err == nil && st.State != 'Z' {
			t.Errorf("process %d left running: %+v", k, st)
		}
	}
}
