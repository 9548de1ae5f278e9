// stalls_test.go: what the stall check reports from its counters (no root).
package accuracy

import (
	"strings"
	"testing"
	"time"
)

func TestStallCheckVerdict(t *testing.T) {
	for _, c := range []struct {
		name string
		s    StallCheck
		late float64
		fail []string // substrings, one per failure
	}{
		{"clean", StallCheck{Packets: 1000}, 0, nil},
		{"nothing delivered", StallCheck{}, 0, nil},
		{"late packets without a stall event", StallCheck{Packets: 200, LatePackets: 5}, 0.025, nil},
		{"timeouts alone are not a failure", StallCheck{Packets: 10, Timeouts: 3}, 0, nil},
		{"spurious RTO", StallCheck{Packets: 10, SpuriousRTOs: 2}, 0, []string{"2 spurious retransmission timeouts"}},
		{"stall", StallCheck{Packets: 100, LatePackets: 10, StallEvents: 1, MaxLate: 123456 * time.Microsecond}, 0.1,
			[]string{"emulator stalled 1 times (10 packets >= "}},
		{"both", StallCheck{Packets: 4, LatePackets: 1, StallEvents: 3, SpuriousRTOs: 1}, 0.25,
			[]string{"1 spurious", "stalled 3 times"}},
	} {
		if got := c.s.LateFraction(); got != c.late {
			t.Errorf("%s: LateFraction = %v, want %v", c.name, got, c.late)
		}
		f := c.s.Failures()
		if len(f) != len(c.fail) {
			t.Errorf("%s: failures %q, want %d", c.name, f, len(c.fail))
			continue
		}
		for i, want := range c.fail {
			if !strings.Contains(f[i], want) {
				t.Errorf("%s: failure %q lacks %q", c.name, f[i], want)
			}
		}
	}
	if f := (&StallCheck{StallEvents: 1, MaxLate: 123456 * time.Microsecond}).Failures(); !strings.Contains(f[0], "worst 123ms") {
		t.Errorf("worst late not rounded to ms: %q", f[0])
	}
}
