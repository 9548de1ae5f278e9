// downestimate_test.go checks the download estimate's rule on readings
// given to it: the largest rate between two readings, halved every 10 s,
// a failed reading starting a new interval.
package datapath

import (
	"testing"
	"time"
)

func TestDownEstimate(t *testing.T) {
	var d DownEstimate
	t0 := time.Unix(1000, 0)
	if got := d.Add(t0, 0); got != 0 {
		t.Fatalf("one reading: %d bit/s, want 0", got)
	}
	if got := d.Add(t0.Add(time.Second), 2_500_000); got != 20_000_000 {
		t.Errorf("2.5 MB in 1 s: %d bit/s, want 20 Mbit/s", got)
	}
	if got := d.Add(t0.Add(2*time.Second), 3_750_000); got != 20_000_000 {
		t.Errorf("a slower second: %d bit/s, want the largest, 20 Mbit/s", got)
	}
	if got := d.At(t0.Add(21 * time.Second)); got != 5_000_000 {
		t.Errorf("20 s after the largest: %d bit/s, want it halved twice (5 Mbit/s)", got)
	}
	d.Miss()
	if got := d.Add(t0.Add(22*time.Second), 100_000_000); got != 5_000_000 {
		t.Errorf("a reading after a failed one: %d bit/s, want no new interval (5 Mbit/s)", got)
	}
	if got := d.At(t0); got != 20_000_000 {
		t.Errorf("before the largest: %d bit/s, want it undecayed", got)
	}
}
