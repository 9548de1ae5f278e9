// Package daemon is `lanes daemon`: it loads the policy, installs the
// datapath on each managed interface, applies the policy's rules, serves the
// API, reloads on SIGHUP and removes everything it installed when it stops.
//
// Contract: idempotent start (leftovers of a previous run of the
// same instance are removed first, others' objects are never touched); clean
// stop on SIGTERM/SIGINT; fail-open after SIGKILL (what stays in the kernel
// keeps traffic flowing); bad input never crashes it. One daemon manages one
// network namespace; several run side by side in several namespaces.
package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/lanes-net/lanes/internal/api"
	"github.com/lanes-net/lanes/internal/apiserver"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/datapath"
	"github.com/lanes-net/lanes/internal/experiments"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/policy"
	"github.com/lanes-net/lanes/internal/rootpath"
)

// Options configure a daemon run.
type Options struct {
	PolicyPath string // "" = the embedded default policy
	// StateDir is the state directory, what outlives a crash ("":
	// StateDir(), the environment's; statedir.go names its parts)
	StateDir string
	Socket   string // API socket path
	Version  string
	Log      *slog.Logger
	// Without names optional capabilities to leave off as a kernel lacking
	// them would (WithoutNames: datapath.Capabilities and the daemon's own
	// rLEDBAT); status shows them off; Run refuses another name.
	Without []string
	// Experiments: the lab's and tests' switches (the zero value: the
	// product's rules), passed as they are to the parts they switch.
	Experiments experiments.Set
	// PinnedBPF: run on the classifier another loader pinned under this
	// bpffs with the location prefix PinnedPrefix (Android's NetBpfLoad:
	// the OEM path, datapath.Pinned) instead of loading lanes' own; "":
	// load it.
	PinnedBPF, PinnedPrefix string
	// AndroidCpuset: where Android's cpuset groups are (policy android:
	// rules; "": /dev/cpuset)
	AndroidCpuset string
	// Ready, if set, is called once everything is installed and the API serves.
	Ready func(*Daemon)
}

// Daemon is a running lanes daemon: it wires its owners, starts and stops
// them, and reloads the policy. Each owner holds its state and lock
// (docs/ARCHITECTURE.md "Dependencies between packages").
type Daemon struct {
	opts     Options
	log      *slog.Logger
	instance string
	cgroups  *cgroupMount

	env env

	// kernel: the policy, the host datapath and what was put in it, under
	// the lock every other owner's is taken after (state.go)
	kernel *kernelState
	// handlers: the API's requests (handlers.go)
	handlers *apiHandlers
	// mover: processes and their open sockets moved into lanes (cgmove.go)
	mover *laneMover

	polState *policyState // when the policy was read; the last reload refused (policystate.go)
	// comps: the running components and what status reads of them
	// (components.go); its own lock, after the kernel state's
	comps *components

	// regs: the API's flow registrations, their sockets and the sweep's
	// kick (registrations.go); its own lock, taken after the kernel state's
	regs *registrations
	// groups: lane groups inside host cgroups (lanegroups.go); its own
	// lock, after the kernel state's
	groups *laneGroups
	// moves: open sockets and processes a move set, what moved them, their
	// threads' saved CPU treatment (movers.go); its own lock, after the
	// kernel state's
	moves *moves
}

type managedIface struct {
	name  string
	cfg   policy.Interface // the policy entry
	order int              // its position in the policy
	index int              // ifindex of the device
	eg    egressTree
	bg    bgEgress // eg's background class; nil where it has none
}

