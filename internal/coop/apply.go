// apply.go: the cap applier: a round's plan reaches the sockets, each
// direction's caps through its setter (switched on once its estimate
// allows), and the lanes' caps for new connections. The setters may block,
// so it pushes outside the lock and takes it only to read what is pending
// and record what was done.
package coop

import (
	"errors"
	"fmt"
	"sync"

	"github.com/lanes-net/lanes/internal/lane"
)

// capApplier pushes caps to the datapath. It shares the Controller's mu,
// which guards the directions, the lanes' defaults, the flows it reads
// and the counters and status it writes.
type capApplier struct {
	mu       *sync.Mutex
	up, down *direction
	lanes    *laneDefaults
	flows    map[uint64]*flowState // live flows: a cap applied to a gone one is not recorded
	cnt      *Counters
	st       *Status
}

// apply pushes changed caps to the datapath (outside mu: it may block).
func (a *capApplier) apply(p capPlan) {
	a.applyDirection(a.up, p.up)
	a.applyLanes(p.lanes)
	a.applyDirection(a.down, p.down)
}

// applyDirection pushes one direction's changed caps, its setter's switch
// turned on first.
func (a *capApplier) applyDirection(d *direction, caps map[uint64]uint32) {
	if !d.appliesCaps() {
		return
	}
	a.mu.Lock()
	todo := d.pending(caps)
	switchOn, refused := d.wantsSwitch(), d.switchRefusal() != ""
	a.mu.Unlock()
	if refused || (switchOn && !a.switchOn(d)) {
		return
	}
	done, errs := d.push(todo)
	a.mu.Lock()
	defer a.mu.Unlock()
	d.record(done, func(ck uint64) bool { _, live := a.flows[ck]; return live })
	if len(errs) > 0 {
		a.cnt.ApplyErrors += uint64(len(errs))
		a.st.LastError = d.applyError(errs)
	}
}

// switchOn turns a direction's setter's switch on; it reports whether it
// is.
func (a *capApplier) switchOn(d *direction) bool {
	err := d.turnSwitchOn()
	a.mu.Lock()
	defer a.mu.Unlock()
	d.switched(err)
	if err != nil {
		a.cnt.ApplyErrors++
		a.st.LastError = d.applyError([]error{err})
		return false
	}
	return true
}

// applyLanes pushes the lanes' changed default caps.
func (a *capApplier) applyLanes(lanes map[lane.Lane]uint32) {
	if a.lanes.set == nil {
		return
	}
	a.mu.Lock()
	todo := a.lanes.pending(lanes)
	a.mu.Unlock()
	done, errs := a.lanes.push(todo)
	a.mu.Lock()
	defer a.mu.Unlock()
	for l, v := range done {
		a.lanes.applied[l] = v
	}
	if len(errs) > 0 {
		a.cnt.ApplyErrors += uint64(len(errs))
		a.st.LastError = fmt.Sprintf("apply lane caps: %v", errors.Join(errs...))
	}
}
