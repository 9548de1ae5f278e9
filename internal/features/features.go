// Package features finds out which kernel features lanes can use on this
// machine, by trying them rather than trusting version numbers: qdisc kinds
// are created on loopback in a scratch network namespace, BPF program and map
// types are loaded, files and sockets are opened. `lanes doctor` prints the
// result; the daemon and the lab use it to pick fallbacks.
package features

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	ebpffeatures "github.com/cilium/ebpf/features"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/bpf/capcc"
	"github.com/lanes-net/lanes/internal/bpf/classifier"
	"github.com/lanes-net/lanes/internal/bpf/edfqdisc"
	"github.com/lanes-net/lanes/internal/bpf/ledbat"
	"github.com/lanes-net/lanes/internal/bpf/procevents"
	"github.com/lanes-net/lanes/internal/bpf/sockops"
	"github.com/lanes-net/lanes/internal/bpf/sockowner"
	"github.com/lanes-net/lanes/internal/bpf/structops"
	"github.com/lanes-net/lanes/internal/bpf/tcpevents"
	"github.com/lanes-net/lanes/internal/bpf/tcpiter"
	"github.com/lanes-net/lanes/internal/sched"
	"github.com/lanes-net/lanes/internal/tcpmon"
)

// Feature is one probed capability and what lanes does without it.
type Feature struct {
	Name     string `json:"name"`
	Group    string `json:"group"`
	Present  bool   `json:"present"`
	Detail   string `json:"detail,omitempty"`
	Fallback string `json:"fallback,omitempty"` // what lanes does when it is missing
	Use      string `json:"use,omitempty"`      // what lanes does with it (present, or absent without a fallback: a kind it could use but does not, why)
	Needed   bool   `json:"needed"`             // lanes cannot do its main job without it
}

// Report is the result of a probe run.
type Report struct {
	Kernel   string    `json:"kernel"`
	Features []Feature `json:"features"`
}

// Has reports whether a named feature was found.
func (r *Report) Has(name string) bool {
	for _, f := range r.Features {
		if f.Name == name {
			return f.Present
		}
	}
	return false
}

// CapCCFeature is the probe of the lanes BPF congestion control
// (internal/bpf/capcc): struct_ops, the kernel's CUBIC kfuncs and BTF.
const CapCCFeature = "bpf/tcp congestion control (struct_ops)"

// StructOpsLinkFeature: struct_ops registered through a bpf_link (6.4+).
const StructOpsLinkFeature = "bpf/struct_ops link"

// LedbatFeature is the probe of the background lane's LEDBAT++ congestion
// control (internal/bpf/ledbat): struct_ops without kfuncs.
const LedbatFeature = "bpf/tcp congestion control LEDBAT++ (background)"

// EDFQdiscFeature is the probe of the realtime lane's EDF as a BPF qdisc
// (internal/bpf/edfqdisc): struct_ops Qdisc_ops, Linux 6.16+.
const EDFQdiscFeature = "bpf/qdisc EDF (realtime lane in the kernel)"

// The lanes BPF objects, probed by loading the real ones.
const (
	ClassifierFeature  = "lanes classifier (cls_bpf object)"
	SockopsFeature     = "lanes sock_ops (object)"
	TCPEventsFeature   = "lanes TCP events (tracepoint object)"
	TCPIterFeature     = "lanes TCP iterator (monitor sampling)"
	TCPTrackFeature    = "lanes TCP tracker (monitor samples changes only)"
	TCPPrefetchFeature = "lanes TCP walk prefetch (monitor's first sample)"
	SockOwnerFeature   = "lanes socket owner iterator (monitor's process lookup)"
	ProcEventsFeature  = "lanes process events (tracepoints: the task engine outside the initial network namespace)"
)

