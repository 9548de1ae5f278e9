// components.go: the daemon's optional components, started after the
// datapath and stopped before it: the cooperative cwnd controller
// (internal/coop, policy `coop:`) and the realtime lane (internal/rtlane,
// policy `realtime:`). Each runs under a supervisor (supervise.go) until the
// daemon stops or the policy is reloaded.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/bpf/edfqdisc"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/yield"
)

func (d *Daemon) startComponents(ctx context.Context) error {
	d.mu.Lock()
	pol := d.pol
	host := d.host
	var first *managedIface // coop announces and realtime paces on the first policy interface
	if l := d.ifaceList(); len(l) > 0 {
		first = l[0]
	}
	d.mu.Unlock()
	if first == nil || host == nil {
		return nil
	}
	var comps []*component
	if pol.Coop.Enabled {
		c, err := d.newCoop(pol.Coop, host, first)
		if err != nil {
			return fmt.Errorf("coop: %w", err)
		}
		comps = append(comps, c)
	}
	if pol.Realtime.Enabled {
		c, err := d.newRealtime(pol.Realtime, first)
		if err != nil {
			for _, c := range comps {
				c.stop()
			}
			return fmt.Errorf("realtime: %w", err)
		}
		comps = append(comps, c)
	}
	if y, ok := host.(yielder); ok && pol.Background.Yield {
		c, err := d.newYield(y)
		if err != nil {
			for _, c := range comps {
				c.stop()
			}
			return fmt.Errorf("background yield: %w", err)
		}
		comps = append(comps, c)
	}
	if h, ok := host.(bgudp.Datapath); ok {
		c, err := d.newBgUDP(pol.Background, h)
		if err != nil { // background QUIC/UDP goes uncontrolled, the rest runs
			d.log.Warn("background-udp: the controller did not start", "err", err)
		} else {
			comps = append(comps, c)
		}
	}
	rh, why := d.rledbatFallback(pol.Background, host)
	if rh != nil {
		c, err := d.newRLEDBAT(pol.Background, rh)
		if err != nil { // background downloads go unprotected, the rest runs
			why = "did not start: " + err.Error()
			d.log.Warn("rledbat: the daemon's rLEDBAT did not start", "err", err)
		} else {
			comps = append(comps, c)
		}
	}
	d.mu.Lock()
	d.comps = comps
	d.rledbatWhy = why
	d.mu.Unlock()
	return nil
}

func (d *Daemon) stopComponents() {
	d.mu.Lock()
	comps := d.comps
	d.comps = nil
	d.mu.Unlock()
	d.rledbat.Store(nil)
	d.bgudp.Store(nil)
	for _, c := range comps {
		c.stop()
	}
}

// yielder is a host datapath whose kernel yields (*datapath.Host; the
// in-memory test host cannot, and runs without it).
type yielder interface {
	ForegroundStates() (map[int]yield.State, uint64, error)
	BackgroundCC() datapath.BackgroundCCStatus
}

var _ yielder = (*datapath.Host)(nil)

// newYield is the foreground-aware yield's component (internal/yield). The
// kernel decides the yield; the component only answers status: it runs
// nothing, and wakes nobody. Its status document is the "background"
// component's (yielding per interface).
func (d *Daemon) newYield(h yielder) (*component, error) {
	return supervise(d.log, "background", func() (*runner, error) {
		st := func() yield.Status { return d.yieldStatus(h) }
		d.yieldState.Store(&st)
		status := func() string {
			s := st()
			state := "no foreground"
			var on []string
			for _, n := range slices.Sorted(maps.Keys(s.Interfaces)) {
				is := s.Interfaces[n]
				switch {
				case is.Yielding:
					on = append(on, n+": "+is.Signal+" since "+is.Since.Format("15:04:05.000"))
				case is.Mode == yield.ModeSharing:
					on = append(on, n+": "+is.Signal)
				}
			}
			if len(on) > 0 {
				state = strings.Join(on, "; ")
			}
			return fmt.Sprintf("%s (%d foreground episodes; rule: %s)", state, s.Yields, s.Rule)
		}
		run := func(ctx context.Context) error { <-ctx.Done(); return nil }
		return &runner{run: run, close: func() error { return nil }, status: status,
			detail: func() any { return st() }}, nil
	})
}

// yieldStatus reads the kernel's foreground windows, by interface name.
// It takes no daemon lock: status asks it while holding d.mu.
func (d *Daemon) yieldStatus(h yielder) yield.Status {
	states, now, err := h.ForegroundStates()
	if err != nil {
		d.log.Debug("background yield: foreground state", "err", err)
	}
	byName := map[string]yield.State{}
	for idx, w := range states {
		if idx == 0 {
			continue // any interface: in each one's own window too
		}
		if ifc, err := net.InterfaceByIndex(idx); err == nil {
			byName[ifc.Name] = w
		}
	}
	target := h.BackgroundCC().Target
	if target == 0 {
		target = ledbat.DefaultTargetUS * time.Microsecond
	}
	return yield.StatusOf(byName, now, time.Now(), target)
}

// CoopStateDir holds the coop controllers' replay state (peers' last
// sequence numbers), kept across restarts of the daemon and reboots:
// <StateDir>/coop, set when the daemon starts (statedir.go); the gone
// namespaces' sweep removes a vanished instance's files (instance.go).
var CoopStateDir = filepath.Join(DefaultStateDir, "coop")

// newCoop wires the cooperative controller: flows from the TCP monitor
// (the BPF iterator reading lanes from the datapath's socket map in the
// kernel, or sock_diag), caps through the datapath's sock_ops maps,
// announcements on the managed interface.
func (d *Daemon) newCoop(cfg coop.Config, h datapath.HostAPI, m *managedIface) (*component, error) {
	if cfg.Interface == "" {
		cfg.Interface = m.name
	}
	if cfg.StateFile == "" {
		cfg.StateFile = filepath.Join(CoopStateDir, d.instance+"."+cfg.Interface+".json")
	}
	return supervise(d.log, "coop", func() (*runner, error) { return d.startCoop(cfg, h) })
}

