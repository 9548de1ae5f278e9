// direction.go: the episode's controlled direction. It is the one whose
// offered bytes are larger averaged over dirHorizon, so that a policed
// sender pausing for a step (a loss-based sender's cut after the
// policer's drops, an app's pause) beside the other direction's ACKs
// stays controlled; a direction idle for idleSwitch steps gives way at
// once to one that carries. The direction that gives way keeps its last
// rate until it is idle for idleRelease steps, and takes it up again if
// it is controlled again before.
package bgudp

import (
	"time"

	"github.com/lanes-net/lanes/internal/datapath"
)

const (
	ackShare    = 8           // a direction under 1/ackShare of the other's bytes carries its acknowledgments
	dirHorizon  = time.Second // the offered bytes' average's time constant
	idleSwitch  = 4           // steps without a packet: the direction gives way to one that carries
	idleRelease = 20          // steps without a packet: a direction not controlled is unpoliced
)

// dirChoice is the direction's choice between steps.
type dirChoice struct {
	load  [2]float64 // offered bytes/s, averaged over dirHorizon, by direction
	quiet [2]int     // steps since the direction's last packet
	kept  [2]uint64  // the rate a direction not controlled keeps (0: none)
}

// choose folds the step's counters in and returns the direction to
// control after ctl: the other one once it carries more on average or
// ctl is idle, unless the other is idle itself.
func (c *dirChoice) choose(ctl datapath.Direction, prev, cur [2]datapath.BgClass, dt time.Duration) datapath.Direction {
	a := min(1, dt.Seconds()/dirHorizon.Seconds())
	for i := range 2 {
		rate := float64(cur[i].Bytes-prev[i].Bytes) / max(dt.Seconds(), 1e-3)
		c.load[i] += a * (rate - c.load[i])
		c.quiet[i]++
		if cur[i].Packets != prev[i].Packets {
			c.quiet[i] = 0
		}
	}
	o := 1 - ctl
	if c.quiet[o] < idleSwitch && (c.load[o] > c.load[ctl] || c.quiet[ctl] >= idleSwitch) {
		return o
	}
	return ctl
}

// handOver moves control from old (at rate) to d: old keeps rate, d
// takes up the rate it kept (0: it starts unpoliced).
func (c *dirChoice) handOver(old, d datapath.Direction, rate uint64) uint64 {
	c.kept[old] = rate
	r := c.kept[d]
	c.kept[d] = 0
	return r
}

// release says whether the direction not controlled, d, is to be
// unpoliced now: it kept a rate and has been idle for idleRelease steps.
func (c *dirChoice) release(d datapath.Direction) bool {
	if c.kept[d] == 0 || c.quiet[d] < idleRelease {
		return false
	}
	c.kept[d] = 0
	return true
}

// acks says whether direction d carries only the acknowledgments of the
// other's data: under 1/ackShare of its bytes, averaged over dirHorizon
// (QUIC's ACK frames are a few percent of the data they acknowledge).
func (c *dirChoice) acks(d datapath.Direction) bool {
	return c.load[d]*ackShare < c.load[1-d]
}