// qdiscKinds are probed by creating them; the fallback says what lanes uses
// instead. use says what lanes does with a kind where present; for the
// kinds lanes could build on but does not, why (doctor prints it in both
// states when there is no fallback).
var qdiscKinds = []struct {
	kind, fallback, use string
	needed              bool
}{
	{"htb", "none: HTB is lanes' priority tree (prio is absent on many kernels)", "", true},
	{"clsact", "classifier attached to the HTB root instead; background QUIC/UDP downloads are not policed (no ingress filter: uploads still are)", "", false},
	{"pfifo_fast", "", "", false},
	{"pfifo", "", "", false},
	{"bfifo", "", "", false},
	{"tbf", "lab shapes in user space", "", false},
	{"prio", "HTB with per-class priorities gives the same strict order", "", false},
	{"fq", "",
		"not used: the realtime and background leaves stay bfifo (the interactive one is fq_codel where present); capped sockets are paced by TCP's internal pacing (SO_MAX_PACING_RATE), which fq under a leaf would take over", false},
	{"fq_codel", "the interactive lane's flows share one bfifo: an unresponsive or QUIC flow there delays the lane's other flows up to the bfifo's limit",
		"the interactive lane's leaf where present: a queue per flow, CoDel at 5 ms (beside a UDP flow at twice the link rate a request/response p50 took 0.02-0.03x the bfifo's); realtime and background leaves stay bfifo", false},
	{"cake", "",
		"not used: shaped mode shapes with HTB, whose classes carry each lane's rate, ceiling, priority and the ACK class", false},
	{"netem", "",
		"not used: the lab emulates links in user space on TUN devices, the same emulator on every kernel", false},
	{"etf", "",
		"not used: the realtime lane's releases are timed by the daemon's EDF scheduler, on every kernel", false},
	{"taprio", "realtime lane paces in the daemon's EDF scheduler", "", false},
	{"sfq", "", "", false},
}

// BPFQdiscFeature: the kernel takes qdiscs written in BPF (struct_ops
// Qdisc_ops, 6.16+ with CONFIG_NET_SCH_BPF).
const BPFQdiscFeature = "qdisc/bpf (struct_ops Qdisc_ops)"

// Probe runs every probe. It needs root for qdisc and BPF probes; without
// root those are reported as not present with the reason.
func Probe() *Report {
	r := &Report{Kernel: kernelRelease()}
	r.Features = append(r.Features, probeQdiscs()...)
	r.Features = append(r.Features, probeBPF()...)
	r.Features = append(r.Features, probeSystem()...)
	return r
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
}

// probeQdiscs tries each kind as the root (or clsact) qdisc of loopback in a
// scratch namespace, so nothing of the host is touched.
func probeQdiscs() []Feature {
	results := map[string]error{}
	err := inScratchNetns(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for _, q := range qdiscKinds {
			results[q.kind] = tryQdisc(lo, q.kind)
		}
		return nil
	})
	var out []Feature
	for _, q := range qdiscKinds {
		f := Feature{Name: "qdisc/" + q.kind, Group: "traffic control", Fallback: q.fallback, Use: q.use, Needed: q.needed}
		switch e := results[q.kind]; {
		case err != nil:
			f.Detail = "not probed: " + err.Error()
		case e == nil:
			f.Present = true
		default:
			f.Detail = e.Error()
		}
		out = append(out, f)
	}
	return append(out, probeBPFQdisc(), probeIfb())
}

// IfbFeature: the kernel makes IFB devices (CONFIG_IFB) that deliver
// what bpf_redirect hands them, on which the background QUIC/UDP class's
// arrivals are shaped.
const IfbFeature = "link/ifb"

// probeIfb adds an IFB device in a scratch namespace and checks that it
// delivers what bpf_redirect hands it (ifbredirect.go).
func probeIfb() Feature {
	f := Feature{Name: IfbFeature, Group: "traffic control",
		Use:      "background QUIC/UDP downloads shaped on arrival (an IFB per managed interface: its HTB class at the delay controller's rate, 100 ms of queue)",
		Fallback: "background QUIC/UDP downloads policed on arrival (drops over the rate), not shaped"}
	err := inScratchNetns(func() error {
		if err := netlink.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "lanes-ifbprobe"}}); err != nil {
			return err
		}
		ifb, err := netlink.LinkByName("lanes-ifbprobe")
		if err != nil {
			return err
		}
		return ifbDelivers(ifb)
	})
	f.Present = err == nil
	if err != nil {
		f.Detail = err.Error()
	}
	return f
}