func (d *Daemon) startCoop(cfg coop.Config, h datapath.HostAPI) (*runner, error) {
	mc := tcpmon.Config{LaneOf: h.SocketLane, NoProcess: true}
	if cm, ok := h.(interface{ CookieMap() *ebpf.Map }); ok {
		mc.LaneMap = cm.CookieMap()
	}
	sampler, err := tcpmon.New(mc)
	if err != nil {
		return nil, err
	}
	backend, why := sampler.Backend()
	d.log.Info("coop: tcp monitor", "backend", backend, "fallback_reason", why)
	src := &coop.MonitorSource{S: sampler, Local: interfacePrefix(cfg.Interface)}
	ctl, err := coop.New(coop.Options{Config: cfg, Flows: src, Up: h, Down: h, Ack: h,
		Iface: linkBytes(cfg.Interface), Logger: d.log.With("component", "coop")})
	if err != nil {
		sampler.Close()
		return nil, err
	}
	status := func() string {
		s := ctl.Status()
		state := "capping"
		if !s.Capping {
			state = "not capping: " + s.Reason
		}
		auth := "authenticated"
		if !s.Authenticated {
			auth = fmt.Sprintf("UNAUTHENTICATED (limited: %d active peers wait outside N)", s.Uncounted)
		}
		return fmt.Sprintf("%s, N=%d, rate %.3g Mbit/s (%s), %d flows (monitor: %s), peers %s, dropped announcements %d",
			state, s.N, float64(s.RateBits)/1e6, s.RateSource, len(s.Flows), backend, auth, s.Counters.Dropped())
	}
	return &runner{run: ctl.Run, close: func() error { return errors.Join(ctl.Close(), sampler.Close()) },
		status: status, detail: func() any { return ctl.Status() }}, nil
}

// newRealtime starts the realtime lane; in shaped mode (and no rate of its
// own) its transmit times use the rate the HTB root really sends at.
func (d *Daemon) newRealtime(cfg rtlane.Config, m *managedIface) (*component, error) {
	if cfg.Rate == 0 && m.cfg.Uplink != 0 {
		cfg.Rate = config.Rate(datapath.ShapedRate(m.cfg.Uplink.Bits()))
	}
	return supervise(d.log, "realtime", func() (*runner, error) { return d.startRealtime(cfg) })
}

func (d *Daemon) startRealtime(cfg rtlane.Config) (*runner, error) {
	l, err := rtlane.New(cfg, rtlane.WithLogger(d.log.With("component", "realtime")))
	if errors.Is(err, rtlane.ErrNoHelper) {
		return unavailable(d.log, "realtime", err), nil
	}
	if err != nil {
		return nil, err
	}
	path := realtimePath(l.DataPath())
	status := func() string {
		s := l.Stats()
		t := s.Totals
		return fmt.Sprintf("%s, socket %s, rate %.4g Mbit/s, admitted %d, rejected %d, sent %d, dropped late %d, send errors %d",
			path, l.Addr(), float64(l.Rate())/1e6, t.Admitted, t.Rejected, t.Sent, t.DroppedLate, t.SendErrors)
	}
	return &runner{run: l.Run, close: l.Close, status: status, detail: func() any { return l.Stats() }}, nil
}

// unavailable is a component this installation cannot run (a missing
// part, not a failure to retry): the rest of the daemon runs, and status
// says why this part does not.
func unavailable(log *slog.Logger, name string, why error) *runner {
	log.Warn(name+" unavailable", "err", why)
	status := "unavailable: " + why.Error()
	return &runner{run: func(ctx context.Context) error { <-ctx.Done(); return nil },
		close: func() error { return nil }, status: func() string { return status },
		detail: func() any { return map[string]string{"unavailable": why.Error()} }}
}

// realtimePath names the realtime lane's path for `lanes status`: the
// daemon's EDF queue above the HTB tree, where its data path runs
// (dataPath: lanes-rtd or in-process), and whether this kernel could run
// the EDF qdisc instead (internal/bpf/edfqdisc; the daemon does not install
// it, docs/realtime.md "The kernel path").
func realtimePath(dataPath string) string {
	if err := edfqdisc.Supported(); err != nil {
		return "path daemon (data path " + dataPath + "; no BPF qdisc in this kernel)"
	}
	return "path daemon (data path " + dataPath + "; this kernel has BPF qdiscs; the EDF qdisc is not installed)"
}

// interfacePrefix is the first IPv4 subnet of an interface (invalid if none).
func interfacePrefix(name string) netip.Prefix {
	it, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Prefix{}
	}
	addrs, _ := it.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ones, _ := n.Mask.Size()
			if p, err := netip.ParseAddr(n.IP.To4().String()); err == nil {
				return netip.PrefixFrom(p, ones).Masked()
			}
		}
	}
	return netip.Prefix{}
}

// Component returns the status document of the named running component.
func (d *Daemon) Component(name string) (json.RawMessage, error) {
	d.mu.Lock()
	var doc any
	var names []string
	for _, c := range d.comps {
		names = append(names, c.name)
		if c.name == name {
			doc = c.detail()
		}
	}
	d.mu.Unlock()
	if doc == nil {
		if len(names) == 0 {
			return nil, fmt.Errorf("component %q is not running (the policy enables none: see the coop: and realtime: sections)", name)
		}
		return nil, fmt.Errorf("component %q is not running (running: %s)", name, strings.Join(names, ", "))
	}
	return json.Marshal(doc)
}
