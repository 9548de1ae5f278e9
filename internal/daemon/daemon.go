// Package daemon is `lanes daemon`: it loads the policy, installs the
// datapath on each managed interface, applies the policy's rules, serves the
// API, reloads on SIGHUP and removes everything it installed when it stops.
//
// Contract (DESIGN.md): idempotent start (leftovers of a previous run of the
// same instance are removed first, others' objects are never touched); clean
// stop on SIGTERM/SIGINT; fail-open after SIGKILL (what stays in the kernel
// keeps traffic flowing); bad input never crashes it. One daemon manages one
// network namespace; several run side by side in several namespaces.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
)

// Options configure a daemon run.
type Options struct {
	PolicyPath string // "" = the embedded default policy
	Socket     string // API socket path
	// RootOwnedPolicy refuses policy files a non-root user could write.
	RootOwnedPolicy bool
	Version         string
	Log             *slog.Logger
	// Ready, if set, is called once everything is installed and the API serves.
	Ready func(*Daemon)
}

// Daemon is a running lanes daemon.
type Daemon struct {
	opts     Options
	log      *slog.Logger
	instance string
	netns    api.Netns // the namespace this daemon manages (status)
	started  time.Time
	cgroups  *cgroupMount

	mu     sync.Mutex
	pol    *policy.Policy
	host   *datapath.Host            // this namespace's BPF programs, maps and lane cgroups
	ifaces []*managedIface           // one egress tree each, all running host's classifier
	flows  map[api.Flow]api.FlowInfo // registrations by API and by policy
	// liveSockets: connected sockets an API registration moved (livesockets.go)
	liveSockets map[api.Flow][]liveSocket
	tasks       *taskEngine  // task rules and exe/comm lane rules; nil if none
	comps       []*component // coop controller, realtime lane
}

type managedIface struct {
	name string
	cfg  policy.Interface
	eg   *datapath.Egress
}

// Instance names this daemon's kernel objects: one per network namespace,
// from the namespace's inode, so daemons in different namespaces never collide.
func Instance() (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return "", fmt.Errorf("network namespace: %w", err)
	}
	return "n" + strconv.FormatUint(st.Ino, 36), nil
}

// Run starts the daemon and blocks until ctx ends, then cleans up.
func Run(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Socket == "" {
		opts.Socket = api.DefaultSocket
	}
	pol, err := loadPolicy(opts)
	if err != nil {
		return err
	}
	inst, err := Instance()
	if err != nil {
		return err
	}
	cg, err := findOrMountCgroup2(inst)
	if err != nil {
		return err
	}
	defer cg.release()
	ns, err := api.CurrentNetns()
	if err != nil {
		return err
	}
	d := &Daemon{opts: opts, log: opts.Log, instance: inst, netns: ns, started: time.Now(), pol: pol, flows: map[api.Flow]api.FlowInfo{}, liveSockets: map[api.Flow][]liveSocket{}, cgroups: cg}
	if cg.mounted {
		d.log.Info("no cgroup v2 mount visible (e.g. under `ip netns exec`): mounted one privately", "at", cg.root)
	}
	if err := d.install(); err != nil {
		return errors.Join(err, d.uninstall())
	}
	if err := d.startTasks(ctx); err != nil {
		return errors.Join(err, d.uninstall())
	}
	defer d.stopTasks()
	if err := d.startComponents(ctx); err != nil {
		d.stopTasks()
		return errors.Join(err, d.uninstall())
	}
	defer d.stopComponents()
	srv, err := api.Listen(opts.Socket, d, d.log)
	if err != nil {
		d.stopComponents()
		d.stopTasks()
		return errors.Join(err, d.uninstall())
	}
	d.log.Info("lanes daemon running", "instance", inst, "policy", pol.Source, "socket", opts.Socket, "interfaces", d.ifaceNames())
	if opts.Ready != nil {
		opts.Ready(d)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ctx) }()
	for {
		select {
		case <-hup:
			if d.Reload() {
				d.stopComponents()
				d.stopTasks()
				if err := d.startTasks(ctx); err != nil {
					d.log.Error("reload: task rules not running", "err", err)
				}
				if err := d.startComponents(ctx); err != nil {
					d.log.Error("reload: components not running", "err", err)
				}
			}
			continue
		case err = <-serveErr:
		case <-ctx.Done():
		}
		break
	}
	d.log.Info("lanes daemon stopping: removing everything it installed")
	err = errors.Join(err, srv.Close())
	d.stopComponents()
	d.stopTasks()
	return errors.Join(err, d.uninstall())
}

