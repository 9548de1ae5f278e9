// sim_test.go plays the model against a simulated bottleneck (a FIFO queue
// draining at a fixed rate, a fixed base RTT, one ACK per packet): what the
// draft's rules give a background flow alone (its share of the link) and two
// flows started apart (latecomer fairness), without a kernel or a clock.
package ledbat

import (
	"container/heap"
	"math"
	"math/rand"
	"testing"
)

// simFlow is one sender.
type simFlow struct {
	s        State
	w        Window
	start    float64 // s
	inflight int
	srtt     float64 // s
	acked    []int   // packets acked per 100 ms bin
	started  bool
}

// simEvent is a packet's ACK reaching its sender.
type simEvent struct {
	at, sent float64
	flow     int
	other    float64 // the wait on the ACK's way past the base (s)
}

type simQueue []simEvent

func (q simQueue) Len() int                      { return len(q) }
func (q simQueue) Less(i, j int) bool            { return q[i].at < q[j].at }
func (q simQueue) Swap(i, j int)                 { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)                   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any                     { o := *q; e := o[len(o)-1]; *q = o[:len(o)-1]; return e }
func us(t float64) uint32                        { return uint32(uint64(t*1e6 + 0.5)) }
func binOf(t float64) int                        { return int(t * 10) }
func (f *simFlow) rate(from, to float64) float64 { return sumBins(f.acked, from, to) / (to - from) }

// acknowledge counts one packet sent at sent and acked at now (in flight,
// srtt, the 100 ms bin) and returns its RTT.
func (f *simFlow) acknowledge(now, sent float64) float64 {
	f.inflight--
	rtt := now - sent
	if f.srtt == 0 {
		f.srtt = rtt
	}
	f.srtt += (rtt - f.srtt) / 8
	for len(f.acked) <= binOf(now) {
		f.acked = append(f.acked, 0)
	}
	f.acked[binOf(now)]++
	return rtt
}

func sumBins(b []int, from, to float64) float64 {
	var n float64
	for i := binOf(from); i < binOf(to) && i < len(b); i++ {
		n += float64(b[i])
	}
	return n
}

// simulate runs flows (started at starts, s) through a bottleneck of pps
// packets/s and base RTT baseS for dur seconds (unbounded queue, no loss).
func simulate(target uint32, pps, baseS, dur float64, starts ...float64) []*simFlow {
	return simulateJoins(true, target, pps, baseS, dur, starts...)
}

// simulateTrace is simulate; joins: a starting flow makes the others slow
// down (SlowdownNow, as on one host).
func simulateJoins(joins bool, target uint32, pps, baseS, dur float64, starts ...float64) []*simFlow {
	flows := make([]*simFlow, len(starts))
	for i, st := range starts {
		flows[i] = &simFlow{start: st, w: Window{Cwnd: 10, Ssthresh: SsthreshInfinite}}
	}
	var q simQueue
	lastDep := 0.0
	rng := rand.New(rand.NewSource(1))
	send := func(i int, now float64) {
		f := flows[i]
		for f.inflight < int(f.w.Cwnd) {
			arr := now + baseS/2
			dep := math.Max(arr, lastDep) + 1/pps
			lastDep = dep
			// the return path adds up to simJitter (a busy host's scheduling)
			heap.Push(&q, simEvent{at: dep + baseS/2 + simJitter*rng.Float64(), sent: now, flow: i})
			f.inflight++
		}
	}
	now := 0.0
	for now < dur {
		// the next start or ACK, whichever is first
		next, who := math.Inf(1), -1
		for i, f := range flows {
			if !f.started && f.start < next {
				next, who = f.start, i
			}
		}
		if len(q) > 0 && q[0].at < next {
			e := heap.Pop(&q).(simEvent)
			now = e.at
			f := flows[e.flow]
			rtt := f.acknowledge(now, e.sent)
			f.s.RTT(us(rtt), uint64(us(now)))
			f.s.Ack(&f.w, 1, us(now), us(f.srtt), f.inflight+1 >= int(f.w.Cwnd))
			send(e.flow, now)
			continue
		}
		if who < 0 {
			break
		}
		now = next
		f := flows[who]
		f.started = true
		f.s = New(target, uint64(us(now)))
		for _, o := range flows {
			if joins && o != f && o.started {
				o.s.SlowdownNow(us(now))
			}
		}
		send(who, now)
	}
	return flows
}

func jain(x ...float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	return s * s / (float64(len(x)) * s2)
}

// 10 Mbit/s of 1500-byte packets, 40 ms base RTT: the lab's fixed link.
const simPPS, simBase = 10e6 / 8 / 1500, 0.040

// simJitter is the most a return path adds to the base RTT, s.
const simJitter = 0.004

var simTargets = []uint32{10_000, 25_000, 40_000}

// TestSimAloneUsesTheLink: one flow keeps >= 90 % of the link, slowdowns
// included.
func TestSimAloneUsesTheLink(t *testing.T) {
	for _, tgt := range simTargets {
		f := simulate(tgt, simPPS, simBase, 40, 0)[0]
		share := f.rate(3, 40) / simPPS
		t.Logf("target %d us: alone over [3, 40) s: %.1f %% of the link", tgt, 100*share)
		if share < 0.9 {
			t.Errorf("target %d us: a flow alone used %.1f %% of the link, want >= 90 %%", tgt, 100*share)
		}
	}
}

// TestSimLatecomerFair: a second flow 30 s after the first; with the join
// signal (flows of one host) and without it (flows of two hosts, the
// periodic slowdowns alone), Jain's index of their throughputs over the
// 10 s from 5 s after the join is >= 0.9.
func TestSimLatecomerFair(t *testing.T) {
	for _, tgt := range simTargets {
		for _, joins := range []bool{true, false} {
			fl := simulateJoins(joins, tgt, simPPS, simBase, 60, 0, 30)
			a, b := fl[0].rate(35, 45), fl[1].rate(35, 45)
			j := jain(a, b)
			t.Logf("target %d us, join signal %v: %.0f %% + %.0f %%, Jain %.2f", tgt, joins, 100*a/simPPS, 100*b/simPPS, j)
			if j < 0.9 || (a+b)/simPPS < 0.9 {
				t.Errorf("target %d us, join signal %v: shares %.2f + %.2f, Jain %.2f; want Jain >= 0.9 and the link used", tgt, joins, a/simPPS, b/simPPS, j)
			}
		}
	}
}
