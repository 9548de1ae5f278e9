// components.go: the daemon's optional components, started after the
// datapath and stopped before it: the cooperative cwnd controller
// (internal/coop, policy `coop:`) and the realtime lane (internal/rtlane,
// policy `realtime:`). Each runs under a supervisor (supervise.go) until the
// daemon stops or the policy is reloaded. A reload keeps the realtime lane
// when its section (with the rate and interface it derives from the
// policy) is unchanged, so its clients keep their connections, attached
// sockets and queued datagrams; a changed one is restarted and the log
// says which keys changed and what was reset.
//
// The components own the running set and what status reads of them
// (components), under their own lock taken after the daemon's; the daemon
// gives them the policy and the host when it starts them.
package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/bgudp"
	"github.com/lanes-net/lanes/internal/bpf/edfqdisc"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/coop"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/rledbat"
	"github.com/lanes-net/lanes/internal/rtlane"
	"github.com/lanes-net/lanes/internal/tcpmon"
	"github.com/lanes-net/lanes/internal/yield"
)

// components are the daemon's running components and what status reads
// of them.
type components struct {
	log      *slog.Logger
	instance string
	opts     Options

	yieldState atomic.Pointer[func() yield.Status] // the background component's status, while it runs
	rledbat    atomic.Pointer[rledbat.Downloads]   // the rledbat component's, for status
	bgudp      atomic.Pointer[bgudp.Episodes]      // the background-udp component's, for status

	// appState builds the android component (appstate.go), set by the
	// daemon: nil without android rules
	appState func(*policy.Policy) *component

	mu         sync.Mutex
	comps      []*component // coop controller, realtime lane, ...
	rledbatWhy string       // why the daemon's rLEDBAT is off
}

func newComponents(log *slog.Logger, instance string, opts Options) *components {
	return &components{log: log, instance: instance, opts: opts}
}

// running is the running components.
func (cs *components) running() []*component {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return slices.Clone(cs.comps)
}

// rledbatOff is why the daemon's rLEDBAT is off ("" while it may run).
func (cs *components) rledbatOff() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.rledbatWhy
}

// startComponents starts the policy's components; kept are the running
// ones a reload may keep (keepOrStop), nil at start.
func (d *Daemon) startComponents(ctx context.Context, kept map[string]*component) error {
	d.kernel.mu.Lock()
	pol := d.kernel.pol
	host := d.kernel.host
	var first *managedIface // coop announces and realtime paces on the first policy interface
	if l := d.kernel.ifaceList(); len(l) > 0 {
		first = l[0]
	}
	d.kernel.mu.Unlock()
	return d.comps.start(pol, host, first, kept)
}

