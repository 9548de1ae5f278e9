// bed.go: a testbed = namespaces (topo) joined through the emulator (emu),
// with the host-side gates that give back-pressure (topo.Gate).
//
//	phone ns                    lab process                      server ns
//	app -> qdisc(gate) -> up0 ==TUN==> [phone.Up] -> route -> [srv.Down] ==TUN==> up0 -> app
//	app <- up0 <==TUN== [phone.Down] <- route <- [srv.Up] <==TUN== up0 <- app
package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/topo"
	"github.com/lanes-net/lanes/internal/traces"
)

// SleepCtx sleeps for d, or until ctx ends (its error).
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TUNName is the uplink device of every lab host.
const TUNName = "up0"

// GateSpec asks for a host-side gate on the host's uplink (topo.Gate).
type GateSpec struct {
	Burst int    // bytes: the emulated device-queue size
	Leaf  string // "pfifo" or "pfifo_fast"
	Limit int    // pfifo limit in packets (default 1000)
}

// HostOpts are a host's options in a bed.
type HostOpts struct {
	BackPressure bool             // emulator reads the TUN only while the uplink has room
	Prio         *emu.Prioritiser // user-space priority task before the uplink
	TxQueueLen   int              // TUN txqueuelen (0: leave the default 500)
	Gate         *GateSpec        // host-side gate (needs a rate-limited uplink)
}

// Bed is a running testbed.
type Bed struct {
	Topo  *topo.Topology
	Emu   *emu.Emulator
	Nodes map[string]*topo.Node
	Hosts map[string]*emu.Host
	Gates map[string]*topo.Gate

	GateLinks   map[string]*emu.Link
	PolicyFiles []string // temporary policy folders, removed on Close
	rtRelease   func()   // ends the process's real-time scheduling
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	closeOnce   sync.Once
}

// NewBed starts an empty bed; cc is the hosts' congestion control ("" =
// inherit the machine's default).
func NewBed(env *Env, cc string) (*Bed, error) {
	t, err := topo.New()
	if err != nil {
		return nil, err
	}
	if env != nil && env.Exe != "" {
		t.Exe = env.Exe
	}
	b := &Bed{Topo: t, Emu: emu.New(), Nodes: map[string]*topo.Node{}, Hosts: map[string]*emu.Host{},
		Gates: map[string]*topo.Gate{}, GateLinks: map[string]*emu.Link{}, rtRelease: func() {}}
	if env != nil && env.RealTime > 0 {
		// the emulator must not wait for a CPU behind the machine's other
		// work (emu/realtime.go)
		rel, err := emu.RealTimeProcess(env.RealTime)
		b.rtRelease = rel
		if err != nil {
			env.Printf("warning: the emulator runs at normal priority (real-time scheduling refused: %v); a busy machine delays its packets\n", err)
		} else {
			b.Emu.RealTime = env.RealTime
		}
	}
	return b, nil
}

// AddHost creates a host with the given links (from b.Emu.NewUplink /
// NewDownlink; pass the same link to several hosts for a shared medium).
func (b *Bed) AddHost(name, cc string, up, down *emu.Link, o HostOpts) (*topo.Node, error) {
	n, err := b.Topo.AddNode(name, cc)
	if err != nil {
		return nil, err
	}
	b.Nodes[name] = n
	h, err := b.Emu.AddHost(emu.HostSpec{Name: name, NS: n.Handle, TUN: TUNName, Addrs: nil, Up: up, Down: down,
		BackPressure: o.BackPressure, Prio: o.Prio})
	if err != nil {
		return nil, err
	}
	b.Hosts[name] = h
	if err := b.Emu.AddAddr(h, n.Addr); err != nil {
		return nil, err
	}
	if err := n.ConfigureTUN(TUNName, o.TxQueueLen); err != nil {
		return nil, err
	}
	if o.Gate != nil {
		cfg := up.Config()
		rate := cfg.Rate
		if cfg.Trace != nil {
			rate = cfg.Trace.MeanRate()
		}
		if rate <= 0 {
			return nil, fmt.Errorf("host %s: a gate needs a rate-limited uplink", name)
		}
		limit := o.Gate.Limit
		if limit <= 0 {
			limit = 1000
		}
		g, err := n.InstallGate(TUNName, rate, o.Gate.Burst, o.Gate.Leaf, limit)
		if err != nil {
			return nil, err
		}
		b.Gates[name] = g
		b.GateLinks[name] = up
	}
	return n, nil
}

