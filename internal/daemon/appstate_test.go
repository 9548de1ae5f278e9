// appstate_test.go: the uid entries the android rules give the uids'
// states: apps only unless a rule names a uid, a uid rule first.
package daemon

import (
	"testing"

	"github.com/lanes-net/lanes/internal/appstate"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
)

func TestAppStatesToUIDEntries(t *testing.T) {
	pol, err := policy.Parse("a.yaml", []byte(`rules:
  - {lane: background, android: background}
  - {lane: interactive, android: top-app}
  - {lane: background, android: background, uid: 1013}
  - {lane: realtime, uid: 10200}
`))
	if err != nil {
		t.Fatal(err)
	}
	ks := &kernelState{appStates: map[uint32]appstate.State{
		10123:  appstate.Background, // an app in background
		110123: appstate.Background, // the same app of the second user
		10124:  appstate.TopApp,
		10125:  appstate.Foreground, // no foreground rule
		1000:   appstate.Background, // system: no rule names it
		1013:   appstate.Background, // system, named by a rule
		10200:  appstate.Background, // a uid rule decides
	}}
	w := newDesired()
	w.UIDs[10200] = entry{lane.Realtime, "policy:rules[3]"}
	ks.addAppStates(pol, w)
	want := map[uint32]lane.Lane{10123: lane.Background, 110123: lane.Background, 10124: lane.Interactive,
		1013: lane.Background, 10200: lane.Realtime}
	if len(w.UIDs) != len(want) {
		t.Errorf("uid entries %v, want %v", w.UIDs, want)
	}
	for uid, l := range want {
		if w.UIDs[uid].Lane != l {
			t.Errorf("uid %d: %v (%s), want %v", uid, w.UIDs[uid].Lane, w.UIDs[uid].Source, l)
		}
	}
}
