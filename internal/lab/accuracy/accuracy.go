// Package accuracy holds the testbed's own measurements: the emulator's
// accuracy and ceiling (accuracy), its stall check, and whether TUN
// back-pressures its qdisc (tun-probe).
//
// accuracy.go: the emulator's accuracy and ceiling, as functions the tests
// assert on and as `lanes lab run accuracy`, which prints the figures.
//
//   - fixed link: a TCP bulk upload through 10 Mbit/s, 50 ms each way;
//     goodput is measured from the TCP sequence numbers leaving the link
//     (bytes the receiver got in order, per second) over a steady window,
//     and compared with rate x 1448/1500 (MSS with timestamps / MTU); the
//     idle RTT is an ICMP ping through the same link, the reply's kernel
//     timestamp against its send (expect 100 ms; icmp-ping).
//   - trace replay: a link driven by a mahimahi trace with a queue that is
//     never empty delivers one 1,500-byte packet per opportunity; delivered
//     packets over the window vs the trace's count.
//   - stalls (stalls.go): a long fixed-rate upload counting spurious
//     retransmission timeouts and the emulator's late deliveries; the run
//     fails on any;
//   - ceiling: packets per second one link moves with GOMAXPROCS=1, and the
//     whole TUN-to-TUN path under a UDP flood with the emulator on one core.
package accuracy

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"github.com/lanes-net/lanes/internal/lab/emu"
	"github.com/lanes-net/lanes/internal/lab/testbed"
)

// FixedAccuracy is the fixed-link measurement.
type FixedAccuracy struct {
	RateBps       float64 `json:"rate_bps"`
	OneWayDelayMs float64 `json:"one_way_delay_ms"`
	GoodputBps    float64 `json:"goodput_bps"`
	ExpectedBps   float64 `json:"expected_bps"`
	GoodputErrPct float64 `json:"goodput_err_pct"`
	// BusyFraction is the share of the window the link's serialiser had
	// something to send; BusyGoodputErrPct compares the goodput with the
	// payload rate over that share: the emulator's own error, apart from
	// a sender or receiver that a loaded machine ran late.
	BusyFraction      float64   `json:"busy_fraction"`
	BusyGoodputErrPct float64   `json:"busy_goodput_err_pct"`
	RTTms             []float64 `json:"rtt_ms"`
	RTTMedianMs       float64   `json:"rtt_median_ms"`
	RTTErrMs          float64   `json:"rtt_err_ms"` // median - 2 x delay
	Window            float64   `json:"window_s"`
	UpStats           emu.LinkStats
	Environment       *testbed.Environment `json:"-"` // of the testbed, captured after the traffic
}

// MeasureFixedLink measures goodput and idle RTT through a fixed-rate link.
func MeasureFixedLink(ctx context.Context, env *testbed.Env, rate float64, delay, window time.Duration) (*FixedAccuracy, error) {
	bed, err := testbed.NewBed(env, "cubic")
	if err != nil {
		return nil, err
	}
	defer bed.Close()
	bdp := int(rate / 8 * (2 * delay).Seconds())
	lc := emu.LinkConfig{Rate: rate, Delay: delay, QueueBytes: 2 * bdp}
	up, down := bed.Emu.NewUplink(lc), bed.Emu.NewDownlink(lc)
	a, err := bed.AddHost("client", "cubic", up, down, testbed.HostOpts{})
	if err != nil {
		return nil, err
	}
	srv, err := bed.AddHost("server", "cubic", bed.Emu.NewUplink(emu.LinkConfig{}), bed.Emu.NewDownlink(emu.LinkConfig{}), testbed.HostOpts{})
	if err != nil {
		return nil, err
	}
	tr := &testbed.SeqTracker{Src: a.Addr, Dport: 80}
	bed.Emu.OnUp = tr.See
	bed.Start(ctx)
	for _, args := range [][]string{{"serve", "--listen", ":80"}} {
		p, err := srv.Start(args...)
		if err != nil {
			return nil, err
		}
		if l, err := p.Line(ctx, 10*time.Second); err != nil || l != "ready" {
			return nil, fmt.Errorf("server helper %s: %q %v", args[0], l, err)
		}
	}
	res := &FixedAccuracy{RateBps: rate, OneWayDelayMs: float64(delay) / 1e6, Window: window.Seconds()}
	ping, err := a.Start("icmp-ping", "--to", srv.Addr.String(), "--count", "20", "--interval", "75ms")
	if err != nil {
		return nil, err
	}
	l, err := ping.Line(ctx, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("ping: %w", err)
	}
	if err := json.Unmarshal([]byte(l), &res.RTTms); err != nil || len(res.RTTms) == 0 {
		return nil, fmt.Errorf("ping output %q: %v", l, err)
	}
	s := append([]float64(nil), res.RTTms...)
	sort.Float64s(s)
	res.RTTMedianMs = s[len(s)/2]
	res.RTTErrMs = res.RTTMedianMs - 2*res.OneWayDelayMs

	bulk, err := a.Start("bulk", "--url", "http://"+srv.Addr.String()+":80")
	if err != nil {
		return nil, err
	}
	if _, err := bulk.Line(ctx, 10*time.Second); err != nil {
		return nil, fmt.Errorf("bulk: %w", err)
	}
	warm := 4 * time.Second
	if err := testbed.SleepCtx(ctx, warm); err != nil {
		return nil, err
	}
	s1, t1, idle1 := tr.Value(), time.Now(), up.Stats().Idle
	if err := testbed.SleepCtx(ctx, window); err != nil {
		return nil, err
	}
	s2, t2, idle2 := tr.Value(), time.Now(), up.Stats().Idle
	res.GoodputBps = float64(s2-s1) * 8 / t2.Sub(t1).Seconds()
	res.ExpectedBps = rate * 1448 / 1500
	res.GoodputErrPct = (res.GoodputBps - res.ExpectedBps) / res.ExpectedBps * 100
	res.BusyFraction = 1 - min(1, max(0, (idle2-idle1).Seconds()/t2.Sub(t1).Seconds()))
	busyBps := res.ExpectedBps * res.BusyFraction
	res.BusyGoodputErrPct = (res.GoodputBps - busyBps) / busyBps * 100
	res.UpStats = up.Stats()
	res.Environment = testbed.CaptureEnvironment(bed.Topo, env, nil)
	return res, nil
}