// Run starts the daemon and blocks until ctx ends, then cleans up.
func Run(ctx context.Context, opts Options) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Socket == "" {
		opts.Socket = api.DefaultSocket
	}
	if err := CheckWithout(opts.Without); err != nil {
		return err
	}
	d, release, err := prepare(opts)
	if err != nil {
		return err
	}
	defer release()
	if err := d.install(); err != nil {
		return errors.Join(err, d.uninstall())
	}
	d.mover.adoptNested()
	followCtx, stopFollow := context.WithCancel(ctx)
	following := make(chan struct{})
	go func() { d.follow(followCtx); close(following) }()
	defer func() { stopFollow(); <-following }()
	if err := d.startTasks(ctx); err != nil {
		return errors.Join(err, d.uninstall())
	}
	defer d.stopTasks()
	if err := d.startComponents(ctx, nil); err != nil {
		d.stopTasks()
		return errors.Join(err, d.uninstall())
	}
	defer d.comps.stopBut()
	srv, err := apiserver.Listen(opts.Socket, d.handlers, d.log)
	if err != nil {
		d.comps.stopBut()
		d.stopTasks()
		return errors.Join(err, d.uninstall())
	}
	// SIGHUP is caught before the daemon says it runs: a reload asked for
	// right after readiness (systemctl reload, a test) must not end it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	d.log.Info("lanes daemon running", "instance", d.instance, "policy", d.kernel.pol.Source, "socket", opts.Socket, "interfaces", d.kernel.ifaceNames())
	if opts.Ready != nil {
		opts.Ready(d)
	}
	if err := sdNotify("READY=1\nSTATUS=managing " + fmt.Sprint(d.kernel.ifaceNames())); err != nil {
		d.log.Warn("sd_notify READY", "err", err)
	}
	releaseStartupMemory()
	err = d.serve(ctx, srv, hup)
	d.log.Info("lanes daemon stopping: removing everything it installed")
	_ = sdNotify("STOPPING=1")
	err = errors.Join(err, srv.Close())
	d.handlers.facts.close()
	d.comps.stopBut()
	d.stopTasks()
	return errors.Join(err, d.uninstall())
}

// prepare reads the policy, finds this daemon's instance, cgroup v2 mount
// and namespace, sweeps what daemons of gone namespaces left, and records
// this instance. release forgets the instance and releases the cgroup
// mount.
func prepare(opts Options) (d *Daemon, release func(), err error) {
	if opts.StateDir == "" {
		opts.StateDir = StateDir()
	}
	dirs := stateDirsAt(opts.StateDir)
	if err := rootpath.MkdirAll(dirs.root, 0o755); err != nil {
		return nil, nil, fmt.Errorf("state directory: %w", err)
	}
	pol, err := loadPolicy(opts)
	if err != nil {
		return nil, nil, err
	}
	inst, err := Instance()
	if err != nil {
		return nil, nil, err
	}
	lock, err := lockInstance(inst)
	if err != nil {
		return nil, nil, err
	}
	cg, err := findOrMountCgroup2(inst)
	if err != nil {
		lock.release()
		return nil, nil, err
	}
	ns, err := api.CurrentNetns()
	if err != nil {
		cg.release()
		lock.release()
		return nil, nil, err
	}
	if swept := sweepGoneInstances(dirs, inst, cg.root, opts.Log); len(swept) > 0 {
		opts.Log.Info("removed leftovers of daemons whose namespace is gone", "instances", swept)
	}
	release = func() { cg.release(); lock.release() }
	if err := recordInstance(dirs.instances, inst); err != nil {
		opts.Log.Warn("instance record not written: a crash of this daemon will not be swept", "err", err)
	} else {
		release = func() { forgetInstance(dirs.instances, inst); cg.release(); lock.release() }
	}
	d = newDaemon(opts, inst, pol, kernelEnv(cg))
	*d.cgroups = *cg // the mount the owners were given
	d.handlers.netns = ns
	if cg.unmount != nil {
		d.log.Info("no cgroup v2 mount visible (e.g. under `ip netns exec`): mounted one privately", "at", cg.root)
	}
	return d, release, nil
}

