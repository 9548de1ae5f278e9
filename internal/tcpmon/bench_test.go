// bench_test.go: CPU cost of the monitor.
//
//	BenchmarkSampleCPU/sockets=N  samples N idle TCP sockets (N/2 loopback
//	  connections in a fresh namespace) at 10 Hz for 3 s and reports the
//	  process CPU time (user+system, getrusage: the kernel's dump work is
//	  done in our recvmsg calls, so it is included) as percent of one core,
//	  and per sample. Target: 1,000 sockets at 10 Hz under 2 %.
//	BenchmarkEventsCPU  traces tcp_probe for one connection between two
//	  helper processes (sender writes 1448-byte chunks with TCP_NODELAY as
//	  fast as the ACKs come back) and reports the event rate, the BPF
//	  programs' run time (kernel.bpf_stats) and the user-space reader's CPU.
//
// Run: go test -run '^$' -bench . -benchtime 1x ./internal/tcpmon/   (root)
package tcpmon

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

func cpuTime() time.Duration {
	u, s := cpuSplit()
	return u + s
}

// cpuSplit is the process's user and system CPU time so far.
func cpuSplit() (user, sys time.Duration) {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

func BenchmarkSampleCPU(b *testing.B) {
	for _, tc := range []struct {
		n        int
		filtered bool // sample one connection (by port) among n sockets
	}{{10, false}, {1000, false}, {10000, false}, {10000, true}} {
		n := tc.n
		name := fmt.Sprintf("sockets=%d", n)
		if tc.filtered {
			name += "/port-filter"
		}
		b.Run(name, func(b *testing.B) {
			testutil.RequireRoot(b)
			var lim unix.Rlimit
			unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
			if lim.Cur < uint64(n+1000) {
				lim.Cur = min(lim.Max, uint64(n+1000))
				if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < uint64(n+200) {
					b.Skipf("need %d file descriptors, limit %d", n+200, lim.Cur)
				}
			}
			ns := testutil.NewNetNS(b)
			var ln net.Listener
			var conns []net.Conn
			ns.Do(b, func() error {
				var err error
				if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
					return err
				}
				acc := make(chan net.Conn, n)
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							close(acc)
							return
						}
						acc <- c
					}
				}()
				for i := 0; i < n/2; i++ {
					c, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						return fmt.Errorf("connection %d: %w", i, err)
					}
					conns = append(conns, c, <-acc)
				}
				return nil
			})
			b.Cleanup(func() {
				ln.Close()
				for _, c := range conns {
					c.Close()
				}
			})
			cfg := Config{NetNS: ns.Handle, Interval: 100 * time.Millisecond}
			want := n
			if tc.filtered {
				cfg.Filter.Port = uint16(conns[0].LocalAddr().(*net.TCPAddr).Port)
				want = 2
			}
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Sample(); err != nil { // warm the process cache
				b.Fatal(err)
			}
			const dur = 3 * time.Second
			b.ResetTimer()
			var cpu, wall, sys time.Duration
			samples := 0
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), dur)
				_, s0 := cpuSplit()
				c0, t0 := cpuTime(), time.Now()
				err := s.Run(ctx, func(fl []Flow) error {
					samples++
					if len(fl) < want {
						return fmt.Errorf("sampled %d flows, want %d", len(fl), want)
					}
					return nil
				})
				cpu += cpuTime() - c0
				wall += time.Since(t0)
				_, s1 := cpuSplit()
				sys += s1 - s0
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
			pct := 100 * cpu.Seconds() / wall.Seconds()
			b.ReportMetric(pct, "%core")
			b.ReportMetric(float64(cpu.Microseconds())/float64(samples)/1000, "ms-cpu/sample")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s at 10 Hz: %.2f%% of one core (%.3f ms CPU per sample, %.0f%% of it in the kernel; %d samples)",
				name, pct, float64(cpu.Microseconds())/float64(samples)/1000, 100*sys.Seconds()/cpu.Seconds(), samples)
		})
	}
}

func BenchmarkEventsCPU(b *testing.B) {
	// gap between the sender's 1448-byte writes: 0 = as fast as ACKs allow.
	// batch: the reader's MaxDelay (0: woken per event).
	for _, gap := range []time.Duration{0, 200 * time.Microsecond} {
		for _, batch := range []time.Duration{0, 50 * time.Millisecond} {
			b.Run(fmt.Sprintf("gap=%v/batch=%v", gap, batch), func(b *testing.B) { benchEvents(b, gap, batch) })
		}
	}
}

func benchEvents(b *testing.B, gap, batch time.Duration) {
	testutil.RequireRoot(b)
	p := testutil.NewVethPair(b)
	port := 47000 + int(time.Now().UnixNano()%1000)
	addr := net.JoinHostPort(p.AddrB.String(), strconv.Itoa(port))
	startHelper(b, p.B, "sink", addr)
	time.Sleep(300 * time.Millisecond) // let the sink listen
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	tr, err := OpenTracer(EventConfig{Probe: true, State: true, Ports: []uint16{uint16(port)}, RingSize: 4 << 20, MaxDelay: batch})
	if err != nil {
		b.Skipf("event mode: %v", err)
	}
	defer tr.Close()
	const dur = 3 * time.Second
	startHelper(b, p.A, "send", addr, "1448", gap.String(), (dur + time.Second).String(), "0s")
	time.Sleep(300 * time.Millisecond)
	b.ResetTimer()
	var cpu, wall, bpfTime time.Duration
	var events, acks, runs uint64
	sender := p.AddrA.String()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		bt0, br0 := tr.RunTime()
		c0, t0 := cpuTime(), time.Now()
		for {
			ev, err := tr.Next(ctx)
			if err != nil {
				break
			}
			events++
			if ev.Kind == "probe" && len(ev.Src) > len(sender) && ev.Src[:len(sender)] == sender {
				acks++
			}
		}
		cpu += cpuTime() - c0
		wall += time.Since(t0)
		bt1, br1 := tr.RunTime()
		bpfTime += bt1 - bt0
		runs += br1 - br0
		cancel()
	}
	secs := wall.Seconds()
	st := tr.Stats()
	b.ReportMetric(float64(acks)/secs, "acks/s")
	b.ReportMetric(float64(events)/secs, "events/s")
	b.ReportMetric(100*bpfTime.Seconds()/secs, "%core-bpf")
	b.ReportMetric(100*cpu.Seconds()/secs, "%core-reader")
	b.ReportMetric(0, "ns/op")
	perRun := 0.0
	if runs > 0 {
		perRun = float64(bpfTime.Nanoseconds()) / float64(runs)
	}
	b.Logf("event mode, batch %v: %.0f ACKs/s (%.0f events/s): BPF %.2f%% of one core (%.0f ns per run), reader %.2f%% of one core; dropped %d",
		batch, float64(acks)/secs, float64(events)/secs, 100*bpfTime.Seconds()/secs, perRun, 100*cpu.Seconds()/secs, st.Dropped)
}
