// sharerule.go: the share rule beside a present foreground (the background
// keeps FG_SHARE_TARGET of queue there) as the programs' bits, less the
// parts an experiment leaves off (experiments.ShareOff) to pair the rule
// with what it replaced.
package datapath

import (
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/experiments"
)

// ledbatShare is the LEDBAT++ share rule with the parts in off left off.
func ledbatShare(off experiments.ShareOff) uint32 {
	rule := uint32(ledbat.ShareRule)
	for _, p := range []struct {
		off bool
		bit uint32
	}{{off.Slope, ledbat.ShareSlope}, {off.Defer, ledbat.ShareDefer}, {off.Grow, ledbat.ShareGrow}} {
		if p.off {
			rule &^= p.bit
		}
	}
	return rule
}

// rlShare is sock_ops' rLEDBAT share rule with the parts in off left off
// (0: downloads held at the minimum beside a present foreground).
func rlShare(off experiments.ShareOff) uint32 {
	if off.Download {
		return 0
	}
	return sockops.RLShareOn | ledbatShare(off)
}
