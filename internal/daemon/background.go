// background.go: what the daemon says about the background lane at a
// remote bottleneck: where each interface's queue forms, what protects
// the foreground there, and what steers the background now (lanes status).
package daemon

import (
	"fmt"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/yield"
)

// queueAndProtection says where the interface's queue forms (on the device:
// its lanes qdisc holds backlog bytes now; else remote, or none) and what
// protects the foreground there.
func (cs *components) queueAndProtection(bg config.Background, backlog uint64, hs datapath.HostStats) (queue, protection string) {
	var remote []string
	if hs.Background.Active {
		remote = append(remote, fmt.Sprintf("LEDBAT++ (target %v)", hs.Background.Target))
	} else if hs.Background.Clamp {
		remote = append(remote, fmt.Sprintf("LEDBAT++'s window as a cwnd clamp (sock_ops, target %v)", hs.Background.Target))
	}
	if bg.ReceiveWindow == config.BackgroundRLEDBAT && hs.Capabilities[datapath.CapRLEDBAT] == "on" {
		remote = append(remote, "rLEDBAT")
	} else if c := cs.rledbat.Load(); c != nil && cs.rledbatOff() == "" {
		remote = append(remote, fmt.Sprintf("rLEDBAT (daemon, every %v)", c.Stats().Interval))
	}
	y := cs.yieldState.Load()
	if y != nil {
		remote = append(remote, "foreground-aware yield (in the kernel)")
	}
	protection = "on the device: strict priority (HTB); remote: "
	if len(remote) == 0 {
		protection += "nothing (background sockets keep the system congestion control)"
	} else {
		protection += strings.Join(remote, " + ")
	}
	if backlog > 3000 {
		queue = fmt.Sprintf("on the device (%d bytes in the lanes qdisc now)", backlog)
	} else {
		queue = "not on the device: remote if the link is busy (the lanes qdisc holds no backlog now)"
	}
	return queue, protection
}

// yieldNow is the foreground-aware yield's status, nil while it is off.
func (cs *components) yieldNow() *yield.Status {
	y := cs.yieldState.Load()
	if y == nil {
		return nil
	}
	s := (*y)()
	return &s
}

// backgroundNow is the yield's signal on the interface name: what steers
// its background now and the share of the queue target it keeps (an
// interface whose foreground the kernel has not seen: the background's own
// target, target).
func backgroundNow(ys *yield.Status, name string, target time.Duration) string {
	if ys == nil {
		return ""
	}
	if is, ok := ys.Interfaces[name]; ok {
		return is.Signal
	}
	if target == 0 {
		target = ledbat.DefaultTargetUS * time.Microsecond
	}
	return yield.IdleStatus(target).Signal
}
