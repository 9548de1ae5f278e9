// realtimeoff_test.go: status says when the realtime lane is off and which
// policy key turns it on.
package daemon

import (
	"strings"
	"testing"
)

// TestStatusSaysRealtimeLaneOff: with the realtime lane off (the default
// policy, laptop.yaml), `lanes status` listed coop and tasks but never
// said the realtime lane was off, so a client's refusal was the only sign.
func TestStatusSaysRealtimeLaneOff(t *testing.T) {
	for _, c := range []struct{ yaml, why string }{
		{"interfaces: [{name: eth0}]\n", "no realtime section in the policy"},
		{"interfaces: [{name: eth0}]\nrealtime: {enabled: false}\n", "realtime.enabled is false in the policy"},
	} {
		f := newFixture(t, c.yaml, "eth0")
		st, err := f.d.handlers.Status()
		if err != nil {
			t.Fatal(err)
		}
		line := st.Components["realtime"]
		if !strings.Contains(line, c.why) || !strings.Contains(line, "set realtime.enabled: true") {
			t.Errorf("policy %q: status's realtime line %q, want %q and the key that turns it on", c.yaml, line, c.why)
		}
	}
}
