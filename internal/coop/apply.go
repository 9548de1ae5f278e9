// apply.go: a round's plan reaches the sockets: each direction's caps
// through its setter (switched on once its estimate allows), and the
// lanes' caps for new connections.
package coop

import (
	"errors"
	"fmt"

	"github.com/lanes-net/lanes/internal/lane"
)

// apply pushes changed caps to the datapath (outside mu: it may block).
func (c *Controller) apply(p capPlan) {
	c.applyDirection(&c.up, p.up)
	c.applyLanes(p.lanes)
	c.applyDirection(&c.down, p.down)
}

// applyDirection pushes one direction's changed caps, its setter's switch
// turned on first.
func (c *Controller) applyDirection(d *direction, caps map[uint64]uint32) {
	if !d.appliesCaps() {
		return
	}
	c.mu.Lock()
	todo := d.pending(caps)
	switchOn, refused := d.wantsSwitch(), d.switchRefusal() != ""
	c.mu.Unlock()
	if refused || (switchOn && !c.switchOn(d)) {
		return
	}
	done, errs := d.push(todo)
	c.mu.Lock()
	defer c.mu.Unlock()
	d.record(done, func(ck uint64) bool { _, live := c.flows[ck]; return live })
	if len(errs) > 0 {
		c.cnt.ApplyErrors += uint64(len(errs))
		c.st.LastError = d.applyError(errs)
	}
}

// switchOn turns a direction's setter's switch on; it reports whether it
// is.
func (c *Controller) switchOn(d *direction) bool {
	err := d.turnSwitchOn()
	c.mu.Lock()
	defer c.mu.Unlock()
	d.switched(err)
	if err != nil {
		c.cnt.ApplyErrors++
		c.st.LastError = d.applyError([]error{err})
		return false
	}
	return true
}

// applyLanes pushes the lanes' changed default caps.
func (c *Controller) applyLanes(lanes map[lane.Lane]uint32) {
	if c.lanes.set == nil {
		return
	}
	c.mu.Lock()
	todo := c.lanes.pending(lanes)
	c.mu.Unlock()
	done, errs := c.lanes.push(todo)
	c.mu.Lock()
	defer c.mu.Unlock()
	for l, v := range done {
		c.lanes.applied[l] = v
	}
	if len(errs) > 0 {
		c.cnt.ApplyErrors += uint64(len(errs))
		c.st.LastError = fmt.Sprintf("apply lane caps: %v", errors.Join(errs...))
	}
}
