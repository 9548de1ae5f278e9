package testutil

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// logRecorder is a testing.TB that keeps what Logf was given.
type logRecorder struct {
	testing.TB
	logs atomic.Int32
}

func (r *logRecorder) Logf(string, ...any) { r.logs.Add(1) }

func TestWatchdogFiresOnlyOnHang(t *testing.T) {
	quick := &logRecorder{TB: t}
	stop := Watchdog(quick, time.Hour, "quick", func() string { return "" })
	stop()
	stop() // twice is harmless
	if n := quick.logs.Load(); n != 0 {
		t.Errorf("a stopped watchdog logged %d times", n)
	}

	hung := &logRecorder{TB: t}
	var took atomic.Int32
	stop = Watchdog(hung, time.Millisecond, "hung", func() string { took.Add(1); return "state" })
	time.Sleep(50 * time.Millisecond)
	stop()
	if took.Load() != 1 || hung.logs.Load() != 1 {
		t.Errorf("a fired watchdog took %d snapshots and logged %d times; want 1 and 1", took.Load(), hung.logs.Load())
	}
}

func TestPathSnapshot(t *testing.T) {
	RequireRoot(t)
	p := NewRoutedPath(t)
	s := p.Snapshot()
	for _, want := range []string{"== R: ip -s neigh show", "== A: tc -s qdisc show", "== B: ss -tinoem"} {
		if !strings.Contains(s, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, s)
		}
	}
}
