// account_rates_test.go: the account's lane rates and download estimate
// between status calls.
package daemon

import (
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
)

// TestAccountRates: the lanes' rates are over the interval since the last
// sample, calls closer than rateMinInterval reuse them, and the download
// estimate is the largest arrival rate, halved every 10 s.
func TestAccountRates(t *testing.T) {
	var r accountRates
	t0 := time.Unix(1000, 0)
	bg := func(b uint64) map[lane.Lane]datapath.LaneStats {
		return map[lane.Lane]datapath.LaneStats{lane.Background: {Bytes: b}}
	}
	if up, down := r.observe(1, t0, bg(0), 0, true); up != nil || down != 0 {
		t.Fatalf("first sample: %v, %d; want no rates", up, down)
	}
	up, down := r.observe(1, t0.Add(time.Second), bg(1_250_000), 2_500_000, true)
	if up[lane.Background] != 10_000_000 || up[lane.Interactive] != 0 || down != 20_000_000 {
		t.Errorf("after 1 s: %v, down %d; want background 10 Mbit/s, down 20 Mbit/s", up, down)
	}
	if up, _ = r.observe(1, t0.Add(1200*time.Millisecond), bg(9_999_999), 2_500_000, true); up[lane.Background] != 10_000_000 {
		t.Errorf("0.2 s later: background %d, want the last interval's 10 Mbit/s", up[lane.Background])
	}
	up, down = r.observe(1, t0.Add(11*time.Second), bg(1_250_000), 2_500_000, true)
	if up[lane.Background] != 0 || down != 10_000_000 {
		t.Errorf("10 s idle: %v, down %d; want 0, the estimate halved to 10 Mbit/s", up, down)
	}
	if _, down = r.observe(2, t0, nil, 0, false); down != 0 {
		t.Errorf("another interface: down %d, want its own (0)", down)
	}
}