// start starts the components policy pol enables on host, coop and
// realtime on interface first; kept are the running ones a reload may
// keep (keepOrStop), nil at start.
func (cs *components) start(pol *policy.Policy, host *datapathHost, first *managedIface, kept map[string]*component) error {
	defer func() { // what a reload kept and the policy does not take again
		for _, c := range kept {
			c.stop()
		}
	}()
	if first == nil || host == nil {
		return nil
	}
	var comps []*component
	ck := cs.coopKeyOf(pol.Coop, first)
	if c := cs.keepOrStop(kept, "coop", pol.Coop.Enabled, ck); c != nil {
		comps = append(comps, c)
	} else if pol.Coop.Enabled { // one that cannot start yet waits (supervise.go)
		if ch := host.roles().coop; ch != nil {
			comps = append(comps, cs.newCoop(ck, ch))
		} else {
			cs.log.Warn("coop: the datapath sets no caps; the controller does not run")
		}
	}
	if c := cs.keepOrStop(kept, "realtime", pol.Realtime.Enabled, realtimeKeyOf(pol.Realtime, first)); c != nil {
		comps = append(comps, c)
	} else if pol.Realtime.Enabled {
		c, err := cs.newRealtime(pol.Realtime, first)
		if err != nil {
			for _, c := range comps {
				c.stop()
			}
			return fmt.Errorf("realtime: %w", err)
		}
		comps = append(comps, c)
	}
	if y := host.roles().yielder; y != nil && pol.Background.Yield {
		c, err := cs.newYield(y)
		if err != nil {
			for _, c := range comps {
				c.stop()
			}
			return fmt.Errorf("background yield: %w", err)
		}
		comps = append(comps, c)
	}
	if h := host.roles().bgudp; h != nil {
		c, err := cs.newBgUDP(pol.Background, h)
		if err != nil { // background QUIC/UDP goes uncontrolled, the rest runs
			cs.log.Warn("background-udp: the controller did not start", "err", err)
		} else {
			comps = append(comps, c)
		}
	}
	if cs.appState != nil {
		if c := cs.appState(pol); c != nil {
			comps = append(comps, c)
		}
	}
	rh, why := cs.rledbatFallback(pol.Background, host)
	if rh != nil {
		c, err := cs.newRLEDBAT(pol.Background, rh)
		if err != nil { // background downloads go unprotected, the rest runs
			why = "did not start: " + err.Error()
			cs.log.Warn("rledbat: the daemon's rLEDBAT did not start", "err", err)
		} else {
			comps = append(comps, c)
		}
	}
	cs.mu.Lock()
	cs.comps = comps
	cs.rledbatWhy = why
	cs.mu.Unlock()
	return nil
}

// stopBut stops the running components but those named in keep, which it
// returns by name (a reload then keeps or stops them: keepOrStop).
func (cs *components) stopBut(keep ...string) map[string]*component {
	cs.mu.Lock()
	comps := cs.comps
	cs.comps = nil
	cs.mu.Unlock()
	cs.rledbat.Store(nil)
	cs.bgudp.Store(nil)
	kept := map[string]*component{}
	for _, c := range comps {
		if slices.Contains(keep, c.name) {
			kept[c.name] = c
			continue
		}
		c.stop()
	}
	return kept
}

// restartCost is, per component a reload may keep, what keeping it keeps
// and what restarting it resets.
var restartCost = map[string][2]string{
	"realtime": {"client connections, attached sockets, queued datagrams",
		"client connections closed, attached sockets and queued datagrams dropped (reported shutdown)"},
	"coop": {"peer table, caps, UDP port", "peer table and caps rebuilt, UDP port closed and bound again"},
}

// keepOrStop returns the kept component name when the policy still
// enables it with the same configuration (key); otherwise it stops it,
// logging what changed and what its restart resets, and returns nil.
func (cs *components) keepOrStop(kept map[string]*component, name string, enabled bool, key any) *component {
	c := kept[name]
	if c == nil {
		return nil
	}
	delete(kept, name)
	what := restartCost[name]
	if enabled && reflect.DeepEqual(c.key, key) {
		cs.log.Info("reload: "+name+" section unchanged: kept running", "component", name, "kept", what[0])
		return c
	}
	changed := []string{"enabled"}
	if enabled {
		changed = changedKeys(c.key, key)
	}
	cs.log.Warn("reload: "+name+" section changed: restarting it", "component", name, "changed", strings.Join(changed, ","),
		"reset", what[1])
	c.stop()
	return nil
}

// yielder is a host datapath whose kernel yields (*datapath.Host; the
// in-memory test host cannot, and runs without it).
type yielder interface {
	ForegroundStates() (map[int]yield.State, uint64, error)
	BackgroundCC() datapath.BackgroundCCStatus
}

