// safety_test.go: the "starved at the cap" signal of the fallback to plain
// TCP, fed observations directly.
package coop

import (
	"strings"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

func TestSafetyStarvedAtCap(t *testing.T) {
	base := observation{inflation: 1.02, queueDelay: 5 * time.Millisecond, inflightLow: true, atCap: true, flows: 1, rate: 20e6}
	for _, tc := range []struct {
		name                     string
		goodput, promised, group float64
		fallback                 bool
	}{
		// 4 lanes hosts promised 5 Mbit/s each get 2: plain hosts take the rest
		{"foreign traffic", 2e6, 5e6, 8.2e6, true},
		// 16 capped hosts on a contended 802.11 medium: all alike below
		// their share, the group at the medium's real 14.5 Mbit/s
		{"medium slower than configured", 0.8e6, 1.25e6, 14.5e6, false},
		// this host below its share while its group fills the AP
		{"unfair share within the group", 2e6, 5e6, 19e6, false},
		// at its share
		{"fed", 4.9e6, 5e6, 8.2e6, false},
		// estimated rate: nothing is promised
		{"estimated rate", 2e6, 0, 8.2e6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := safety{cfg: SafetyConfig{Enabled: true, RTTInflation: 1.3, GoodputFraction: 0.7, Trigger: 3, Hold: config.Duration(10 * time.Second)}}
			o := base
			o.goodput, o.promised, o.group = tc.goodput, tc.promised, tc.group
			if tc.promised == 0 {
				o.rate = 0
			}
			now := time.Unix(1000, 0)
			ok, why := true, ""
			for i := 0; i < 3; i++ {
				ok, why = s.update(now.Add(time.Duration(i)*500*time.Millisecond), o)
			}
			if ok == tc.fallback {
				t.Fatalf("capping allowed %v (%q), want fallback %v", ok, why, tc.fallback)
			}
			if tc.fallback && !strings.Contains(why, "at the cap") {
				t.Errorf("reason %q", why)
			}
		})
	}
}
