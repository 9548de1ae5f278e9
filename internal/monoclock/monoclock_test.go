package monoclock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAgreesWithClockGettime: a clock_gettime read between two Now lies
// between them, to within the calibration's uncertainty.
func TestAgreesWithClockGettime(t *testing.T) {
	for i := 0; i < 1000; i++ {
		var ts unix.Timespec
		a := Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		b := Now()
		c, u := ts.Nano(), int64(Uncertainty())
		if c < a-u || c > b+u {
			t.Fatalf("clock_gettime %d outside [%d, %d] ± %d ns", c, a, b, u)
		}
	}
}

// TestDifferencesFollowSleep: Now advances with the monotonic clock.
func TestDifferencesFollowSleep(t *testing.T) {
	a, s := Now(), time.Now()
	time.Sleep(2 * time.Millisecond)
	if d, want := Now()-a, int64(time.Since(s)); d < int64(2*time.Millisecond) || d > want+int64(time.Millisecond) {
		t.Fatalf("Now advanced %d ns over a sleep of %d ns", d, want)
	}
}

// TestNoSplitAgrees: the raw read lies between two Now.
func TestNoSplitAgrees(t *testing.T) {
	for i := 0; i < 1000; i++ {
		a, c, b := Now(), NowNoSplit(), Now()
		if u := int64(Uncertainty()); c < a-u || c > b+u {
			t.Fatalf("NowNoSplit %d outside [%d, %d] ± %d ns", c, a, b, u)
		}
	}
}

func BenchmarkNowNoSplit(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_ = NowNoSplit()
	}
}

func BenchmarkNow(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_ = Now()
	}
}

func BenchmarkClockGettime(b *testing.B) {
	var ts unix.Timespec
	for i := 0; i < b.N; i++ {
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	}
}