// probeBPFQdisc looks for the BPF qdisc's struct_ops type in the kernel's
// BTF (bpf_struct_ops_Qdisc_ops, registered by net/sched/bpf_qdisc.c).
func probeBPFQdisc() Feature {
	f := Feature{Name: BPFQdiscFeature, Group: "traffic control",
		Use: "what bpf/qdisc EDF needs; the daemon's datapath keeps its HTB tree and the realtime lane's EDF in user space (the qdisc lacks the tree's background floor, ACK class and adoption), the lab's deadline experiment runs the EDF qdisc"}
	spec, err := btf.LoadKernelSpec()
	if err == nil {
		_, err = spec.AnyTypeByName("bpf_struct_ops_Qdisc_ops")
	}
	switch {
	case err == nil:
		f.Present = true
	case errors.Is(err, btf.ErrNotFound):
		f.Detail = "not in this kernel (no bpf_struct_ops_Qdisc_ops in its BTF: 6.16+, CONFIG_NET_SCH_BPF)"
	default:
		f.Detail = err.Error()
	}
	return f
}

func tryQdisc(lo netlink.Link, kind string) error {
	attrs := netlink.QdiscAttrs{LinkIndex: lo.Attrs().Index, Handle: netlink.MakeHandle(0x7fe0, 0), Parent: netlink.HANDLE_ROOT}
	var q netlink.Qdisc
	switch kind {
	case "htb":
		q = netlink.NewHtb(attrs)
	case "clsact":
		attrs.Parent = netlink.HANDLE_CLSACT
		attrs.Handle = netlink.MakeHandle(0xffff, 0)
		q = &netlink.GenericQdisc{QdiscAttrs: attrs, QdiscType: "clsact"}
	case "tbf":
		q = &netlink.Tbf{QdiscAttrs: attrs, Rate: 1_000_000, Limit: 10000, Buffer: 10000}
	case "netem":
		q = netlink.NewNetem(attrs, netlink.NetemQdiscAttrs{Latency: 1000})
	case "prio":
		q = netlink.NewPrio(attrs)
	case "fq":
		q = netlink.NewFq(attrs)
	case "fq_codel":
		q = netlink.NewFqCodel(attrs)
	case "sfq":
		q = &netlink.Sfq{QdiscAttrs: attrs}
	default:
		q = &netlink.GenericQdisc{QdiscAttrs: attrs, QdiscType: kind}
	}
	err := netlink.QdiscReplace(q)
	if err == nil {
		_ = netlink.QdiscDel(q)
		return nil
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return errors.New("not in this kernel (and modules cannot be loaded)")
	case errors.Is(err, unix.EINVAL):
		return nil // the kind exists; it only disliked our empty options
	}
	return err
}

