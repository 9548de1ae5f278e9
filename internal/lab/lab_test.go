// lab_test.go: the testbed's tests. Integration tests run as root in fresh
// namespaces with real traffic; the slow ones are skipped with -short.
package lab

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestMain lets the test binary act as the lab's helper programs, which
// topologies start as `ip netns exec NS <this binary> lab helper ...`.
func TestMain(m *testing.M) {
	if os.Getenv("LANES_LAB_HELPER") == "1" {
		os.Exit(HelperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func testEnv(t *testing.T) *Env {
	return &Env{Out: testWriter{t}, Quick: true}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

func TestFixedLinkAccuracy(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("15 s of real traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fa, err := MeasureFixedLink(ctx, testEnv(t), 10e6, 50*time.Millisecond, 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("goodput %.3f Mbit/s (expected %.3f, %+.2f%%), RTT median %.2f ms %v, up stats %+v",
		fa.GoodputBps/1e6, fa.ExpectedBps/1e6, fa.GoodputErrPct, fa.RTTMedianMs, fa.RTTms, fa.UpStats)
	if fa.GoodputErrPct < -5 || fa.GoodputErrPct > 5 {
		t.Errorf("goodput %.3f Mbit/s not within 5%% of %.3f", fa.GoodputBps/1e6, fa.ExpectedBps/1e6)
	}
	if fa.RTTErrMs < -1 || fa.RTTErrMs > 1 {
		t.Errorf("idle RTT %.2f ms not within 1 ms of 100 ms", fa.RTTMedianMs)
	}
}

func TestTraceReplayAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("8 s real-time replay")
	}
	tr, err := emu.ParseTrace(DefaultTraceDir + "/TMobile-LTE-short.up")
	if err != nil {
		t.Skip(err)
	}
	ta, err := MeasureTrace(context.Background(), tr, 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", ta)
	if ta.ErrPct < -1 || ta.ErrPct > 1 {
		t.Errorf("delivered %d packets, trace offers %d (%+.2f%%, want within 1%%)", ta.Delivered, ta.Expected, ta.ErrPct)
	}
}
