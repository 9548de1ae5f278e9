// fakeable_test.go: the checker warns of realtime and fifo grants any user
// can claim.
package policy

import (
	"strings"
	"testing"
)

// TestFakeableGrantsWarned (audit N22): under dscp.ef_realtime all 300 of
// nobody's EF datagrams went realtime, and nobody's /bin/sleep renamed to
// pipewire matched the docs' `comm: pipewire -> fifo 20, lane realtime`;
// the checker warned of neither. Fix: a warning for each grant of
// realtime or fifo/rr that matches only by DSCP, comm, a base-name exe,
// cmdline or parent.
func TestFakeableGrantsWarned(t *testing.T) {
	for _, c := range []struct {
		yaml, warn string
	}{
		{"dscp:\n  ef_realtime: true\n", "dscp.ef_realtime"},
		{"tasks:\n  - {name: audio, comm: pipewire, policy: fifo, priority: 20, lane: realtime}\n", "tasks[0]"},
		{"rules:\n  - {name: voice, lane: realtime, dscp: 46}\n", "rules[0]"},
		{"rules:\n  - {name: game, lane: realtime, comm: game}\n", "rules[0]"},
		{"tasks:\n  - {name: audio, exe: pipewire, policy: rr, priority: 20}\n", "tasks[0]"},
		{"tasks:\n  - {name: audio, exe: /usr/bin/pipewire, uid: 1000, policy: fifo, priority: 20, lane: realtime}\n", ""},
		{"tasks:\n  - {name: audio, comm: pipewire, uid: 1000, policy: fifo, priority: 20}\n", ""},
		{"tasks:\n  - {name: rec, comm: recorder, policy: batch, lane: background}\n", ""},
	} {
		p, err := Parse("test.yaml", []byte("interfaces: [{name: eth0}]\n"+c.yaml))
		if err != nil {
			t.Fatalf("%s: %v", c.yaml, err)
		}
		got := p.FakeableGrants()
		switch {
		case c.warn == "" && got != nil:
			t.Errorf("%s: warned %v, want nothing", c.yaml, got)
		case c.warn != "" && (got == nil || !strings.Contains(got.Error(), c.warn)):
			t.Errorf("%s: warned %v, want a warning at %s", c.yaml, got, c.warn)
		}
	}
}