// gateStep is how often a gate follows its link.
const gateStep = 20 * time.Millisecond

// Start runs the emulator and the gates' followers.
func (b *Bed) Start(ctx context.Context) {
	ctx, b.cancel = context.WithCancel(ctx)
	b.Emu.Run(ctx)
	for name, l := range b.GateLinks {
		g := b.Gates[name]
		b.wg.Add(1)
		go func(g *topo.Gate, l *emu.Link) {
			defer b.wg.Done()
			followLink(ctx, g, l)
		}(g, l)
	}
}

// followLink sets the gate, every gateStep, to the rate the link offers over
// the next gateHorizon (the trace's opportunities, or the fixed rate) minus
// what already waits in the emulator's queue, drained over that horizon:
//
//	rate = (capacity(next horizon) - 2 x emulator backlog) / horizon,
//	       at least 1/gateFloorDiv of the link's mean rate
//
// Note: HTB charges a packet's transmission time at the rate in force when
// it is sent and keeps that debt across rate changes, so the gate never
// drops to a near-zero rate for an empty stretch of trace (a 1,500-byte
// packet charged at 8 kbit/s would stall the class for 1.5 s); the horizon
// smooths the trace's one-packet granularity and the floor bounds the debt.
func followLink(ctx context.Context, g *topo.Gate, l *emu.Link) {
	cfg := l.Config()
	mean := cfg.Rate
	if cfg.Trace != nil {
		mean = cfg.Trace.MeanRate()
	}
	base := l.Base()
	for base.IsZero() {
		if SleepCtx(ctx, time.Millisecond) != nil {
			return
		}
		base = l.Base()
	}
	tick := time.NewTicker(gateStep)
	defer tick.Stop()
	for {
		var capBytes float64
		if cfg.Trace != nil {
			off := time.Since(base)
			capBytes = float64(cfg.Trace.Count(off, off+gateHorizon) * emu.OpportunityBytes)
		} else {
			capBytes = cfg.Rate / 8 * gateHorizon.Seconds()
		}
		rate := (capBytes - 2*float64(l.QueueBytes())) * 8 / gateHorizon.Seconds()
		if rate < mean/gateFloorDiv {
			rate = mean / gateFloorDiv
		}
		_ = g.SetRate(rate)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// gateFloorDiv bounds the gate's rate from below (mean / gateFloorDiv).
const gateFloorDiv = 8

// gateHorizon is how far ahead a gate looks at its link.
const gateHorizon = 200 * time.Millisecond

// Close stops the emulator and removes every namespace and process.
func (b *Bed) Close() error {
	var err error
	b.closeOnce.Do(func() {
		var errs []error
		if b.cancel != nil {
			b.cancel()
		}
		b.wg.Wait()
		b.Emu.Wait()
		b.rtRelease()
		errs = append(errs, b.Topo.Close())
		for _, d := range b.PolicyFiles {
			_ = os.RemoveAll(d)
		}
		for _, g := range b.Gates {
			g.Close()
		}
		err = errors.Join(errs...)
	})
	return err
}

// LanesAvailable reports whether bin has a daemon command.
func LanesAvailable(bin string) bool {
	if bin == "" {
		return false
	}
	out, err := exec.Command(bin, "help").CombinedOutput()
	return err == nil && strings.Contains(string(out), "daemon")
}

// LoadTrace reads a trace given by name or path.
func LoadTrace(name string) (*emu.Trace, error) {
	p, err := traces.Path(name)
	if err != nil {
		return nil, err
	}
	return emu.ParseTrace(p)
}

// TCPExt reads the TcpExt counters of a node's namespace.
func TCPExt(n *topo.Node) (map[string]int64, error) {
	out, err := n.Run("cat", "/proc/net/netstat")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(out, "\n")
	m := map[string]int64{}
	for i := 0; i+1 < len(lines); i += 2 {
		k, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(k) == 0 || k[0] != "TcpExt:" {
			continue
		}
		for j := 1; j < len(k) && j < len(v); j++ {
			var x int64
			fmt.Sscan(v[j], &x)
			m[k[j]] = x
		}
	}
	return m, nil
}
