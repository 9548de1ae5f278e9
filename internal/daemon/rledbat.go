// rledbat.go: background downloads where sock_ops may not set
// TCP_WINDOW_CLAMP (before 5.11, or `--without rledbat`): the daemon runs
// rLEDBAT itself (internal/rledbat, component "rledbat": pidfd_getfd into
// the owning process, TCP_WINDOW_CLAMP every 50 ms), and `lanes status`
// says which of the two protects background downloads, or why neither.
package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/features"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/rledbat"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// rledbatHost is a host datapath the daemon's rLEDBAT can run on
// (*datapath.Host; the in-memory test host cannot).
type rledbatHost interface {
	rledbat.Host
	CookieMap() *ebpf.Map
	Capabilities() map[datapath.Capability]string
}

// rledbatFallback says whether the daemon runs rLEDBAT itself and, if not
// while the BPF path is off, why not.
func (cs *components) rledbatFallback(pol config.Background, h *datapathHost) (rledbatHost, string) {
	if pol.ReceiveWindow != config.BackgroundRLEDBAT {
		return nil, ""
	}
	rh := h.roles().rledbat
	if rh == nil {
		return nil, "the datapath has no socket lanes"
	}
	caps := rh.Capabilities()
	switch {
	case caps[datapath.CapRLEDBAT] == "on":
		return nil, ""
	case slices.Contains(cs.opts.Without, WithoutRLEDBATDaemon):
		return nil, "left off (--without " + WithoutRLEDBATDaemon + ")"
	case caps[datapath.CapSockops] != "on":
		return nil, "sock_ops is off: background sockets are not known one by one"
	}
	if err := features.ProbePidfdGetfd(); err != nil {
		return nil, err.Error()
	}
	return rh, ""
}

// newRLEDBAT starts the daemon's rLEDBAT on the background lane's
// receiving sockets.
func (cs *components) newRLEDBAT(pol config.Background, h rledbatHost) (*component, error) {
	return supervise(cs.log, "rledbat", func() (*runner, error) {
		s, err := tcpmon.New(tcpmon.Config{Interval: rledbat.DefaultInterval, LaneOf: h.SocketLane, LaneMap: h.CookieMap(),
			Filter: tcpmon.Filter{Lanes: []lane.Lane{lane.Background}}})
		if err != nil {
			return nil, err
		}
		c, err := rledbat.New(rledbat.Config{Target: pol.ReceiveTarget(), Host: h, Flows: s.Sample})
		if err != nil {
			s.Close()
			return nil, err
		}
		cs.rledbat.Store(c)
		status := func() string {
			st := c.Stats()
			return fmt.Sprintf("rLEDBAT from the daemon every %v: %d background downloads (%d yielding), clamps set %d, released %d, losses %d, errors %d",
				st.Interval, st.Sockets, st.Yielding, st.Set, st.Released, st.Losses, st.Errors)
		}
		return &runner{run: c.Run, close: s.Close, status: status, detail: func() any { return c.Stats() }}, nil
	})
}

// downloadProtection says what holds background downloads back at a
// remote bottleneck: rLEDBAT in BPF, the daemon's, or nothing and why.
func (cs *components) downloadProtection(bg config.Background, hs datapath.HostStats) string {
	if bg.ReceiveWindow != config.BackgroundRLEDBAT {
		return "none: off by policy (background.receive_window: system)"
	}
	target := bg.ReceiveTarget()
	bpf := strings.TrimPrefix(hs.Capabilities[datapath.CapRLEDBAT], "off: ")
	if bpf == "on" {
		return fmt.Sprintf("rLEDBAT in BPF (sock_ops, at every segment sent), target %v", target)
	}
	if c := cs.rledbat.Load(); c != nil && cs.rledbatOff() == "" {
		st := c.Stats()
		how := "TCP_WINDOW_CLAMP"
		if st.Mode == rledbat.ModeReceiveBuffer {
			how = "TCP_WINDOW_CLAMP and SO_RCVBUF: a mid-stream clamp alone bounds the window only from 5.11"
		}
		s := fmt.Sprintf("rLEDBAT from the daemon (pidfd_getfd + %s, every %v), target %v; BPF rLEDBAT off: %s", how, st.Interval, target, bpf)
		if st.Shrink {
			s += "; warning: net.ipv4.tcp_shrink_window = 1 lets the kernel retract an offered window"
		}
		return s
	}
	return fmt.Sprintf("none: BPF rLEDBAT off (%s), daemon rLEDBAT off (%s)", bpf, cs.rledbatOff())
}
