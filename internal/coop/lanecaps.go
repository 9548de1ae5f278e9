// lanecaps.go: the lanes' default upload caps, the cwnd cap a new
// connection of a lane gets at establishment until the next sample gives
// it its own (controller.go, laneCaps).
package coop

import (
	"fmt"

	"github.com/lanes-net/lanes/internal/lane"
)

// laneDefaults are the lanes' caps applied and their setter (nil: none
// applied). Fields under the controller's mu.
type laneDefaults struct {
	set     UplinkSetter
	applied map[lane.Lane]uint32
}

// pending returns the lanes' caps that differ from those applied.
func (l *laneDefaults) pending(caps map[lane.Lane]uint32) map[lane.Lane]uint32 {
	todo := map[lane.Lane]uint32{}
	for ln, v := range caps {
		if l.applied[ln] != v {
			todo[ln] = v
		}
	}
	return todo
}

// push applies caps (outside mu: it may block) and returns those applied.
func (l *laneDefaults) push(todo map[lane.Lane]uint32) (map[lane.Lane]uint32, []error) {
	var errs []error
	done := map[lane.Lane]uint32{}
	for ln, v := range todo {
		if err := l.set.SetLaneCwndCap(ln, v); err != nil {
			errs = append(errs, fmt.Errorf("lane %s: %w", ln, err))
			continue
		}
		done[ln] = v
	}
	return done, errs
}

// shutdown removes every lane's cap.
func (l *laneDefaults) shutdown() []error {
	var errs []error
	if l.set != nil {
		for ln, v := range l.applied {
			if v != 0 {
				errs = append(errs, l.set.SetLaneCwndCap(ln, 0))
			}
		}
	}
	l.applied = map[lane.Lane]uint32{}
	return errs
}
