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
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/yield"
)

// newBgUDP starts the controller at the policy's background target.
func (cs *components) newBgUDP(pol config.Background, h bgudp.Datapath) (*component, error) {
	return supervise(cs.log, "background-udp", func() (*runner, error) {
		rule := bgudp.DefaultRule(pol.TargetDelay.D())
		rule.Off = cs.opts.Experiments.BgUDP
		c, err := bgudp.New(rule, h, cs.log.With("component", "background-udp"))
		if err != nil {
			return nil, err
		}
		cs.bgudp.Store(c)
		status := func() string { return bgUDPSummary(c.Status(), pol.Yield) }
		return &runner{run: c.Run, close: c.Close, status: status, detail: func() any { return c.Status() }}, nil
	})
}

// bgUDPSummary is the component's status line: per interface with an
// episode, what holds its background non-TCP traffic now.
func bgUDPSummary(st bgudp.Status, yieldOn bool) string {
	rule := fmt.Sprintf("probing the class's peers (ICMP echo; QUIC version probes to a peer silent to echo) every %v only while such traffic flows, target %v; no peer answering: held at the floor", st.Rule.Interval, st.Rule.Target)
	if yieldOn {
		rule += fmt.Sprintf("; beside a present foreground target %v; the foreground yield holds it at %d kbit/s or 1/%d of its link estimate, the smaller, while a foreground TCP socket is harmed, its egress stopped from a foreground connection's opening to %d of its RTTs or its first flight's time at the upload capacity, the longer, after the handshake (at most %v)",
			yield.ShareTarget(st.Rule.Target), datapath.BgYieldBytes*8/1000, bgudp.FloorShare, datapath.FgOpenRTTs, datapath.FgOpenHold)
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
	case e.Blind && !e.Held:
		what = fmt.Sprintf("held at the floor, %.3g Mbit/s: no peer answers ICMP echo, no delay signal", float64(e.Rate)*8/1e6)
	case e.Held:
		what = "held by the foreground-aware yield"
	case e.Rate != 0:
		what = fmt.Sprintf("held at %.3g Mbit/s by the delay controller", float64(e.Rate)*8/1e6)
		if e.UnderLink {
			what += " under its measured link, the queue drained (its sender waits on the shaper, which drops none of its packets)"
		}
		if e.Link > 0 {
			what += fmt.Sprintf(" (%.2f of the link estimate)", float64(e.Rate)/float64(e.Link))
		}
		if e.Room > 0 {
			what += fmt.Sprintf(", within the %.3g Mbit/s the other lanes leave", float64(e.Room)*8/1e6)
		}
		switch {
		case e.Shaped && e.Controlled == datapath.Download.String():
			what += fmt.Sprintf(", shaped (its excess waits in %s's class)", datapath.BgIfbName(e.Ifindex))
		case e.Shaped:
			what += ", shaped (its excess waits in the shaper 1:15)"
		}
	}
	if e.Sharing && !e.Held {
		what += " (sharing with a present foreground: a quarter of the target)"
	}
	other := "download"
	if e.Controlled == datapath.Download.String() {
		other = "upload"
	}
	peers := e.Peer.String()
	if len(e.Peers) > 1 {
		peers = fmt.Sprint(e.Peers)
	}
	by := "ICMP echo"
	if e.Version > 0 {
		by = fmt.Sprintf("ICMP echo and QUIC version probes (%d, to the ports of peers silent to echo)", e.Version)
	}
	return fmt.Sprintf("%s %s (sending %.3g Mbit/s, link estimated %.3g Mbit/s; queue %v over base %v by %s to %s; %d probes, %d lost); its %s not controlled",
		e.Controlled, what, float64(e.Measured)*8/1e6, float64(e.Link)*8/1e6, e.Queue.Round(100*time.Microsecond), e.Base.Round(100*time.Microsecond),
		by, peers, e.Probes, e.Lost, other)
}

func ifaceName(i int) string {
	if ifc, err := net.InterfaceByIndex(i); err == nil {
		return ifc.Name
	}
	return fmt.Sprintf("ifindex %d", i)
}

// bgEgress is a tree that polices background downloads (*datapath.Egress).
type bgEgress interface {
	Ifindex() int
	BgIngressError() error
	BgArrivalShapeError() error
}

// nonTCPProtection says what holds the interface's background non-TCP
// traffic, per direction, and what holds it now.
func (cs *components) nonTCPProtection(bg config.Background, be bgEgress) string {
	if be == nil {
		return ""
	}
	var held []string
	c := cs.bgudp.Load()
	if c != nil {
		held = append(held, fmt.Sprintf("delay controller (its shaper, or a policer where the interface has none, steered by ICMP echo to the class's peers, target %v; at the floor where none answers)", bg.TargetDelay.D()))
	}
	if bg.Yield {
		held = append(held, fmt.Sprintf("foreground-aware yield (in the kernel: a quarter of the target beside a present foreground, %d kbit/s or 1/%d of the class's link estimate, the smaller, beside a harmed one; egress stopped at a foreground connection's opening, at most %v)", datapath.BgYieldBytes*8/1000, bgudp.FloorShare, datapath.FgOpenHold))
	}
	if len(held) == 0 {
		return "not held: the delay controller is not running and the yield is off by policy"
	}
	by := strings.Join(held, " + ")
	s := "uploads held by " + by
	if err := be.BgIngressError(); err != nil {
		s += "; downloads NOT held (no ingress filter: " + err.Error() + ")"
	} else if err := be.BgArrivalShapeError(); err != nil {
		s += "; downloads held by the same, policed on arrival (no IFB to shape them: " + err.Error() + ")"
	} else if c != nil && c.Status().Rule.Off.Ifb {
		s += "; downloads held by the same, policed on arrival (their IFB left off by --bg-udp-rule-off)"
	} else {
		s += "; downloads held by the same, shaped on arrival (" + datapath.BgIfbName(be.Ifindex()) + ")"
	}
	if c == nil {
		s += "; the delay controller is not running (see the daemon's log)"
	} else if e, on := c.Status().Running[be.Ifindex()]; on {
		s += "; now: " + episodeLine(e)
	} else {
		s += "; now: no such traffic"
	}
	return s + "; not held: a non-TCP flow that has sent nothing from this host (its arrivals are not known as background)"
}