// serve runs the API until ctx ends or the server fails, reloading the
// policy on each signal from hup (and restarting the task rules and components when it
// changed).
func (d *Daemon) serve(ctx context.Context, srv *apiserver.Server, hup <-chan os.Signal) error {
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ctx) }()
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go d.sweepRegistrations(sweepCtx)
	for {
		select {
		case <-hup:
			_ = sdNotify("RELOADING=1")
			if d.Reload() {
				kept := d.comps.stopBut("realtime", "coop") // kept if their sections are unchanged
				d.stopTasks()
				if err := d.startTasks(ctx); err != nil {
					d.log.Error("reload: task rules not running", "err", err)
				}
				if err := d.startComponents(ctx, kept); err != nil {
					d.log.Error("reload: components not running", "err", err)
				}
			}
			_ = sdNotify("READY=1")
		case err := <-serveErr:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

func loadPolicy(opts Options) (*policy.Policy, error) {
	if opts.PolicyPath == "" {
		return policy.Default(), nil
	}
	p, err := policy.Load(opts.PolicyPath, !opts.Experiments.NonRootPolicy)
	if err != nil {
		return nil, err
	}
	if err := CheckCapacity(p); err != nil {
		return nil, err
	}
	if opts.Log != nil {
		for _, w := range config.Each(p.MissingExecutables()) {
			opts.Log.Warn("policy: a rule's program is not installed", "warning", w)
		}
	}
	return p, nil
}

// newDaemon is a daemon with its seams to the kernel, not yet installed:
// its owners, each given the others it uses.
func newDaemon(opts Options, instance string, pol *policy.Policy, e env) *Daemon {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	regs, cg := newRegistrations(opts.Log), &cgroupMount{}
	d := &Daemon{opts: opts, log: opts.Log, instance: instance, polState: newPolicyState(), env: e, regs: regs,
		moves: newMoves(regs), groups: newLaneGroups(instance, cg, regs), comps: newComponents(opts.Log, instance, opts),
		cgroups: cg}
	d.kernel = newKernelState(opts.Log, &d.env, pol, regs, d.groups, d.moves)
	d.mover = &laneMover{log: opts.Log, env: &d.env, cgroups: cg, kernel: d.kernel, groups: d.groups, moves: d.moves,
		regs: regs}
	d.handlers = newAPIHandlers(d)
	d.comps.appState = d.newAppState
	return d
}

// Reload re-reads the policy file; a bad file keeps the running policy. It
// reports whether the new policy was taken.
func (d *Daemon) Reload() bool {
	pol, err := loadPolicy(d.opts)
	if err != nil {
		d.refuseReload(err)
		return false
	}
	return d.reloadWith(pol)
}

// reloadWith applies a validated policy: the new trees are built before
// anything of the old policy is removed, and a failure keeps the old one.
// A policy changing a key that only a restart applies is refused whole,
// naming the key and its line (policy/reload.go).
func (d *Daemon) reloadWith(pol *policy.Policy) bool {
	if err := d.applyReload(pol); err != nil {
		d.refuseReload(err)
		return false
	}
	return true
}

// ccAllowSyncer is the host datapath's copy of the kernel's congestion
// control allow-list (datapath appcc.go).
type ccAllowSyncer interface{ SyncCCAllowList() error }

// syncCCAllowLocked reads the kernel's congestion control allow-list again
// at a reload (d.kernel.mu held): a name the administrator removed from
// net.ipv4.tcp_allowed_congestion_control is refused to users' background
// sockets from then on, a name added is allowed.
func (d *Daemon) syncCCAllowLocked() {
	if c := d.kernel.host.roles().ccAllow; c != nil {
		if err := c.SyncCCAllowList(); err != nil {
			d.log.Warn("congestion control allow-list: the one read before stays", "err", err)
		}
	}
}

// applyReload is reloadWith's work; an error refuses the policy whole.
func (d *Daemon) applyReload(pol *policy.Policy) error {
	d.kernel.mu.Lock()
	defer d.kernel.mu.Unlock()
	if err := policy.RestartChanges(policy.RestartValues(d.kernel.pol), pol); err != nil {
		return err
	}
	err := d.kernel.applyLocked(d.kernel.desiredFor(pol), true)
	var fail *egressOpenError
	if errors.As(err, &fail) {
		return err
	}
	d.kernel.pol = pol
	d.polState.taken()
	d.kernel.setExeLanesLocked()
	d.syncCCAllowLocked()
	if err != nil {
		d.kernel.logApplyError(err)
	}
	d.kernel.kickFollowLocked()
	d.log.Info("policy reloaded", "policy", pol.Source)
	return nil
}

func (d *Daemon) install() error {
	d.kernel.mu.Lock()
	defer d.kernel.mu.Unlock()
	return d.installLocked()
}

func (d *Daemon) installLocked() error {
	off := map[datapath.Capability]string{}
	for _, c := range d.opts.Without {
		off[datapath.Capability(c)] = "left off (--without)"
	}
	reg := structops.Auto
	if d.opts.Experiments.StructOpsByUpdate {
		reg = structops.Update
	}
	h, err := d.env.openHost(datapath.HostConfig{Instance: d.instance, StateDir: stateDirsAt(d.opts.StateDir).datapath,
		CgroupRoot: d.cgroups.root, Off: off, StructOps: reg,
		BackgroundTarget: d.kernel.pol.Background.Target(), ReceiveTarget: d.kernel.pol.Background.ReceiveTarget(),
		Yield: d.kernel.pol.Background.Yield, Experiments: d.opts.Experiments, Pinned: d.pinned()})
	if err != nil {
		return err
	}
	d.kernel.host = h
	d.kernel.setExeLanesLocked()
	return d.kernel.applyLocked(d.kernel.desiredFor(d.kernel.pol), true)
}

func (d *Daemon) uninstall() error {
	if err := d.mover.restoreNested(); err != nil {
		d.log.Warn("giving processes back to their cgroups", "err", err)
	}
	d.kernel.mu.Lock()
	defer d.kernel.mu.Unlock()
	return d.kernel.uninstallLocked()
}

// uninstallLocked applies the empty state, then closes the host.
func (ks *kernelState) uninstallLocked() error {
	if ks.host == nil {
		return nil
	}
	err := ks.applyLocked(newDesired(), false)
	err = errors.Join(err, ks.host.core.Close())
	ks.host = nil
	return err
}

func (ks *kernelState) deleteFlowLocked(f api.Flow) error {
	ks.restoreLiveSocketsLocked(f, ks.regs.remove(f))
	if ks.host == nil {
		return nil
	}
	return ks.applyLocked(ks.desiredFor(ks.pol), false)
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
	var src netip.Addr
	if f.Src != "" {
		if src, err = netip.ParseAddr(f.Src); err != nil {
			return datapath.FlowKey{}, err
		}
	}
	return datapath.FlowKey{Src: src, Dst: dst, DPort: f.DPort, SPort: f.SPort, Proto: proto}, nil
}

// ifaceList is the managed interfaces in policy order.
func (ks *kernelState) ifaceList() []*managedIface {
	out := slices.Collect(maps.Values(ks.egress))
	slices.SortFunc(out, func(a, b *managedIface) int {
		return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.name, b.name))
	})
	return out
}