func loadPolicy(opts Options) (*policy.Policy, error) {
	if opts.PolicyPath == "" {
		return policy.Default(), nil
	}
	return policy.Load(opts.PolicyPath, opts.RootOwnedPolicy)
}

// Reload re-reads the policy file; a bad file keeps the running policy. It
// reports whether the new policy was taken.
func (d *Daemon) Reload() bool {
	pol, err := loadPolicy(d.opts)
	if err != nil {
		d.log.Error("policy reload refused, keeping the running policy", "err", err)
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.pol
	d.pol = pol
	if !sameInterfaces(old.Interfaces, pol.Interfaces) {
		d.log.Info("policy reload: interfaces changed, rebuilding their egress trees")
		if err := d.closeEgressesLocked(); err != nil {
			d.log.Error("reload: remove egress trees", "err", err)
		}
		if err := d.openEgressesLocked(); err != nil {
			d.log.Error("reload: egress trees failed, traffic is unmanaged until the next reload", "err", err)
		}
	}
	d.clearPolicyRulesLocked(old)
	if err := d.applyRulesLocked(); err != nil {
		d.log.Error("reload: rules", "err", err)
	}
	d.log.Info("policy reloaded", "policy", pol.Source)
	return true
}

func sameInterfaces(a, b []policy.Interface) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (d *Daemon) install() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.installLocked()
}

func (d *Daemon) installLocked() error {
	h, err := datapath.OpenHost(datapath.HostConfig{Instance: d.instance, CgroupRoot: d.cgroups.root,
		BackgroundTarget: d.pol.Background.Target(), ReceiveTarget: d.pol.Background.ReceiveTarget()})
	if err != nil {
		return err
	}
	d.host = h
	if err := d.openEgressesLocked(); err != nil {
		return err
	}
	return d.applyRulesLocked()
}

// openEgressesLocked installs the egress tree of every policy interface.
func (d *Daemon) openEgressesLocked() error {
	for _, it := range d.pol.Interfaces {
		name := it.Name
		if name == policy.DefaultRouteInterface {
			n, err := DefaultRouteInterface()
			if err != nil {
				return err
			}
			name = n
		}
		cfg := datapath.EgressConfig{Interface: name, DeviceQueueBytes: int(it.DeviceQueue)}
		if it.Mode == policy.Shaped {
			cfg.Mode = datapath.Shaped
			cfg.UplinkBps = it.Uplink.Bits()
			cfg.BackgroundFloorBps = it.BackgroundFloor.Bits()
		} else {
			cfg.Mode = datapath.DeviceBottleneck
		}
		eg, err := datapath.OpenEgress(d.host, cfg)
		if err != nil {
			return fmt.Errorf("interface %s: %w", name, err)
		}
		d.ifaces = append(d.ifaces, &managedIface{name: name, cfg: it, eg: eg})
	}
	return nil
}

func (d *Daemon) closeEgressesLocked() error {
	var errs []error
	for _, m := range d.ifaces {
		if err := m.eg.Close(); err != nil {
			errs = append(errs, fmt.Errorf("interface %s: %w", m.name, err))
		}
	}
	d.ifaces = nil
	return errors.Join(errs...)
}

func (d *Daemon) uninstall() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.uninstallLocked()
}

func (d *Daemon) uninstallLocked() error {
	err := d.closeEgressesLocked()
	if d.host != nil {
		err = errors.Join(err, d.host.Close())
		d.host = nil
	}
	return err
}