// newYield is the foreground-aware yield's component (internal/yield). The
// kernel decides the yield; the component only answers status: it runs
// nothing, and wakes nobody. Its status document is the "background"
// component's (yielding per interface).
func (cs *components) newYield(h yielder) (*component, error) {
	return supervise(cs.log, "background", func() (*runner, error) {
		st := func() yield.Status { return cs.yieldStatus(h) }
		cs.yieldState.Store(&st)
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
// It takes no lock: status asks it while holding the kernel state's lock.
func (cs *components) yieldStatus(h yielder) yield.Status {
	states, now, err := h.ForegroundStates()
	if err != nil {
		cs.log.Debug("background yield: foreground state", "err", err)
	}
	byName := map[string]yield.State{}
	for idx, w := range states {
		if idx == 0 {
			continue // any interface: in each one's own window too
		}
		if ifc, err := net.InterfaceByIndex(idx); err == nil {
			w.UntoldHeld = cs.opts.Experiments.UntoldHeld
			byName[ifc.Name] = w
		}
	}
	target := h.BackgroundCC().Target
	if target == 0 {
		target = ledbat.DefaultTargetUS * time.Microsecond
	}
	return yield.StatusOf(byName, now, time.Now(), target)
}

// coopDatapath is what the cooperative controller drives in the host
// datapath: its monitor's socket lanes (and their map, for the BPF
// iterator), and the caps of coop's setters.
type coopDatapath interface {
	SocketLane(cookie uint64) (lane.Lane, bool)
	CookieMap() *ebpf.Map
	coop.UplinkSetter
	coop.DownlinkSetter
	coop.AckClassSetter
}

// newCoop wires the cooperative controller: flows from the TCP monitor
// (the BPF iterator reading lanes from the datapath's socket map in the
// kernel, or sock_diag), caps through the datapath's sock_ops maps,
// announcements on the managed interface.
// A controller that cannot start (another process holds its UDP port, the
// interface has no address yet) waits and retries, and status says why.
func (cs *components) newCoop(key coopKey, h coopDatapath) *component {
	c := superviseWaiting(cs.log, "coop", func() (*runner, error) { return cs.startCoop(key.Config, h) })
	c.key = key
	return c
}

// coopKey is what the coop controller runs with: its section as the
// daemon completes it (interface, state file) and its group key, so that a
// reload keeps it unless one of them changed (a restart at every SIGHUP
// let a process bind its UDP port meanwhile).
type coopKey struct {
	Config config.Coop
	Key    string // the loaded key's hash, or why it did not load
}

// coopKeyOf is the coop controller's configuration under a policy whose
// first interface is m.
func (cs *components) coopKeyOf(cfg config.Coop, m *managedIface) coopKey {
	if cfg.Interface == "" {
		cfg.Interface = m.name
	}
	if cfg.StateFile == "" {
		// the peers' last sequence numbers, kept across restarts and
		// reboots; the gone namespaces' sweep removes them (instance.go)
		cfg.StateFile = filepath.Join(stateDirsAt(cs.opts.StateDir).coop, cs.instance+"."+cfg.Interface+".json")
	}
	k, err := cfg.LoadKey()
	if err != nil {
		return coopKey{Config: cfg, Key: err.Error()}
	}
	return coopKey{Config: cfg, Key: fmt.Sprintf("%x", sha256.Sum256(k))}
}

func (cs *components) startCoop(cfg config.Coop, h coopDatapath) (*runner, error) {
	mc := tcpmon.Config{LaneOf: h.SocketLane, LaneMap: h.CookieMap(), NoProcess: true}
	sampler, err := tcpmon.New(mc)
	if err != nil {
		return nil, err
	}
	backend, why := sampler.Backend()
	cs.log.Info("coop: tcp monitor", "backend", backend, "fallback_reason", why)
	src := &coop.MonitorSource{S: sampler, Local: interfacePrefix(cfg.Interface)}
	ctl, err := coop.New(coop.Options{Config: cfg, Flows: src, Up: h, Down: h, Ack: h,
		Iface: linkBytes(cfg.Interface), Logger: cs.log.With("component", "coop")})
	if errors.Is(err, syscall.EADDRINUSE) {
		err = fmt.Errorf("UDP port %d is held by another process's socket (another user's, or bound without SO_REUSEPORT): %w", cfg.Port, err)
	}
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

// realtimeKey is what the realtime lane runs with: its section, the rate
// it derives, and the interface it paces on.
type realtimeKey struct {
	Config    config.Realtime
	Interface string
}

// realtimeKeyOf is the realtime lane's configuration under a policy whose
// first interface is m: in shaped mode (and no rate of its own) its
// transmit times use the rate the HTB root really sends at.
func realtimeKeyOf(cfg config.Realtime, m *managedIface) realtimeKey {
	if cfg.Rate == 0 && m.cfg.Uplink != 0 {
		cfg.Rate = config.Rate(datapath.ShapedRate(m.cfg.Uplink.Bits()))
	}
	return realtimeKey{Config: cfg, Interface: m.name}
}

// newRealtime starts the realtime lane.
func (cs *components) newRealtime(cfg config.Realtime, m *managedIface) (*component, error) {
	key := realtimeKeyOf(cfg, m)
	c, err := supervise(cs.log, "realtime", func() (*runner, error) { return cs.startRealtime(key.Config) })
	if c != nil {
		c.key = key
	}
	return c, err
}

// changedKeys names the fields (yaml names, nested with dots) in which a
// and b, values of one struct type, differ.
func changedKeys(a, b any) []string {
	var out []string
	var walk func(prefix string, x, y reflect.Value)
	walk = func(prefix string, x, y reflect.Value) {
		if x.Kind() != reflect.Struct {
			if !reflect.DeepEqual(x.Interface(), y.Interface()) {
				out = append(out, prefix)
			}
			return
		}
		for i := range x.NumField() {
			f := x.Type().Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if name == "" || name == "-" {
				name = strings.ToLower(f.Name)
			}
			if prefix != "" && prefix != "config" {
				name = prefix + "." + name
			}
			walk(name, x.Field(i), y.Field(i))
		}
	}
	x, y := reflect.ValueOf(a), reflect.ValueOf(b)
	if !x.IsValid() || !y.IsValid() || x.Type() != y.Type() {
		return []string{"all"}
	}
	walk("", x, y)
	return out
}

func (cs *components) startRealtime(cfg config.Realtime) (*runner, error) {
	l, err := rtlane.New(cfg, rtlane.WithLogger(cs.log.With("component", "realtime")))
	if errors.Is(err, rtlane.ErrNoHelper) {
		return unavailable(cs.log, "realtime", err), nil
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

// offByPolicy says what in the policy leaves the named component off, or
// "" when the policy turns it on (or does not know it).
func offByPolicy(pol *policy.Policy, name string) string {
	if pol == nil {
		return ""
	}
	section, on := "", false
	switch name {
	case "coop":
		section, on = "coop", pol.Coop.Enabled
	case "realtime":
		section, on = "realtime", pol.Realtime.Enabled
	default:
		return ""
	}
	switch {
	case on:
		return ""
	case !pol.Has(section):
		return "no " + section + " section in the policy"
	}
	return section + ".enabled is false in the policy"
}

// Component returns the status document of the named running component, or
// an *api.OffError for one the policy leaves off.
func (h *apiHandlers) Component(name string) (json.RawMessage, error) {
	h.kernel.mu.Lock()
	var doc any
	var names []string
	for _, c := range h.comps.running() {
		names = append(names, c.name)
		if c.name == name {
			doc = c.detail()
		}
	}
	pol := h.kernel.pol
	h.kernel.mu.Unlock()
	if doc == nil {
		if why := offByPolicy(pol, name); why != "" {
			return nil, &api.OffError{Name: name, Why: why}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("component %q is not running (the policy enables none: see the coop: and realtime: sections)", name)
		}
		return nil, fmt.Errorf("component %q is not running (running: %s)", name, strings.Join(names, ", "))
	}
	return json.Marshal(doc)
}