func (ks *kernelState) ifaceNames() []string {
	var out []string
	for _, m := range ks.ifaceList() {
		out = append(out, m.name)
	}
	return out
}

// --- apiserver.Handler ---

// Owners answers who owns a flow's sockets from sock_diag (diagowners.go).
func (h *apiHandlers) Owners() apiserver.Owners {
	return diagOwners{procOwners: procOwners{proc: "/proc"}}
}

// Access is the policy's access group and realtime grants.
func (h *apiHandlers) Access() apiserver.Access {
	h.kernel.mu.Lock()
	defer h.kernel.mu.Unlock()
	return apiserver.Access{Group: h.kernel.pol.Access.Group, RealtimeGrant: h.kernel.pol.Realtime.Grants.Allows}
}

func (h *apiHandlers) Flows() ([]api.FlowInfo, error) {
	h.kernel.mu.Lock()
	defer h.kernel.mu.Unlock()
	out := policyFlows(h.kernel.pol)
	out = append(out, h.regs.all()...)
	sort.Slice(out, func(i, j int) bool { return out[i].Flow.String() < out[j].Flow.String() })
	return out, nil
}

func (h *apiHandlers) LaneCgroup(l lane.Lane) (string, error) { return h.kernel.laneCgroup(l) }

func (h *apiHandlers) MovePID(c apiserver.Cred, pid int, l lane.Lane, keepSched bool) (api.Moved, error) {
	t0 := time.Now()
	by := "lanes move"
	if int(c.PID) == pid {
		by = "lanes run" // it moves itself, then runs the command
	}
	m, err := h.mover.moveProcess(pid, l, by, c.UID == 0)
	if err != nil {
		return m, err
	}
	m.Sched = "kept"
	if !keepSched {
		if m.Sched, err = h.moves.laneSched(pid, l); err != nil {
			h.log.Warn("moved process: CPU scheduling", "pid", pid, "lane", l, "err", err)
			m.Sched += " (" + err.Error() + ")"
		}
	}
	h.log.Info("process moved", "pid", pid, "lane", l, "by", by, "by_uid", c.UID, "tcp", m.TCP, "udp", m.UDP, "sched", m.Sched, "took", time.Since(t0).Round(time.Microsecond))
	return m, nil
}

