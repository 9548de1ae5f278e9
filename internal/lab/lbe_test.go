// lbe_test.go: a short lbe run that checks the ordering the paper shows.
package lab

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/testutil"
)

// TestLBEDebug prints a one-repetition table (manual: LANES_LAB_DEBUG=1).
func TestLBEDebug(t *testing.T) {
	testutil.RequireRoot(t)
	if os.Getenv("LANES_LAB_DEBUG") == "" {
		t.Skip("manual")
	}
	c := &LBEConfig{}
	c.UpTrace = DefaultTraceDir + "/TMobile-UMTS-driving.up"
	c.DownTrace = DefaultTraceDir + "/TMobile-UMTS-driving.down"
	c.Delay, c.DownQueuePackets, c.Warmup, c.Pause, c.CC = 50*time.Millisecond, 100, 5*time.Second, 300*time.Millisecond, "cubic"
	if err := parseLBE(c, LBEMethods, os.Getenv("LANES_LAB_METHODS"), "100", "upload,download", 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	trials, envs, err := RunLBE(ctx, testEnv(t), c)
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