// inScratchNetns runs fn on a locked thread inside a new, unnamed namespace.
func inScratchNetns(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the thread is discarded, not unlocked: it stays in the scratch namespace
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			errc <- fmt.Errorf("new netns: %w", err)
			return
		}
		defer ns.Close()
		err = fn()
		if e := netns.Set(orig); e == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func probeBPF() []Feature {
	var out []Feature
	add := func(name, fallback string, needed bool, err error) {
		f := Feature{Name: name, Group: "bpf", Present: err == nil, Fallback: fallback, Needed: needed}
		if err != nil {
			f.Detail = err.Error()
		}
		out = append(out, f)
	}
	add("bpf/prog/sched_cls", "", true, ebpffeatures.HaveProgramType(ebpf.SchedCLS))
	add("bpf/prog/sock_ops", "lanes by cookie unavailable: classifier uses 3-tuple, cgroup, uid, DSCP only; no per-socket TCP settings or cwnd caps", false, ebpffeatures.HaveProgramType(ebpf.SockOps))
	add("bpf/prog/cgroup_sockopt", "a background app that sets its own congestion control after connect keeps it", false, ebpffeatures.HaveProgramType(ebpf.CGroupSockopt))
	add("bpf/prog/cgroup_sysctl", "the congestion control allow-list is read again every 5 s, not at each write of the sysctl", false, ebpffeatures.HaveProgramType(ebpf.CGroupSysctl))
	add("bpf/prog/tracepoint", "TCP monitor samples with sock_diag only (no per-ACK events)", false, ebpffeatures.HaveProgramType(ebpf.TracePoint))
	add("bpf/prog/struct_ops", "no BPF congestion control: cwnd caps only clamp growth (see bpf/tcp congestion control)", false, ebpffeatures.HaveProgramType(ebpf.StructOps))
	// The classifier's background non-TCP events (5.8+; lanes needs 5.10).
	add("bpf/map/ringbuf", "none: the classifier wakes the background QUIC/UDP controller through it", true, ebpffeatures.HaveMapType(ebpf.RingBuf))
	add("bpf/helper/skb_cgroup_id", "lanes by cgroup resolved at connect by sock_ops only", false, ebpffeatures.HaveProgramHelper(ebpf.SchedCLS, asm.FnSkbCgroupId))
	add("bpf/helper/get_socket_cookie(skb)", "", false, ebpffeatures.HaveProgramHelper(ebpf.SchedCLS, asm.FnGetSocketCookie))
	add("bpf/helper/sock_ops setsockopt", "", false, ebpffeatures.HaveProgramHelper(ebpf.SockOps, asm.FnSetsockopt))
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	add("bpf/btf", "", false, err)
	// How struct_ops congestion controls are registered: a bpf_link (6.4+)
	// dies with the daemon; before, a map update outlives a killed one.
	add(StructOpsLinkFeature, "congestion controls registered by map update (5.6+): a SIGKILLed daemon leaves them registered until its restart, `lanes reset` or the sweep of its vanished namespace removes them (sockets already on them keep them either way)", false, structops.LinkSupported())
	// rLEDBAT's receive window from sock_ops (5.11+).
	add(WindowClampFeature, "no rLEDBAT in BPF: the daemon runs it instead (pidfd_getfd, see below), else background downloads keep the system's receive window (LEDBAT++ and the yield still hold background uploads)", false, ProbeWindowClamp())
	// The lanes congestion control (CUBIC plus an enforced cwnd clamp):
	// loaded, registered under a scratch name and unregistered again.
	add(CapCCFeature, "cwnd caps are only a clamp: a capped CUBIC socket that is not cwnd-limited keeps its larger cwnd", false, capcc.Probe())
	// The lanes objects themselves, loaded as the datapath loads them (CO-RE
	// relocated against this kernel, verified), then unloaded.
	add(ClassifierFeature, "none: the classifier is the datapath", true, classifier.Probe())
	add(SockopsFeature, "no per-socket lanes: packets are classified one by one (3-tuple, destination, exact cgroup, uid, DSCP); no cgroup ancestors, NOTSENT_LOWAT, cwnd caps or LEDBAT++ switching", false, sockops.Probe())
	add(TCPEventsFeature, "TCP monitor samples with sock_diag only (no per-ACK events)", false, tcpevents.Probe())
	// The monitor's sampling backend (needs iter/tcp and the tracing
	// socket cookie helper, 5.12+).
	add(TCPIterFeature, "TCP monitor, coop controller and dashboard sample through sock_diag (one netlink message per socket)", false, tcpiter.Probe())
	// Its tracked mode (sk_storage from tracing programs, 5.11; the
	// sk_storage map iterator; tp_btf): samples read changed sockets only.
	add(TCPTrackFeature, "TCP monitor, coop controller and dashboard walk every socket on every sample (bpf-iter or sock_diag)", false, tcpiter.ProbeTracker())
	// Its walks' touches of the next socket (bpf_rdonly_cast of untyped
	// memory, 6.17+): the program without them runs where they fail.
	add(TCPPrefetchFeature, "the monitor's full walks (its first sample, bpf-iter's samples) run without touching the next socket: ~10 % slower at 100,000 sockets", false, tcpiter.ProbePrefetch())
	// The monitor's socket -> process scan (iter/task_file, 5.8+).
	add(SockOwnerFeature, "TCP monitor finds socket owners by reading every /proc/*/fd link (~3.6 us a descriptor)", false, sockowner.Probe())
	// Process events from the scheduler's tracepoints (tp_btf, ring buffer):
	// the task engine's source where the proc connector delivers none.
	add(ProcEventsFeature, "process rules (exe, comm, tasks) applied by a 1 s /proc scan where the proc connector delivers nothing (a daemon outside the initial network namespace)", false, procevents.Probe())
	// LEDBAT++ for the background lane, the same way.
	add(LedbatFeature, "background sockets keep the system congestion control; sock_ops clamps their cwnd to LEDBAT++'s window from their RTT samples (see background uploads below)", false, ledbat.Probe())
	// The kernel's own EDF for the realtime lane (a BPF qdisc: 6.16+ with
	// CONFIG_NET_SCH_BPF), loaded, registered and unregistered.
	add(EDFQdiscFeature, "realtime lane by the daemon path (its EDF queue in user space, the HTB tree below it): applications use the lanes client instead of plain SO_TXTIME", false, edfqdisc.Probe())
	for i := range out {
		if n := out[i].Name; (n == CapCCFeature || n == LedbatFeature || n == EDFQdiscFeature) && out[i].Present {
			out[i].Detail = "registered by " + structops.Auto.Resolve().String()
		}
	}
	return out
}