// hostCounters are the host datapath's counters, congestion controls and
// capabilities, for status.
type hostCounters interface {
	Stats() (datapath.HostStats, error)
}

func (h *apiHandlers) Status() (*api.Status, error) {
	tasks, tasksOn := h.tasksStatus()
	flows, _ := h.Flows()
	h.kernel.mu.Lock()
	defer h.kernel.mu.Unlock()
	st := &api.Status{Version: h.version, Policy: h.kernel.pol.Source, StartedAt: h.started.UTC().Format(time.RFC3339), Flows: flows, Netns: h.netns,
		RestartKeys: policy.RestartValues(h.kernel.pol), PolicyRefused: h.polState.lastRefused()}
	var hs datapath.HostStats
	if c := h.kernel.host.roles().counters; c != nil {
		var err error
		if hs, err = c.Stats(); err != nil {
			return nil, err
		}
	}
	ys := h.comps.yieldNow()
	accounts := h.accountsNow()
	for _, m := range h.kernel.ifaceList() {
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
			if b.Registered == structops.Update.String() {
				is.BackgroundCC += ", registered by map update (stays after a killed daemon until its restart or lanes reset)"
			}
		} else if b.Clamp {
			is.BackgroundCC = fmt.Sprintf("cwnd clamp: LEDBAT++'s window from sock_ops over the system's congestion control, target %v (no LEDBAT++ congestion control: %s)", b.Target, b.Reason)
		} else {
			is.BackgroundCC = "system: " + b.Reason + "; no cwnd clamp: " + b.ClampReason
		}
		is.BackgroundMode = hs.Background.Mode()
		var backlog uint64
		for _, l := range lane.All {
			backlog += lanes[l].BacklogBytes
		}
		is.Queue, is.Protection = h.comps.queueAndProtection(h.kernel.pol.Background, backlog, hs)
		is.Downloads = h.comps.downloadProtection(h.kernel.pol.Background, hs)
		is.NonTCP = h.comps.nonTCPProtection(h.kernel.pol.Background, m.bg)
		is.BackgroundNow = backgroundNow(ys, m.name, hs.Background.Target)
		is.InteractiveLeaf = m.eg.InteractiveLeaf()
		if accounts != nil {
			rx, _, rxErr := linkBytes(m.name).InterfaceBytes()
			upBps, downCap := h.rates.observe(m.index, time.Now(), lanes, rx, rxErr == nil)
			is.Account = accountOf(accounts, m.index, upBps, downCap)
		}
		st.Interfaces = append(st.Interfaces, is)
	}
	st.Capabilities = map[string]string{}
	for c, v := range hs.Capabilities {
		st.Capabilities[string(c)] = v
	}
	st.Components = map[string]string{}
	st.Details = map[string]json.RawMessage{}
	if tasksOn {
		st.Components["tasks"] = taskSummary(tasks)
		if b, err := json.Marshal(tasks); err == nil {
			st.Details["tasks"] = b
		}
	}
	for _, c := range h.comps.running() {
		st.Components[c.name] = c.status()
		if b, err := json.Marshal(c.detail()); err == nil {
			st.Details[c.name] = b
		}
	}
	if _, on := st.Components["realtime"]; !on {
		st.Components["realtime"] = realtimeOffLine(offByPolicy(h.kernel.pol, "realtime"))
	}
	return st, nil
}

// realtimeOffLine is status's line for a realtime lane the policy leaves
// off (why: offByPolicy's words), naming the key that turns it on, as the
// realtime clients' message does (include/lanes_rt.h LANES_RT_MSG_OFF).
func realtimeOffLine(why string) string {
	if why == "" {
		why = "not started"
	}
	return "off (" + why + "): set realtime.enabled: true in the policy, then reload"
}
