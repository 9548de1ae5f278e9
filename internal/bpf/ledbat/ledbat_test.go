// ledbat_test.go checks the LEDBAT++ congestion control in the kernel: it
// loads (verifier, struct_ops), registers under its name (through a
// bpf_link, and by map update as before 6.4) and is gone after Close; and
// its arithmetic (ledbat_core.h, run through BPF_PROG_TEST_RUN by the socket
// filter ledbat_step.c) matches the Go reference model
// (internal/ledbat) step by step, on scripted and on random event sequences.
package ledbat

import (
	"math/rand"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/lanes-net/lanes/internal/bpf/structops"
	model "github.com/lanes-net/lanes/internal/ledbat"
	"github.com/lanes-net/lanes/internal/testutil"
)

func TestLoadRegisterClose(t *testing.T) {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []structops.Mode{structops.Link, structops.Update} {
		t.Run(mode.String(), func(t *testing.T) { loadRegisterClose(t, mode) })
	}
}

func loadRegisterClose(t *testing.T, mode structops.Mode) {
	if mode == structops.Link && structops.LinkSupported() != nil {
		t.Skip(structops.LinkSupported())
	}
	name := structops.Name("ledbat-test", "eth0", mode.String())
	c, err := Load(name, 25*time.Millisecond, ShareRule, mode, nil)
	if structops.Unsupported(err) {
		t.Skipf("degraded: lanes doctor reports LEDBAT++ absent on this kernel (the daemon clamps background cwnd from sock_ops instead): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != mode {
		t.Errorf("registered by %v, asked %v", c.Mode, mode)
	}
	if ok, err := structops.Registered(name); err != nil || !ok {
		t.Errorf("%s registered = %v, %v", name, ok, err)
	}
	if _, err := Load(name, 25*time.Millisecond, ShareRule, mode, nil); err == nil {
		t.Error("a second registration of the same name succeeded")
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if ok, _ := structops.Registered(name); ok {
		t.Errorf("%s still registered after Close", name)
	}
	if err := Probe(); err != nil {
		t.Errorf("Probe: %v", err)
	}
	if _, err := Load(name, 0, ShareRule, structops.Auto, nil); err == nil {
		t.Error("a zero target was accepted")
	}
}

// kernelStep runs one operation of ledbat_core.h in the kernel.
type kernelStep struct {
	t    *testing.T
	prog *ebpf.Program
	m    *ebpf.Map
	s    StepLedbatStep
}

func newKernelStep(t *testing.T) *kernelStep {
	testutil.RequireRoot(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	var objs StepObjects
	if err := LoadStepObjects(&objs, nil); err != nil {
		t.Fatalf("load ledbat_step: %v", err)
	}
	t.Cleanup(func() { objs.Close() })
	return &kernelStep{t: t, prog: objs.LedbatRun, m: objs.LanesLedbatStep}
}

const (
	opInit = iota
	opRTT
	opAck
	opLoss
	opSlowdownNow
	opShare
	opKeepRate
)

func (k *kernelStep) run(op, arg uint32, now uint64, srtt uint32, limited bool) {
	k.t.Helper()
	k.s.Op, k.s.Arg, k.s.NowUs, k.s.SrttUs, k.s.Limited = op, arg, now, srtt, 0
	if limited {
		k.s.Limited = 1
	}
	if err := k.m.Put(uint32(0), k.s); err != nil {
		k.t.Fatal(err)
	}
	// A socket filter's test run wants a packet of at least an Ethernet
	// header; the program reads only the map.
	ret, err := k.prog.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
	if err != nil || ret != 0 {
		k.t.Fatalf("ledbat_step op %d: ret %d, %v", op, ret, err)
	}
	if err := k.m.Lookup(uint32(0), &k.s); err != nil {
		k.t.Fatal(err)
	}
}

// pair drives the kernel and the model with the same events and compares.
type pair struct {
	t *testing.T
	k *kernelStep
	m model.State
	w model.Window
	n int
}

func newPair(t *testing.T, target uint32, now uint64, cwnd uint32) *pair {
	p := &pair{t: t, k: newKernelStep(t), w: model.Window{Cwnd: cwnd, Ssthresh: model.SsthreshInfinite}}
	p.k.s.Win.Cwnd, p.k.s.Win.Ssthresh = p.w.Cwnd, p.w.Ssthresh
	p.k.run(opInit, target, now, 0, false)
	p.m = model.New(target, now)
	p.check("init")
	return p
}

func (p *pair) rtt(rtt uint32, now uint64) { p.delay(rtt, 0, now) }

// delay is a delay sample and the part of its round trip not the flow's.
func (p *pair) delay(delay, other uint32, now uint64) {
	p.k.run(opRTT, delay, now, other, false)
	p.m.Delay(delay, other, now)
	p.check("rtt")
}

// keepRate is a delay sample followed by the window's scaling by the
// change of its round trip's part not its own (ledbat_keep_rate), beside a
// present foreground or alone.
func (p *pair) keepRate(delay, other uint32, now uint64, present bool) {
	was := p.m.SOther
	p.delay(delay, other, now)
	p.k.run(opKeepRate, was, now, 0, present)
	model.KeepRate(&p.m, &p.w, was, present)
	p.check("keep-rate")
}

func (p *pair) ack(acked uint32, now uint64, srtt uint32, limited bool) {
	p.k.run(opAck, acked, now, srtt, limited)
	p.m.Ack(&p.w, acked, uint32(now), srtt, limited)
	p.check("ack")
}

func (p *pair) loss(now uint64, srtt uint32) {
	p.k.run(opLoss, 0, now, srtt, false)
	p.w.Ssthresh = p.m.Loss(p.w.Cwnd, uint32(now), srtt)
	p.check("loss")
}

func (p *pair) slowdownNow(now uint64) {
	p.k.run(opSlowdownNow, 0, now, 0, false)
	p.m.SlowdownNow(uint32(now))
	p.check("slowdown-now")
}

func (p *pair) share(target, flags uint32) {
	p.k.s.Share = flags
	p.k.run(opShare, target, 0, 0, false)
	p.m.Share(target, flags)
	p.check("share")
}

func (p *pair) check(what string) {
	p.t.Helper()
	p.n++
	k := p.k.s
	ks := model.State{Base: k.St.Base, Cur: k.St.Cur, Bucket: k.St.Bucket, Samples: k.St.Samples,
		Acc: k.St.Acc, Phase: model.Phase(k.St.Phase), Flags: uint32(k.St.Flags), TargetUS: k.St.TargetUs,
		THoldEnd: k.St.T_holdEnd, TSlowdown: k.St.T_slowdown, TNext: k.St.T_next, TSlot: k.St.T_slot,
		SOther: k.St.Sother}
	if ks != p.m || k.Win.Cwnd != p.w.Cwnd || k.Win.Ssthresh != p.w.Ssthresh {
		p.t.Fatalf("step %d (%s): kernel and model differ\nkernel %+v win %+v\nmodel  %+v win %+v",
			p.n, what, ks, k.Win, p.m, p.w)
	}
	if k.BaseUs != p.m.BaseDelay() || k.CurrentUs != p.m.CurrentDelay() ||
		k.GainDiv != model.GainDiv(p.m.TargetUS, p.m.BaseDelay()) {
		p.t.Fatalf("step %d (%s): kernel base/current/gain %d/%d/%d, model %d/%d/%d", p.n, what,
			k.BaseUs, k.CurrentUs, k.GainDiv, p.m.BaseDelay(), p.m.CurrentDelay(),
			model.GainDiv(p.m.TargetUS, p.m.BaseDelay()))
	}
}

// TestKernelMatchesModelBottleneck plays a flow against a simulated
// bottleneck queue (base 20 ms, 60 packets of queue per 10 ms of delay):
// slow start, its exit at 3/4 of the target, the decrease above the target,
// a slowdown and its restart, a join slowdown and its restart, a loss;
// kernel and model agree at every step,
// and the phases the draft names all occur.
func TestKernelMatchesModelBottleneck(t *testing.T) {
	const target, base, bdp = 25_000, 20_000, 50
	now := uint64(3_600_000_000) // one hour into the clock
	p := newPair(t, target, now, 10)
	seen := map[model.Phase]bool{}
	for i := 0; i < 4000; i++ {
		queue := int(p.w.Cwnd) - bdp
		rtt := uint32(base + max(queue, 0)*10_000/60)
		now += uint64(rtt) / 8
		p.rtt(rtt, now)
		p.ack(2, now, rtt, true)
		if i == 2000 {
			p.slowdownNow(now) // a new flow on the host
		}
		if i == 3000 {
			p.loss(now, rtt)
		}
		seen[p.m.Phase] = true
	}
	for _, ph := range []model.Phase{model.SlowStart, model.Avoid, model.Hold, model.Restart} {
		if !seen[ph] {
			t.Errorf("phase %v never reached in %d steps", ph, p.n)
		}
	}
}

// TestKernelMatchesModelRandom feeds random RTTs (including the minute
// buckets ageing and a clock wrap), acks, limits, losses and joins.
func TestKernelMatchesModelRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	for run := 0; run < 5; run++ {
		now := uint64(1<<32) - uint64(rng.Intn(60_000_000)) // near the 32-bit wrap
		p := newPair(t, uint32(5_000+rng.Intn(100_000)), now, uint32(2+rng.Intn(100)))
		for i := 0; i < 1500; i++ {
			now += uint64(rng.Intn(200_000))
			if rng.Intn(200) == 0 {
				now += uint64(rng.Intn(5)) * model.BucketUS
			}
			srtt := uint32(1_000 + rng.Intn(300_000))
			switch r := rng.Intn(100); {
			case r < 45:
				p.keepRate(uint32(1+rng.Intn(400_000)), uint32(rng.Intn(100_000)), now, rng.Intn(4) != 0)
			case r < 92:
				p.ack(uint32(rng.Intn(64)), now, srtt, rng.Intn(4) != 0)
			case r < 96:
				p.share(uint32(1_000+rng.Intn(30_000)), uint32(rng.Intn(64)))
			case r < 98:
				p.slowdownNow(now)
			default:
				p.loss(now, srtt)
			}
		}
	}
}

// TestKernelMatchesModelDenseJitter: ACKs every 0-2 ms on a 40 ms base
// with up to 30 ms of delivery jitter, so most samples join a running slot
// of the current-delay filter and some end one: kernel and model agree at
// every step, and the filter did merge samples into slots (it is not the
// minimum of the last 4 samples).
func TestKernelMatchesModelDenseJitter(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	now := uint64(1<<32) - 3_000_000 // the 32-bit clock wraps during the run
	p := newPair(t, 15_000, now, 10)
	merged := 0
	for i := 0; i < 3000; i++ {
		now += uint64(rng.Intn(2_000))
		slot := p.m.TSlot
		p.rtt(uint32(40_000+rng.Intn(30_000)), now)
		if p.m.TSlot == slot {
			merged++
		}
		p.ack(1, now, 50_000, true)
	}
	if merged < 1000 {
		t.Errorf("%d of 3000 samples joined a running slot, want most", merged)
	}
}

// TestKernelMatchesModelSharing plays a flow against a simulated bottleneck
// (base 40 ms) that a present foreground comes to and leaves every 3 s
// (the share target and rule on, then the flow's own target): kernel and
// model agree at every step, and while sharing the periodic slowdowns wait
// (no slowdown begins while the share rule is on).
func TestKernelMatchesModelSharing(t *testing.T) {
	const target, share, base, bdp = 10_000, 2_500, 40_000, 40
	now := uint64(1<<32) - 20_000_000 // the 32-bit clock wraps during the run
	p := newPair(t, target, now, 10)
	rng := rand.New(rand.NewSource(5))
	slowdowns, sharedSlowdowns := 0, 0
	for i := 0; i < 6000; i++ {
		queue := int(p.w.Cwnd) - bdp
		rtt := uint32(base + max(queue, 0)*1_000 + rng.Intn(4_000))
		now += uint64(rtt) / 16
		sharing := (now/3_000_000)%2 == 1
		if sharing {
			p.share(share, ShareRule)
		} else {
			p.share(target, 0)
		}
		p.rtt(rtt, now)
		phase := p.m.Phase
		p.ack(1, now, rtt, true)
		if phase == model.Avoid && p.m.Phase == model.Hold {
			slowdowns++
			if sharing {
				sharedSlowdowns++
			}
		}
	}
	if slowdowns == 0 || sharedSlowdowns != 0 {
		t.Errorf("%d slowdowns, %d of them while sharing; want some, none while sharing", slowdowns, sharedSlowdowns)
	}
}

// TestKernelMatchesModelOtherDirection plays a flow whose ACKs wait behind
// another direction's queue (base 10 ms, its own queue from the part of its
// window on its own way, each round trip 15-90 ms longer than the delay it
// is fed), with the rule (the window scaled by the round trip not its own)
// and with the one it replaced (FlagRateUnkept: the growth scaled): kernel
// and model agree at every step, and the window grows in congestion
// avoidance below the target.
func TestKernelMatchesModelOtherDirection(t *testing.T) {
	for _, flags := range []uint32{0, model.FlagRateUnkept} {
		otherDirection(t, flags)
	}
}

func otherDirection(t *testing.T, flags uint32) {
	const target, base, bdp = 10_000, 10_000, 9
	now := uint64(1<<32) - 5_000_000 // the 32-bit clock wraps during the run
	p := newPair(t, target, now, 10)
	p.m.Flags |= flags
	p.k.s.St.Flags |= uint16(flags)
	rng := rand.New(rand.NewSource(3))
	grown := 0
	for i := 0; i < 4000; i++ {
		own := int(p.w.Cwnd) * base / (base + int(p.m.SOther))
		delay := uint32(base + max(own-bdp, 0)*1_200)
		other := uint32(15_000 + rng.Intn(75_000))
		srtt := delay + other
		now += uint64(srtt) / uint64(p.w.Cwnd)
		p.keepRate(delay, other, now, true)
		cwnd, avoid := p.w.Cwnd, p.m.Phase == model.Avoid
		p.ack(1, now, srtt, true)
		if avoid && p.m.QueuingDelay() < target && p.w.Cwnd > cwnd {
			grown++
		}
	}
	if grown == 0 {
		t.Errorf("flags %d: the window never grew in congestion avoidance below the target", flags)
	}
}
