package yield

import (
	"testing"
	"time"
)

// TestPartHarms: a foreground's delay over the threshold is harm where the
// background's part puts it over, and not where the foreground (or the
// link) made the queue; unknown parts hold as the rule without them.
func TestPartHarms(t *testing.T) {
	const now = uint64(10 * time.Second)
	fresh := now - uint64(10*time.Millisecond)
	fgRate := uint64(5e6 / 8) // a foreground delivering 5 Mbit/s
	seg := int64(1448)
	for _, c := range []struct {
		name string
		part Part
		qd   time.Duration
		rate uint64
		want bool
	}{
		{"fixed link: sharing at 19 segments beyond the hold, 12 ms", Part{Bytes: 19 * seg, At: fresh}, 12 * time.Millisecond, uint64(4e6 / 8), true},
		{"trace: held at the hold's window, the foreground's own 30 ms", Part{Bytes: 0, At: fresh}, 30 * time.Millisecond, fgRate, false},
		{"trace: 5 segments beyond the hold (11 ms) under a 30 ms queue", Part{Bytes: 5 * seg, At: fresh}, 30 * time.Millisecond, fgRate, false},
		{"trace: 5 segments beyond the hold (11 ms) under a 20 ms queue", Part{Bytes: 5 * seg, At: fresh}, 20 * time.Millisecond, fgRate, true},
		{"no background TCP socket counted within the hold", Part{Bytes: 0, At: now - uint64(time.Second)}, 30 * time.Millisecond, fgRate, true},
		{"never counted", Part{}, 30 * time.Millisecond, fgRate, true},
		{"no foreground rate yet", Part{Bytes: 0, At: fresh}, 30 * time.Millisecond, 0, true},
		{"a part below zero (a race) reads none", Part{Bytes: -seg, At: fresh}, 30 * time.Millisecond, fgRate, false},
	} {
		if got := c.part.Harms(c.qd, c.rate, now); got != c.want {
			t.Errorf("%s: Harms = %v, want %v (relief %v)", c.name, got, c.want, c.part.Relief(c.rate))
		}
	}
}
