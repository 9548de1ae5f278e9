// pace_test.go: the per-uid pacing of ungranted clients' requests.
package rtlane

import (
	"testing"
	"time"
)

// TestUIDPacer: a burst of paceBurst at once, then one request per 1/rate;
// uids apart; full buckets forgotten; 0 is not paced.
func TestUIDPacer(t *testing.T) {
	p := newUIDPacer(1000) // 1 ms per request
	now := time.Unix(100, 0)
	for i := range paceBurst {
		if d := p.delay(5, now); d != 0 {
			t.Fatalf("request %d of the burst waits %v", i, d)
		}
	}
	if d := p.delay(5, now); d != time.Millisecond {
		t.Errorf("past the burst: wait %v, want 1ms", d)
	}
	if d := p.delay(5, now); d != 2*time.Millisecond {
		t.Errorf("the next: wait %v, want 2ms", d)
	}
	if d := p.delay(6, now); d != 0 {
		t.Errorf("another uid waits %v", d)
	}
	later := now.Add(time.Second)
	if d := p.delay(5, later); d != 0 {
		t.Errorf("a second later: wait %v", d)
	}
	p.prune(later.Add(time.Second))
	if len(p.tat) != 0 {
		t.Errorf("%d uids kept with full buckets", len(p.tat))
	}
	if d := newUIDPacer(0).delay(5, now); d != 0 {
		t.Errorf("not paced (0) waits %v", d)
	}
}