// probeCgroupV2: mounted here, or only known to the kernel (a fresh /sys,
// as under `ip netns exec`), where the daemon mounts its own.
func probeCgroupV2() Feature {
	f := Feature{Name: "cgroup/v2", Group: "system", Present: true, Detail: CgroupV2Mount(),
		Fallback: "no cgroup lanes: `lanes run` and cgroup rules unavailable; 3-tuple, uid and DSCP rules still work"}
	if f.Detail == "" {
		f.Present = CgroupV2Kernel()
		if f.Present {
			f.Detail = "not mounted in this mount namespace (a fresh /sys, as under ip netns exec): the daemon mounts its own"
		}
	}
	return f
}

// UDPDiagFeature names UDP's sock_diag (udp_diag: CONFIG_INET_UDP_DIAG, a
// module on most distributions).
const UDPDiagFeature = "sock_diag/udp"

// probeUDPDiag dumps this namespace's UDP sockets as the daemon does.
func probeUDPDiag() Feature {
	f := Feature{Name: UDPDiagFeature, Group: "system",
		Fallback: "a move reaches a program's open TCP sockets only: its open UDP sockets keep their lane until they close, and lanes monitor lists no UDP flows"}
	if err := tcpmon.DumpSockets(unix.IPPROTO_UDP, func(*tcpmon.Sock) {}); err != nil {
		f.Detail = err.Error()
		return f
	}
	f.Present = true
	return f
}

func probeSystem() []Feature {
	var out []Feature
	out = append(out, probeCgroupV2())

	// BQL on each real interface.
	links, _ := filepath.Glob("/sys/class/net/*/queues/tx-0/byte_queue_limits/limit_max")
	var bql []string
	for _, l := range links {
		bql = append(bql, strings.Split(l, "/")[4])
	}
	sort.Strings(bql)
	out = append(out, Feature{Name: "bql", Group: "system", Present: len(bql) > 0, Detail: "interfaces with BQL: " + strings.Join(bql, " "),
		Fallback: "device queue shortened with a small txqueuelen instead"})

	// proc connector: subscribed as the task engine subscribes (it has no
	// kernel end outside the initial network namespace).
	pc := Feature{Name: "proc-connector", Group: "system", Fallback: "process events from the lanes process event programs (tracepoints), else a 1 s /proc scan"}
	if c, err := sched.OpenConnector(); err != nil {
		pc.Detail = err.Error()
	} else {
		c.Close()
		pc.Present = true
	}
	out = append(out, pc)

	pf := Feature{Name: PidfdFeature, Group: "system", Present: true,
		Fallback: "no rLEDBAT from the daemon: where sock_ops cannot set TCP_WINDOW_CLAMP (before 5.11) background downloads keep the system's receive window"}
	if err := ProbePidfdGetfd(); err != nil {
		pf.Present, pf.Detail = false, err.Error()
	}
	out = append(out, pf)

	out = append(out, probeUDPDiag())

	ps := Feature{Name: "tun", Group: "system", Fallback: "no lab (links are emulated on TUN devices)"}
	if fh, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		ps.Detail = err.Error()
	} else {
		fh.Close()
		ps.Present = true
	}
	out = append(out, ps)

	cc, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	out = append(out, Feature{Name: "tcp/congestion-control", Group: "system", Present: len(cc) > 0, Detail: strings.TrimSpace(string(cc))})
	return out
}