// TraceAccuracy is the trace-replay measurement.
type TraceAccuracy struct {
	Trace     string  `json:"trace"`
	Window    float64 `json:"window_s"`
	Expected  uint64  `json:"expected_opportunities"`
	Delivered uint64  `json:"delivered_packets"` // packets that left at an opportunity inside the window
	ErrPct    float64 `json:"err_pct"`
	// LostOpportunities elapsed while packets were waiting yet carried
	// nothing: an emulator that skips opportunities when it wakes late.
	LostOpportunities uint64 `json:"lost_opportunities"`
	// WallDelivered counts the callbacks that ran before the window ended
	// on the wall clock: it differs from Delivered by how late the
	// emulator's goroutine ran at the window's end (machine load).
	WallDelivered uint64 `json:"wall_delivered_packets"`
}

// MeasureTrace keeps a trace-driven link backlogged with 1,500-byte packets
// for window and compares the packets that left inside the window with the
// trace's opportunities. The queue is filled before the link starts, so a
// producer that a loaded machine runs late can never leave the link idle
// (that would lose opportunities to the harness, not to the emulator). Each
// packet's place in the queue is its opportunity: packet i leaves at the
// trace's opportunity i, so the window holds exactly the packets with an
// index below the trace's count unless the emulator skipped opportunities,
// which LostOpportunities counts.
func MeasureTrace(ctx context.Context, tr *emu.Trace, window time.Duration) (*TraceAccuracy, error) {
	exp := tr.Count(0, window+time.Nanosecond)
	n := int(exp + exp/10 + 64) // stays backlogged past the window
	var inWindow, wall atomic.Uint64
	var deadline atomic.Int64
	deadline.Store(math.MaxInt64)
	l := emu.NewLink(emu.LinkConfig{Trace: tr}, func(_ []byte, meta any) {
		if uint64(meta.(int)) < exp {
			inWindow.Add(1)
		}
		if time.Now().UnixNano() < deadline.Load() {
			wall.Add(1)
		}
	})
	pkt := make([]byte, emu.OpportunityBytes)
	for i := range n {
		l.Enqueue(pkt, i)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	for l.Base().IsZero() {
		time.Sleep(time.Millisecond)
	}
	base := l.Base()
	deadline.Store(base.Add(window).UnixNano())
	err := testbed.SleepCtx(ctx, time.Until(base.Add(window+200*time.Millisecond)))
	cancel()
	<-done
	if err != nil {
		return nil, err
	}
	st := l.Stats()
	got := inWindow.Load()
	return &TraceAccuracy{Trace: tr.Name, Window: window.Seconds(), Expected: exp, Delivered: got,
		ErrPct:            (float64(got) - float64(exp)) / float64(exp) * 100,
		LostOpportunities: st.Opportunities - st.UsedOpportunities, WallDelivered: wall.Load()}, nil
}

// Ceiling is the emulator's own throughput limit.
type Ceiling struct {
	PacketsPerSec float64 `json:"packets_per_s"`
	PacketSize    int     `json:"packet_size"`
	Gbps          float64 `json:"gbit_per_s"`
}

// MeasureCeiling pushes packets through one link (rate 1 Tbit/s, 1 ms
// delay: the full serialiser and delay-line path) with GOMAXPROCS=1.
func MeasureCeiling(ctx context.Context, dur time.Duration, size int) Ceiling {
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	var out atomic.Uint64
	l := emu.NewLink(emu.LinkConfig{Rate: 1e12, Delay: time.Millisecond, QueuePackets: 4096}, func(_ []byte, _ any) { out.Add(1) })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go l.Run(ctx)
	pkt := make([]byte, size)
	start := time.Now()
	n0 := out.Load()
	for time.Since(start) < dur && ctx.Err() == nil {
		for i := 0; i < 256; i++ {
			l.Enqueue(pkt, nil)
		}
		runtime.Gosched()
	}
	pps := float64(out.Load()-n0) / time.Since(start).Seconds()
	return Ceiling{PacketsPerSec: pps, PacketSize: size, Gbps: pps * float64(size) * 8 / 1e9}
}

// MeasureTUNCeiling measures the whole path (TUN read, uplink, routing,
// downlink, TUN write) with the emulator on one core (GOMAXPROCS=1): a
// helper floods UDP from one host to another through links of 100 Gbit/s
// and 1 ms; packets per second delivered to the receiver's TUN.
func MeasureTUNCeiling(ctx context.Context, env *testbed.Env, dur time.Duration, size int) (Ceiling, error) {
	// a flood: at real-time priority it would hold a core from the rest of
	// the machine for the whole measurement
	normal := *env
	normal.RealTime = 0
	bed, err := testbed.NewBed(&normal, "")
	if err != nil {
		return Ceiling{}, err
	}
	defer bed.Close()
	fast := emu.LinkConfig{Rate: 100e9, Delay: time.Millisecond, QueuePackets: 10000}
	a, err := bed.AddHost("sender", "", bed.Emu.NewUplink(fast), bed.Emu.NewDownlink(emu.LinkConfig{}), testbed.HostOpts{TxQueueLen: 1000})
	if err != nil {
		return Ceiling{}, err
	}
	down := bed.Emu.NewDownlink(fast)
	b, err := bed.AddHost("receiver", "", bed.Emu.NewUplink(emu.LinkConfig{}), down, testbed.HostOpts{})
	if err != nil {
		return Ceiling{}, err
	}
	old := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(old)
	bed.Start(ctx)
	p, err := a.Start("blast", "--to", b.Addr.String()+":9", "--for", (dur + time.Second).String(), "--size", fmt.Sprint(size-28))
	if err != nil {
		return Ceiling{}, err
	}
	if err := testbed.SleepCtx(ctx, 500*time.Millisecond); err != nil {
		return Ceiling{}, err
	}
	n0, t0 := down.Stats().OutPackets, time.Now()
	if err := testbed.SleepCtx(ctx, dur); err != nil {
		return Ceiling{}, err
	}
	pps := float64(down.Stats().OutPackets-n0) / time.Since(t0).Seconds()
	p.Stop()
	return Ceiling{PacketsPerSec: pps, PacketSize: size, Gbps: pps * float64(size) * 8 / 1e9}, nil
}

func init() {
	testbed.Register(testbed.Experiment{Name: "accuracy", Summary: "emulator accuracy (fixed link goodput and RTT, trace replay) and its ceiling",
		Quick: "5 s measurement windows",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			rate := fs.Float64("rate", 10e6, "fixed link rate, bits/s")
			delay := fs.Duration("delay", 50*time.Millisecond, "one-way delay")
			window := fs.Duration("window", 10*time.Second, "measurement window")
			trace := fs.String("trace", "TMobile-UMTS-driving.up", "trace for the replay check, a name in the traces folder or a path")
			stallRate := fs.Float64("stall-rate", 20e6, "stall check: fixed link rate, bits/s")
			stallDelay := fs.Duration("stall-delay", 128*time.Millisecond, "stall check: one-way delay")
			stallDur := fs.Duration("stall-duration", 60*time.Second, "stall check: length of the upload")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				r := &testbed.Result{Experiment: "accuracy", Started: time.Now(),
					Params: map[string]any{"rate_bps": *rate, "delay": delay.String(), "window": window.String(), "trace": *trace}}
				if env.Quick {
					*window, *stallDur = 5*time.Second, 20*time.Second
				}
				env.Printf("fixed link %.1f Mbit/s, %v each way: goodput and idle RTT...\n", *rate/1e6, *delay)
				fa, err := MeasureFixedLink(ctx, env, *rate, *delay, *window)
				if err != nil {
					return nil, err
				}
				tr, err := testbed.LoadTrace(*trace)
				if err != nil {
					return nil, err
				}
				env.Printf("trace replay %s...\n", *trace)
				ta, err := MeasureTrace(ctx, tr, *window)
				if err != nil {
					return nil, err
				}
				env.Printf("stall check: %.0f Mbit/s, %v each way, %v of upload...\n", *stallRate/1e6, *stallDelay, *stallDur)
				sc, err := MeasureStalls(ctx, env, *stallRate, *stallDelay, *stallDur)
				if err != nil {
					return nil, fmt.Errorf("stall check: %w", err)
				}
				r.Failures = append(r.Failures, sc.Failures()...)
				env.Printf("ceiling...\n")
				c := MeasureCeiling(ctx, 2*time.Second, 1500)
				tc, err := MeasureTUNCeiling(ctx, env, 3*time.Second, 1500)
				if err != nil {
					return nil, fmt.Errorf("TUN ceiling: %w", err)
				}
				tcs, err := MeasureTUNCeiling(ctx, env, 3*time.Second, 100)
				if err != nil {
					return nil, fmt.Errorf("TUN ceiling: %w", err)
				}
				r.Tables = []testbed.Table{{Title: "Emulator accuracy", Columns: []string{"check", "measured", "expected", "error", "target"},
					Rows: [][]string{
						{"TCP goodput", fmt.Sprintf("%.3f Mbit/s", fa.GoodputBps/1e6), fmt.Sprintf("%.3f Mbit/s", fa.ExpectedBps/1e6), fmt.Sprintf("%+.2f%%", fa.GoodputErrPct), "report (the hosts' share of it)"},
						{"TCP goodput while the link was busy", fmt.Sprintf("%.3f Mbit/s", fa.GoodputBps/1e6), fmt.Sprintf("%.3f Mbit/s x %.3f busy", fa.ExpectedBps/1e6, fa.BusyFraction), fmt.Sprintf("%+.2f%%", fa.BusyGoodputErrPct), "within 5%"},
						{"idle RTT (median)", fmt.Sprintf("%.2f ms", fa.RTTMedianMs), fmt.Sprintf("%.0f ms", 2*fa.OneWayDelayMs), fmt.Sprintf("%+.2f ms", fa.RTTErrMs), "within 1 ms"},
						{"trace opportunities", fmt.Sprintf("%d", ta.Delivered), fmt.Sprintf("%d", ta.Expected), fmt.Sprintf("%+.2f%%", ta.ErrPct), "within 1%"},
						{"trace opportunities lost while backlogged", fmt.Sprintf("%d", ta.LostOpportunities), "0", "", "0"},
						{"trace packets out by the wall-clock end", fmt.Sprintf("%d", ta.WallDelivered), fmt.Sprintf("%d", ta.Expected), fmt.Sprintf("%+d", int64(ta.WallDelivered)-int64(ta.Expected)), "report (lateness under load)"},
						{"stall check: spurious RTOs", fmt.Sprintf("%d (RTOs %d)", sc.SpuriousRTOs, sc.Timeouts), "0", "", "0 (fails)"},
						{"stall check: emulator stalls", fmt.Sprintf("%d (%d pkts late, worst %v)", sc.StallEvents, sc.LatePackets, sc.MaxLate.Round(100*time.Microsecond)),
							"0", fmt.Sprintf("real-time: %v", sc.RealTime), fmt.Sprintf("0 stretches >= %v late (fails)", emu.StallLate)},
						{"ceiling, link alone (1 core, 1500 B)", fmt.Sprintf("%.0f pkt/s", c.PacketsPerSec), "", fmt.Sprintf("%.2f Gbit/s", c.Gbps), "report"},
						{"ceiling, TUN to TUN (1 core, 1500 B)", fmt.Sprintf("%.0f pkt/s", tc.PacketsPerSec), "", fmt.Sprintf("%.2f Gbit/s", tc.Gbps), "report"},
						{"ceiling, TUN to TUN (1 core, 100 B)", fmt.Sprintf("%.0f pkt/s", tcs.PacketsPerSec), "", fmt.Sprintf("%.2f Gbit/s", tcs.Gbps), "report"},
					}}}
				r.Data = map[string]any{"fixed": fa, "trace": ta, "stalls": sc, "ceiling_link": c, "ceiling_tun_1500": tc, "ceiling_tun_100": tcs}
				r.Environment = fa.Environment
				r.Duration = time.Since(r.Started)
				return r, nil
			}
		}})
}