// applyRulesLocked pushes the policy's rules and all registrations into every
// interface's datapath.
func (d *Daemon) applyRulesLocked() error {
	var errs []error
	each := func(fn func(h *datapath.Host) error) {
		if d.host == nil {
			return
		}
		if err := fn(d.host); err != nil {
			errs = append(errs, err)
		}
	}
	if *d.pol.DSCP.LowerEffortBackground {
		each(func(h *datapath.Host) error { return h.SetDSCPLane(lane.DSCPLowerEffort, lane.Background) })
	}
	if d.pol.DSCP.ExpeditedRealtime {
		each(func(h *datapath.Host) error { return h.SetDSCPLane(lane.DSCPExpedited, lane.Realtime) })
	}
	for i, r := range d.pol.Rules {
		src := "policy:" + ruleName(r, i)
		switch {
		case r.IsFlowRule():
			f := api.Flow{Dst: r.Dst, DPort: r.DPort, SPort: r.SPort}
			d.flows[f] = api.FlowInfo{Flow: f, Lane: r.Lane, Source: src}
		case r.DSCP != nil && r.UID == nil && !r.IsProcessRule():
			dscp := *r.DSCP
			each(func(h *datapath.Host) error { return h.SetDSCPLane(dscp, r.Lane) })
		case r.UID != nil && !r.IsProcessRule():
			uid := *r.UID
			each(func(h *datapath.Host) error { return h.SetUIDLane(uid, r.Lane) })
		case r.Cgroup != "" && r.Exe == "" && r.Comm == "":
			id, err := d.cgroups.id(r.Cgroup)
			if err != nil {
				d.log.Warn("cgroup rule: cgroup not found (yet)", "rule", src, "cgroup", r.Cgroup, "err", err)
				continue
			}
			each(func(h *datapath.Host) error { return h.SetCgroupLane(id, r.Lane) })
		}
	}
	for f, fi := range d.flows {
		key, err := flowKey(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		each(func(h *datapath.Host) error { return h.SetFlowLane(key, fi.Lane) })
	}
	return errors.Join(errs...)
}

// clearPolicyRulesLocked removes what the old policy put in the datapath, so a
// reload with fewer rules takes them away.
func (d *Daemon) clearPolicyRulesLocked(old *policy.Policy) {
	for f, fi := range d.flows {
		if fi.Source != "api" {
			d.deleteFlowLocked(f)
		}
	}
	h := d.host
	if h == nil {
		return
	}
	for _, r := range old.Rules {
		switch {
		case r.IsFlowRule():
		case r.DSCP != nil && r.UID == nil && !r.IsProcessRule():
			_ = h.SetDSCPLane(*r.DSCP, lane.Unset)
		case r.UID != nil && !r.IsProcessRule():
			_ = h.DeleteUID(*r.UID)
		case r.Cgroup != "":
			if id, err := d.cgroups.id(r.Cgroup); err == nil {
				_ = h.DeleteCgroup(id)
			}
		}
	}
	_ = h.SetDSCPLane(lane.DSCPLowerEffort, lane.Unset)
	_ = h.SetDSCPLane(lane.DSCPExpedited, lane.Unset)
}

func (d *Daemon) deleteFlowLocked(f api.Flow) {
	delete(d.flows, f)
	d.restoreLiveSocketsLocked(f)
	if key, err := flowKey(f); err == nil && d.host != nil {
		_ = d.host.DeleteFlow(key)
	}
}

func ruleName(r policy.Rule, i int) string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("rules[%d]", i)
}

func flowKey(f api.Flow) (datapath.FlowKey, error) {
	dst, err := netip.ParseAddr(f.Dst)
	if err != nil {
		return datapath.FlowKey{}, err
	}
	proto := uint8(0)
	switch f.Proto {
	case "tcp":
		proto = syscall.IPPROTO_TCP
	case "udp":
		proto = syscall.IPPROTO_UDP
	}
	return datapath.FlowKey{Dst: dst, DPort: f.DPort, SPort: f.SPort, Proto: proto}, nil
}

func (d *Daemon) ifaceNames() []string {
	var out []string
	for _, m := range d.ifaces {
		out = append(out, m.name)
	}
	return out
}

// DefaultRouteInterface returns the interface of the IPv4 (else IPv6) default route.
func DefaultRouteInterface() (string, error) {
	for _, family := range []string{"/proc/net/route"} {
		b, err := os.ReadFile(family)
		if err != nil {
			continue
		}
		for _, line := range splitLines(string(b))[1:] {
			f := fieldsOf(line)
			if len(f) > 2 && f[1] == "00000000" && f[7] == "00000000" {
				return f[0], nil
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, it := range ifs {
		if it.Flags&net.FlagLoopback == 0 && it.Flags&net.FlagUp != 0 {
			return "", fmt.Errorf("no default route; name the interface in the policy (e.g. interfaces: [{name: %s}])", it.Name)
		}
	}
	return "", errors.New("no default route and no interface up; name the interface in the policy")
}

// --- api.Handler ---

func (d *Daemon) Owners() api.Owners  { return procOwners{proc: "/proc"} }
func (d *Daemon) AccessGroup() string { d.mu.Lock(); defer d.mu.Unlock(); return d.pol.Access.Group }

func (d *Daemon) Flows() ([]api.FlowInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]api.FlowInfo, 0, len(d.flows))
	for _, fi := range d.flows {
		out = append(out, fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Flow.String() < out[j].Flow.String() })
	return out, nil
}

func (d *Daemon) Register(c api.Cred, f api.Flow, l lane.Lane) error {
	key, err := flowKey(f)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.host == nil {
		return errors.New("no datapath installed")
	}
	if err := d.host.SetFlowLane(key, l); err != nil {
		return err
	}
	d.flows[f] = api.FlowInfo{Flow: f, Lane: l, Source: "api", UID: c.UID}
	d.moveLiveSocketsLocked(f, l)
	d.log.Info("flow registered", "flow", f.String(), "lane", l, "uid", c.UID, "live_sockets", len(d.liveSockets[f]))
	return nil
}

func (d *Daemon) Unregister(c api.Cred, f api.Flow) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.flows[f]; !ok {
		return fmt.Errorf("flow %s is not registered", f)
	}
	d.deleteFlowLocked(f)
	return nil
}

