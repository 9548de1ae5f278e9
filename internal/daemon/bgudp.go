// bgudp.go: the background lane's non-TCP traffic (QUIC, UDP) at any
// bottleneck: the component "background-udp" runs internal/bgudp's
// controller, which sleeps on the classifier's events and probes only
// while such traffic flows; status says per interface what holds that
// traffic and what does not.
package daemon

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/ledbat"
)

// newBgUDP starts the controller at the policy's background target.
func (d *Daemon) newBgUDP(pol ledbat.Config, h bgudp.Datapath) (*component, error) {
	return supervise(d.log, "background-udp", func() (*runner, error) {
		c, err := bgudp.New(bgudp.DefaultRule(pol.TargetDelay.D()), h, d.log.With("component", "background-udp"))
		if err != nil {
			return nil, err
		}
		status := func() string { return bgUDPSummary(c.Status(), pol.Yield) }
		return &runner{run: c.Run, close: c.Close, status: status, detail: func() any { return c.Status() }}, nil
	})
}

// bgUDPSummary is the component's status line: per interface with an
// episode, what holds its background non-TCP traffic now.
func bgUDPSummary(st bgudp.Status, yield bool) string {
	rule := fmt.Sprintf("probing the peer every %v only while such traffic flows, target %v", st.Rule.Interval, st.Rule.Target)
	if yield {
		rule += fmt.Sprintf("; the foreground yield holds it at %d kbit/s", datapath.BgYieldBytes*8/1000)
	}
	var parts []string
	for _, i := range slices.Sorted(maps.Keys(st.Running)) {
		parts = append(parts, ifaceName(i)+": "+episodeLine(st.Running[i]))
	}
	if len(parts) == 0 {
		parts = append(parts, "no background non-TCP traffic now")
	}
	for _, i := range slices.Sorted(maps.Keys(st.Last)) {
		if _, on := st.Running[i]; !on {
			e := st.Last[i]
			parts = append(parts, fmt.Sprintf("%s last %s–%s (%d probes, %d lost, %d bytes)", ifaceName(i),
				e.Started.Format("15:04:05"), e.Ended.Format("15:04:05"), e.Probes, e.Lost, e.ProbeBytes))
		}
	}
	return strings.Join(parts, "; ") + " (" + rule + ")"
}

func episodeLine(e bgudp.Episode) string {
	what := "not policed yet (no queue seen)"
	switch {
	case e.Held:
		what = "held by the foreground-aware yield"
	case e.Rate != 0:
		what = fmt.Sprintf("held at %.3g Mbit/s by the delay controller", float64(e.Rate)*8/1e6)
	}
	other := "download"
	if e.Controlled == datapath.Download.String() {
		other = "upload"
	}
	return fmt.Sprintf("%s %s (sending %.3g Mbit/s; queue %v over base %v by ICMP echo to %s; %d probes, %d lost); its %s not controlled",
		e.Controlled, what, float64(e.Measured)*8/1e6, e.Queue.Round(100*time.Microsecond), e.Base.Round(100*time.Microsecond),
		e.Peer, e.Probes, e.Lost, other)
}

func ifaceName(i int) string {
	if ifc, err := net.InterfaceByIndex(i); err == nil {
		return ifc.Name
	}
	return fmt.Sprintf("ifindex %d", i)
}
