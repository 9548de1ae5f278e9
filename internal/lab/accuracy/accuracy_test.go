// accuracy_test.go: the emulator's accuracy on a fixed link, under a long
// upload (stalls) and in trace replay (root; fresh namespaces, real traffic).
package accuracy

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
	"github.com/lanes-net/lanes/internal/lab/testbed/labtest"
	"github.com/lanes-net/lanes/internal/testutil"
)

// TestMain lets the test binary act as the lab's helper programs, which
// topologies start as `ip netns exec NS <this binary> lab helper ...`.
func TestMain(m *testing.M) {
	if os.Getenv("LANES_LAB_HELPER") == "1" {
		os.Exit(testbed.HelperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestFixedLinkAccuracy(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("15 s of real traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fa, err := MeasureFixedLink(ctx, labtest.TestEnv(t), 10e6, 50*time.Millisecond, 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("goodput %.3f Mbit/s (expected %.3f, %+.2f%%; link busy %.3f of the window, %+.2f%% of the rate over that), RTT median %.2f ms %v, up stats %+v",
		fa.GoodputBps/1e6, fa.ExpectedBps/1e6, fa.GoodputErrPct, fa.BusyFraction, fa.BusyGoodputErrPct, fa.RTTMedianMs, fa.RTTms, fa.UpStats)
	// The emulator's rate error is the goodput against the payload rate
	// over the time its serialiser had something to send: at load 28 the
	// hosts left the link idle part of the time and the goodput fell 11.7 %
	// below the rate, which is the machine's doing, not the emulator's.
	// A link that ran slow or fast fails whatever the load.
	if fa.BusyGoodputErrPct < -5 || fa.BusyGoodputErrPct > 5 {
		// A stall of the emulator (its real-time thread starved, e.g. by
		// other real-time work on the machine) fills the queue and costs
		// goodput: name it, so the failure says where to look.
		t.Errorf("goodput %.3f Mbit/s not within 5%% of %.3f x %.3f busy (emulator: %d stalls, worst %v late)",
			fa.GoodputBps/1e6, fa.ExpectedBps/1e6, fa.BusyFraction, fa.UpStats.StallEvents, fa.UpStats.MaxLate)
	}
	if fa.BusyFraction < 0.5 {
		t.Errorf("the link was busy only %.3f of the window: the bulk upload did not keep it busy", fa.BusyFraction)
	}
	// The emulator's delay accuracy is the least RTT seen: scheduling delays
	// of a loaded machine only add to single samples (the median is logged).
	if len(fa.RTTms) == 0 {
		t.Fatal("no RTT samples")
	}
	minRTT := fa.RTTms[0]
	for _, r := range fa.RTTms {
		minRTT = min(minRTT, r)
	}
	if minRTT < 99 || minRTT > 101 {
		t.Errorf("idle RTT %.2f ms (least of %d) not within 1 ms of 100 ms", minRTT, len(fa.RTTms))
	}
}

// The stall check: a 15 s upload through 20 Mbit/s, RTT 256 ms (the coop
// experiments' AP) sees no spurious RTO and at most 0.5 % of packets
// delivered emu.StallLate late. Without real-time scheduling of the emulator
// it failed on this machine at load 15 (4.6 % late, worst 154 ms); with it,
// 0–0.014 % (stalls.go).
func TestStallCheck(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("15 s of real traffic")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sc, err := MeasureStalls(ctx, labtest.TestEnv(t), 20e6, 128*time.Millisecond, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", sc)
	if !sc.RealTime {
		t.Log("the emulator ran at normal priority (real-time scheduling refused)")
	}
	if sc.SpuriousRTOs > 0 {
		t.Errorf("%d spurious retransmission timeouts", sc.SpuriousRTOs)
	}
	if f := sc.LateFraction(); f > 0.005 {
		t.Errorf("emulator stalled: %.2f%% of %d packets >= %v late (worst %v)", 100*f, sc.Packets, emu.StallLate, sc.MaxLate)
	}
	if sc.GoodputBps < 10e6 {
		t.Errorf("goodput %.2f Mbit/s: the upload hardly ran", sc.GoodputBps/1e6)
	}
}

func TestTraceReplayAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("8 s real-time replay")
	}
	tr, err := testbed.LoadTrace("TMobile-LTE-short.up")
	if err != nil {
		t.Fatal(err)
	}
	ta, err := MeasureTrace(context.Background(), tr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", ta)
	if ta.ErrPct < -1 || ta.ErrPct > 1 {
		t.Errorf("delivered %d packets, trace offers %d (%+.2f%%, want within 1%%)", ta.Delivered, ta.Expected, ta.ErrPct)
	}
	if ta.LostOpportunities != 0 {
		t.Errorf("%d opportunities passed with packets waiting", ta.LostOpportunities)
	}
}