func (d *Daemon) LaneCgroup(l lane.Lane) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.host == nil {
		return "", errors.New("no datapath installed")
	}
	path, _, err := d.host.LaneCgroup(l)
	return path, err
}

func (d *Daemon) MovePID(c api.Cred, pid int, l lane.Lane) error {
	if err := d.movePID(pid, l); err != nil {
		return err
	}
	d.log.Info("process moved", "pid", pid, "lane", l, "by_uid", c.UID)
	return nil
}

// movePID writes pid into the lane's cgroup; its future children follow.
func (d *Daemon) movePID(pid int, l lane.Lane) error {
	dir, err := d.LaneCgroup(l)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move pid %d to %s: %w", pid, l, err)
	}
	return nil
}

func (d *Daemon) Status() (*api.Status, error) {
	flows, _ := d.Flows()
	d.mu.Lock()
	defer d.mu.Unlock()
	st := &api.Status{Version: d.opts.Version, Policy: d.pol.Source, StartedAt: d.started.UTC().Format(time.RFC3339), Flows: flows, Netns: d.netns}
	var hs datapath.HostStats
	if d.host != nil {
		var err error
		if hs, err = d.host.Stats(); err != nil {
			return nil, err
		}
	}
	for _, m := range d.ifaces {
		is := api.InterfaceStatus{Name: m.name, Mode: string(m.cfg.Mode), UplinkBps: m.cfg.Uplink.Bits()}
		lanes, err := m.eg.Stats()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
		for _, l := range lane.All {
			ls := lanes[l]
			is.Lanes = append(is.Lanes, api.LaneStats{Lane: l, Packets: ls.Packets, Bytes: ls.Bytes, Drops: ls.Drops,
				Overlimits: ls.Overlimits, BacklogBytes: ls.BacklogBytes, BacklogPackets: ls.BacklogPackets})
		}
		// the BPF counters are the host's: one program for all interfaces
		is.Classifier = hs.ByKind()
		is.Sockops = hs.Sockops
		if hs.CapCC.Active {
			is.CwndCapCC = hs.CapCC.Name
		} else {
			is.CwndCapCC = "clamp only: " + hs.CapCC.Reason
		}
		if b := hs.Background; b.Active {
			is.BackgroundCC = fmt.Sprintf("LEDBAT++ %s, target %v", b.Name, b.Target)
		} else {
			is.BackgroundCC = "system: " + b.Reason
		}
		st.Interfaces = append(st.Interfaces, is)
	}
	st.Components = map[string]string{}
	st.Details = map[string]json.RawMessage{}
	if d.tasks != nil {
		st.Components["tasks"] = d.tasks.summary()
		if b, err := json.Marshal(d.tasks.eng.Status()); err == nil {
			st.Details["tasks"] = b
		}
	}
	for _, c := range d.comps {
		st.Components[c.name] = c.status()
		if b, err := json.Marshal(c.detail()); err == nil {
			st.Details[c.name] = b
		}
	}
	return st, nil
}

// SocketLanes looks sockets up in the datapath's socket map (sock_ops fills it
// at connect/accept).
func (d *Daemon) SocketLanes(cookies []uint64) (map[uint64]lane.Lane, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[uint64]lane.Lane{}
	if d.host == nil {
		return out, nil
	}
	for _, c := range cookies {
		if l, ok := d.host.SocketLane(c); ok {
			out[c] = l
		}
	}
	return out, nil
}
