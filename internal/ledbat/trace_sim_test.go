// trace_sim_test.go plays the model alone against the shipped cellular
// traces (mahimahi delivery opportunities, one 1500-byte packet each): the
// uplink trace carries the data, ACKs wait for the downlink's next
// opportunity, 20 ms each way as in the lab's lbe-remote. On these links
// the delivery is bursty, so the per-ACK RTT swings by several ms with no
// standing queue; the current-delay filter must not read that as queue.
package ledbat

import (
	"bufio"
	"container/heap"
	"math"
	"os"
	"sort"
	"strconv"
	"testing"

	"github.com/lanes-net/lanes/internal/traces"
)

// traceLink is a mahimahi trace repeated forever: sorted opportunity
// times, s, and the trace's period.
type traceLink struct {
	at     []float64
	period float64
}

func loadTrace(t *testing.T, name string) *traceLink {
	t.Helper()
	p, err := traces.Path(name)
	if err != nil {
		t.Skip(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := &traceLink{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ms, err := strconv.Atoi(sc.Text())
		if err != nil {
			continue
		}
		l.at = append(l.at, float64(ms)/1000)
	}
	if len(l.at) == 0 {
		t.Fatalf("%s: no opportunities", p)
	}
	l.period = math.Max(l.at[len(l.at)-1], 0.001)
	return l
}

// opportunity k's time (k counts over the repetitions).
func (l *traceLink) time(k int) float64 {
	n := len(l.at)
	return float64(k/n)*l.period + l.at[k%n]
}

// next returns the index of the first opportunity at or after t.
func (l *traceLink) next(t float64) int {
	n := len(l.at)
	rep := int(t / l.period)
	i := sort.SearchFloat64s(l.at, t-float64(rep)*l.period)
	return rep*n + i
}

// simulateTraceProbe is simulateTraceAlone, and what a probe packet sent
// every 100 ms from 10 s would wait in the uplink's queue behind the flow
// beyond the empty queue's wait for an opportunity (s): the lab's probe
// inflation under a background upload.
func simulateTraceProbe(target uint32, up, down *traceLink, owd, dur float64) (got, offered []int, rtts, probe []float64) {
	f := &simFlow{w: Window{Cwnd: 10, Ssthresh: SsthreshInfinite}}
	f.s = New(target, 0)
	var q simQueue
	last := -1 // the uplink opportunity last used
	send := func(now float64) {
		for f.inflight < int(f.w.Cwnd) {
			k := max(up.next(now+owd), last+1)
			last = k
			ack := down.time(down.next(up.time(k)+owd)) + owd
			heap.Push(&q, simEvent{at: ack, sent: now})
			f.inflight++
		}
	}
	send(0)
	nextProbe := 10.0
	for len(q) > 0 {
		e := heap.Pop(&q).(simEvent)
		now := e.at
		if now >= dur {
			break
		}
		for ; nextProbe <= now; nextProbe += 0.1 {
			// FIFO by arrival: the probe follows what was sent before it
			free := up.next(nextProbe + owd)
			probe = append(probe, up.time(max(free, last+1))-up.time(free))
		}
		rtt := f.acknowledge(now, e.sent)
		if now >= 10 {
			rtts = append(rtts, rtt)
		}
		f.s.RTT(us(rtt), uint64(us(now)))
		f.s.Ack(&f.w, 1, us(now), us(f.srtt), f.inflight+1 >= int(f.w.Cwnd))
		send(now)
	}
	offered = make([]int, binOf(dur)+1)
	for k := 0; up.time(k) < dur; k++ {
		offered[binOf(up.time(k))]++
	}
	return f.acked, offered, rtts, probe
}

// TestSimAloneOnTraces: a flow alone, at the default target (10 ms), keeps
// at least 38 % of each LTE uplink's delivery opportunities over [10, 120)
// s (the T-Mobile trace: 41 %, Verizon: 60 %; a current delay over the
// last 4 ACKs' RTTs kept 16 % and 34 %; at 15 ms 49 % and 63 %, against
// 20 % and 43 %), and a probe behind it waits at most 70 ms more than in
// an empty queue at the 95th percentile (38 and 57 ms; the 15 and 25 ms
// targets: 43 and 72, 60 and 91 ms). The model's links are harsher than the lab's
// (every ACK waits for a downlink opportunity, so the RTT of an empty
// queue swings by tens of ms): the figures are relative, the lab's are the
// ones to quote.
func TestSimAloneOnTraces(t *testing.T) {
	for _, link := range []string{"TMobile-LTE-short", "Verizon-LTE-short"} {
		up, down := loadTrace(t, link+".up"), loadTrace(t, link+".down")
		for _, tgt := range []uint32{DefaultTargetUS, 15_000, 25_000} {
			got, offered, rtts, probe := simulateTraceProbe(tgt, up, down, 0.020, 120)
			share := sumBins(got, 10, 120) / sumBins(offered, 10, 120)
			sort.Float64s(rtts)
			sort.Float64s(probe)
			p95 := 1000 * probe[len(probe)*95/100]
			t.Logf("%s uplink, target %d us: alone %.1f %% of the opportunities, RTT p50 %.1f p95 %.1f ms, probe inflation p50 %.1f p95 %.1f ms",
				link, tgt, 100*share, 1000*rtts[len(rtts)/2], 1000*rtts[len(rtts)*95/100], 1000*probe[len(probe)/2], p95)
			if tgt != DefaultTargetUS {
				continue
			}
			if share < 0.38 {
				t.Errorf("%s uplink, default target: alone %.1f %% of the opportunities, want >= 38 %%", link, 100*share)
			}
			if p95 > 70 {
				t.Errorf("%s uplink, default target: probe inflation p95 %.1f ms, want <= 70 ms", link, p95)
			}
		}
	}
}
