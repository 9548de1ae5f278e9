// background.go: what the daemon says about the background lane at a
// remote bottleneck: where each interface's queue forms and what protects
// the foreground there (lanes status).
package daemon

import (
	"fmt"
	"strings"

	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/ledbat"
)

// queueAndProtection says where the interface's queue forms (on the device:
// the lanes qdisc held a backlog in the last second; else remote, or none)
// and what protects the foreground there.
func (d *Daemon) queueAndProtection(iface string, hs datapath.HostStats) (queue, protection string) {
	var remote []string
	if hs.Background.Active {
		remote = append(remote, fmt.Sprintf("LEDBAT++ (target %v)", hs.Background.Target))
	}
	if d.pol.Background.ReceiveWindow == ledbat.RWRLEDBAT && hs.Capabilities[datapath.CapRLEDBAT] == "on" {
		remote = append(remote, "rLEDBAT")
	} else if c := d.rledbat.Load(); c != nil && d.rledbatWhy == "" {
		remote = append(remote, fmt.Sprintf("rLEDBAT (daemon, every %v)", c.Stats().Interval))
	}
	y := d.yielder.Load()
	if y != nil {
		remote = append(remote, "foreground-aware yield")
	}
	protection = "on the device: strict priority (HTB); remote: "
	if len(remote) == 0 {
		protection += "nothing (background sockets keep the system congestion control)"
	} else {
		protection += strings.Join(remote, " + ")
	}
	queue = "unknown (no background component sampling the queue)"
	if y != nil {
		if is, ok := y.Status().Interfaces[iface]; ok {
			if is.DeviceBacklog > 3000 {
				queue = fmt.Sprintf("on the device (up to %d bytes in the lanes qdisc in the last second)", is.DeviceBacklog)
			} else {
				queue = "not on the device: remote if the link is busy (the lanes qdisc held no backlog in the last second)"
			}
		}
	}
	return queue, protection
}
