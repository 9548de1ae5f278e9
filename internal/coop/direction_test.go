// Tests of one direction's own rules: when the group counts as changed
// (the uplink forgives a peer lost to silence, the downlink nothing), the
// setter's switch, and the caps still to apply.
package coop

import (
	"errors"
	"testing"
	"time"

	"github.com/lanes-net/lanes/internal/config"
)

func hostsOf(ids ...uint64) []HostLoad {
	var hs []HostLoad
	for _, id := range ids {
		hs = append(hs, HostLoad{ID: id, Flows: []FlowLoad{{}}})
	}
	return hs
}

func TestDirectionGroupChanged(t *testing.T) {
	now := t0
	silent := map[uint64]time.Time{3: now} // peer 3 removed for silence just now
	for _, c := range []struct {
		name    string
		before  []HostLoad
		after   []HostLoad
		expired map[uint64]time.Time
		want    bool
	}{
		{"the first group", nil, hostsOf(1, 2), nil, true},
		{"the same group", hostsOf(1, 2), hostsOf(1, 2), nil, false},
		{"a host joins", hostsOf(1, 2), hostsOf(1, 2, 3), silent, true},
		{"a peer lost to silence, uplink", hostsOf(1, 2, 3), hostsOf(1, 2), silent, false},
		{"a peer lost to silence, downlink", hostsOf(1, 2, 3), hostsOf(1, 2), nil, true},
		{"a peer that left", hostsOf(1, 2, 4), hostsOf(1, 2), silent, true},
		{"a peer lost to silence long ago", hostsOf(1, 2, 3), hostsOf(1, 2), map[uint64]time.Time{3: now.Add(-time.Second)}, true},
	} {
		var d direction
		if c.before != nil {
			d.groupChanged(c.before, true, now, nil)
		}
		if got := d.groupChanged(c.after, true, now, c.expired); got != c.want {
			t.Errorf("%s: changed %v, want %v", c.name, got, c.want)
		}
	}
}

// refusingCaps is a downlink datapath that cannot turn its callback on.
type refusingCaps struct{ switched []bool }

func (r *refusingCaps) SetDownlinkCaps(on bool) error {
	r.switched = append(r.switched, on)
	if on {
		return errors.New("kernel too old")
	}
	return nil
}
func (r *refusingCaps) SetSocketRwndCap(uint64, uint32) error { return nil }

func TestDirectionSwitch(t *testing.T) {
	cfg := config.DefaultCoop()
	rc := &refusingCaps{}
	up, down := newDirections(Options{Config: cfg, Up: newFakeCaps(), Down: rc})
	if !up.wantsSwitch() || up.switchEarly(true) != nil || !up.on {
		t.Errorf("uplink: the switch is a no-op that is on at once (on %v)", up.on)
	}
	if err := down.switchEarly(true); err == nil || down.refused != "kernel too old" || down.wantsSwitch() {
		t.Errorf("downlink refused: err %v, refused %q, wants the switch again %v", err, down.refused, down.wantsSwitch())
	}
	if errs := down.shutdown(); len(errs) != 0 || len(rc.switched) != 1 {
		t.Errorf("shutdown of a refused direction: errs %v, switched %v (never on, never off)", errs, rc.switched)
	}
	cfg.DownlinkCaps = false
	if _, down = newDirections(Options{Config: cfg, Down: rc}); down.wantsSwitch() {
		t.Error("downlink_caps false: the switch is wanted")
	}
}

func TestDirectionPending(t *testing.T) {
	d := direction{applied: map[uint64]uint32{1: 10, 2: 20}}
	got := d.pending(map[uint64]uint32{1: 10, 2: 21, 3: 0, 4: 5})
	if len(got) != 2 || got[2] != 21 || got[4] != 5 {
		t.Errorf("pending %v, want the changed cap of 2 and the new cap of 4 (an unknown socket's 0 is no change)", got)
	}
}
